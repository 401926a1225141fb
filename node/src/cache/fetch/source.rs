//! Reading a version's bytes from a [`WeightSource`] starting at an offset:
//! a `file://` origin is opened (confined, when read for a tenant) and seeked; an `http://` or `https://`
//! origin or a peer is asked with `Range: bytes=N-` — 206 resumes at N, 200
//! restarts at 0.
use super::{Job, Tls};
use caldera_spec::confined_file::{self, ConfinedError};
use caldera_spec::origin::{self, NotAdmitted, OriginRules, OriginUri, OriginUriError};
use caldera_spec::weights::{OriginAccess, WeightSource};
use futures_util::stream::{self, LocalBoxStream, StreamExt};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// Read size of a `file://` origin.
const FILE_CHUNK: usize = 1 << 20;
/// Until the response headers of an `http://` source.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a peer's refusal (401: no live grant) is retried. The control
/// plane sends the peer its grant just before it sends this node the warm,
/// but the peer's agent may not have read it yet when this node's GET
/// arrives (seven receivers granted at once queue on one peer's loop); a
/// refusal reported at once sent the receiver to the origin instead, a
/// second origin read of the version.
const GRANT_WAIT: Duration = Duration::from_secs(3);
/// Between two tries of a refusing peer.
const GRANT_RETRY: Duration = Duration::from_millis(100);

/// Bytes from a source, in chunks; an error names what went wrong.
pub type Body = LocalBoxStream<'static, Result<Vec<u8>, String>>;

/// Why a source did not open. The words are the fetch's failure reason
/// (the agent's log and the cache report the control plane shows).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("origin {uri:?} is neither file://, http:// nor https://")]
    Scheme { uri: String },
    #[error("file:// origin {path:?} is not an absolute path")]
    NotAbsolute { path: String },
    #[error("origin refused: {0}")]
    Refused(#[source] NotAdmitted),
    #[error(transparent)]
    Uri(#[from] OriginUriError),
    #[error("{uri} is not an http(s) origin")]
    NotHttp { uri: String },
    #[error("{host}: does not resolve: {source}")]
    Unresolved {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{uri}: its host resolves to no address")]
    NoAddress { uri: String },
    #[error(transparent)]
    Confined(#[from] ConfinedError),
    #[error("opening {uri}: {source}")]
    Blocking {
        uri: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error("{path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// An http source or peer answered with something other than the bytes.
    #[error("{0}")]
    Http(String),
}

/// An opened source: its bytes from `offset` (0 when it could not resume).
pub struct Opened {
    pub offset: u64,
    pub body: Body,
}

/// Opens `job`'s source at `offset`. A peer is told the size, so one still
/// fetching the version may stream it on. An origin is read only as its
/// registrant's allow-list says (`job.origin`), checked here again: a file
/// confined to its tree, a host at an address the rules admit (resolved
/// once, and connected to at that address).
pub async fn open(job: &Job, offset: u64) -> Result<Opened, SourceError> {
    let (sha256, size_bytes, tls) = (&job.sha256, job.size_bytes, &job.tls);
    match &job.source {
        WeightSource::Origin { uri } => {
            if let Some(path) = uri.strip_prefix("file://") {
                let file = open_origin_file(uri, path, &job.origin).await?;
                read_file(file, path, offset, size_bytes).await
            } else if uri.starts_with("http://") || uri.starts_with("https://") {
                // Each checked address in turn, as a resolver's answer is
                // tried (`localhost` may answer ::1 first, served on 127.0.0.1).
                let mut why = String::new();
                for addr in origin_addresses(uri, &job.origin).await? {
                    match open_http(uri, None, offset, tls, Some(addr)).await {
                        Ok(opened) => return Ok(opened),
                        Err(e) => why = e.into_reason(),
                    }
                }
                Err(SourceError::Http(why))
            } else {
                Err(SourceError::Scheme { uri: uri.clone() })
            }
        }
        WeightSource::Peer { url, token, .. } => {
            let url = format!(
                "{}/v1/weights/{sha256}?size={size_bytes}",
                url.trim_end_matches('/')
            );
            let deadline = tokio::time::Instant::now() + GRANT_WAIT;
            loop {
                match open_http(&url, Some(token), offset, tls, None).await {
                    Err(Refusal::Refused(_)) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(GRANT_RETRY).await;
                    }
                    other => return other.map_err(|r| SourceError::Http(r.into_reason())),
                }
            }
        }
    }
}

/// Opens a `file://` origin: inside its confining tree as the tenant could
/// (a checkpoint, a tenant's file under an allowed directory), else only if
/// the registrant's rules admit the path.
async fn open_origin_file(
    uri: &str,
    path: &str,
    access: &OriginAccess,
) -> Result<tokio::fs::File, SourceError> {
    if !path.starts_with('/') {
        return Err(SourceError::NotAbsolute { path: path.into() });
    }
    let file = match &access.confined {
        Some(rule) => {
            let (path, rule) = (std::path::PathBuf::from(path), rule.clone());
            tokio::task::spawn_blocking(move || confined_file::open(&path, &rule))
                .await
                .map_err(|source| SourceError::Blocking {
                    uri: uri.into(),
                    source,
                })??
        }
        None => {
            origin::admits(&access.rules.allow, uri, &[]).map_err(SourceError::Refused)?;
            std::fs::File::open(path).map_err(|source| SourceError::File {
                path: path.into(),
                source,
            })?
        }
    };
    Ok(tokio::fs::File::from_std(file))
}

/// The addresses to connect to for an `http(s)://` origin: its host
/// resolved once, every address admitted by the registrant's rules.
async fn origin_addresses(
    uri: &str,
    access: &OriginAccess,
) -> Result<Vec<SocketAddr>, SourceError> {
    let (host, port) = match origin::parse_origin_uri(uri)? {
        OriginUri::Http { host, port, .. } => (host, port),
        OriginUri::File { .. } => return Err(SourceError::NotHttp { uri: uri.into() }),
    };
    let resolved: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|source| SourceError::Unresolved {
                host: host.clone(),
                source,
            })?
            .collect(),
    };
    checked_addresses(uri, &access.rules, resolved)
}

/// `resolved`, once the rules admit every one of them: a name with one
/// address the rules refuse is refused whole, so no resolution order
/// reaches it.
pub fn checked_addresses(
    uri: &str,
    rules: &OriginRules,
    resolved: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, SourceError> {
    let ips: Vec<IpAddr> = resolved.iter().map(SocketAddr::ip).collect();
    origin::admits(&rules.allow, uri, &ips).map_err(SourceError::Refused)?;
    if resolved.is_empty() {
        return Err(SourceError::NoAddress { uri: uri.into() });
    }
    Ok(resolved)
}

/// The file's bytes from `offset`, never past `size_bytes`: a declared
/// size that lies reads nothing beyond it.
async fn read_file(
    mut file: tokio::fs::File,
    path: &str,
    offset: u64,
    size_bytes: u64,
) -> Result<Opened, SourceError> {
    let named = |source: std::io::Error| SourceError::File {
        path: path.into(),
        source,
    };
    file.seek(std::io::SeekFrom::Start(offset))
        .await
        .map_err(named)?;
    let path = path.to_string();
    let left = size_bytes.saturating_sub(offset);
    let body = stream::unfold(Some((file, left)), move |state| {
        let path = path.clone();
        async move {
            let (mut file, left) = state?;
            if left == 0 {
                return None;
            }
            let mut buf = vec![0u8; FILE_CHUNK.min(left as usize)];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(buf), Some((file, left - n as u64))))
                }
                Err(e) => Some((Err(format!("{path}: {e}")), None)),
            }
        }
    });
    Ok(Opened {
        offset,
        body: body.boxed_local(),
    })
}

/// Why an HTTP source did not open: refused (401/403: no live grant, which
/// a peer may lift a moment later), or anything else.
enum Refusal {
    Refused(String),
    Other(String),
}

impl Refusal {
    fn into_reason(self) -> String {
        match self {
            Refusal::Refused(r) | Refusal::Other(r) => r,
        }
    }
}

impl From<String> for Refusal {
    fn from(r: String) -> Self {
        Refusal::Other(r)
    }
}

/// GETs `url` (at `addr` when given: the address its host was checked
/// at). Redirects are not followed: a source is read where it was checked.
async fn open_http(
    url: &str,
    token: Option<&str>,
    offset: u64,
    tls: &Tls,
    addr: Option<SocketAddr>,
) -> Result<Opened, Refusal> {
    let client = awc::Client::builder()
        .connector(awc::Connector::new().rustls_0_23(tls.0.clone()))
        .timeout(CONNECT_TIMEOUT)
        .disable_redirects()
        .finish();
    let mut request = client.get(url);
    if let Some(addr) = addr {
        request = request.address(addr);
    }
    if let Some(token) = token {
        request = request.insert_header(("Authorization", format!("Bearer {token}")));
    }
    if offset > 0 {
        request = request.insert_header(("Range", format!("bytes={offset}-")));
    }
    let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = response.status().as_u16();
    let offset = match status {
        206 => {
            let range = response
                .headers()
                .get("content-range")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !range.starts_with(&format!("bytes {offset}-")) {
                return Err(Refusal::Other(format!(
                    "{url}: asked for bytes={offset}-, got content-range {range:?}"
                )));
            }
            offset
        }
        200 => 0,
        401 | 403 => {
            return Err(Refusal::Refused(format!(
                "{url}: refused ({status}): no live grant"
            )))
        }
        404 => return Err(format!("{url}: the source does not hold it (404)").into()),
        416 => return Err(format!("{url}: range bytes={offset}- not satisfiable (416)").into()),
        s => return Err(format!("{url}: answered {s}").into()),
    };
    let url = url.to_string();
    let body = response.map(move |chunk| match chunk {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(e) => Err(format!("{url}: cut mid-transfer: {e}")),
    });
    Ok(Opened {
        offset,
        body: body.boxed_local(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    /// A resolver stub: the addresses are what a lookup answered; nothing
    /// connects. A tenant's name that resolves (even in part) to this host
    /// or a private network is refused before any connection.
    #[test]
    fn a_tenants_origin_is_connected_to_only_at_an_address_its_rules_admit() {
        let tenant = OriginRules {
            allow: vec!["https://*".into()],
        };
        let uri = "https://weights.example.com/m.bin";
        let public = addrs(&["93.184.216.34:443"]);
        assert_eq!(
            checked_addresses(uri, &tenant, public.clone()).ok(),
            Some(public)
        );
        for rebound in [
            addrs(&["127.0.0.1:443"]),
            addrs(&["93.184.216.34:443", "10.0.0.7:443"]),
            addrs(&["[::1]:443"]),
            addrs(&["169.254.169.254:443"]),
        ] {
            let e = checked_addresses(uri, &tenant, rebound).unwrap_err();
            assert!(
                matches!(e, SourceError::Refused(NotAdmitted::NotPublic { .. })),
                "{e:?}"
            );
            assert!(e.to_string().starts_with("origin refused: "), "{e}");
        }
        let none = checked_addresses(uri, &tenant, vec![]).unwrap_err();
        assert!(matches!(none, SourceError::NoAddress { .. }), "{none:?}");
        assert_eq!(
            none.to_string(),
            "https://weights.example.com/m.bin: its host resolves to no address"
        );
        // The operator's default admits its own private store.
        let private = addrs(&["10.0.0.7:9000"]);
        assert!(
            checked_addresses("http://store:9000/m", &OriginRules::anything(), private).is_ok()
        );
        // Rules never given allow nothing, not even a public address.
        let e = checked_addresses(uri, &OriginRules::default(), addrs(&["93.184.216.34:443"]));
        assert!(e.is_err(), "{e:?}");
    }

    #[actix_rt::test]
    async fn a_file_origin_is_read_only_where_the_rules_allow_and_never_past_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.bin");
        std::fs::write(&path, b"0123456789secret").unwrap();
        let uri = format!("file://{}", path.display());
        let tenant = OriginAccess {
            rules: OriginRules {
                allow: vec!["https://*".into()],
            },
            confined: None,
        };
        let e = open_origin_file(&uri, path.to_str().unwrap(), &tenant)
            .await
            .unwrap_err();
        assert!(
            matches!(e, SourceError::Refused(NotAdmitted::File { .. })),
            "{e:?}"
        );
        assert!(e.to_string().contains("origin refused"), "{e}");
        // A warm command without rules reads no file.
        let e = open_origin_file(&uri, path.to_str().unwrap(), &OriginAccess::default())
            .await
            .unwrap_err();
        assert!(
            matches!(e, SourceError::Refused(NotAdmitted::NothingAllowed)),
            "{e:?}"
        );
        let operator = OriginAccess {
            rules: OriginRules::anything(),
            confined: None,
        };
        let file = open_origin_file(&uri, path.to_str().unwrap(), &operator)
            .await
            .unwrap();
        let mut opened = read_file(file, "w", 2, 10).await.unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = opened.body.next().await {
            got.extend(chunk.unwrap());
        }
        assert_eq!(got, b"23456789", "bytes 2..10 only");
    }
}
