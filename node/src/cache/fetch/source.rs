//! Reading a version's bytes from a [`WeightSource`] starting at an offset:
//! a `file://` origin is opened and seeked; an `http://` or `https://`
//! origin or a peer is asked with `Range: bytes=N-` — 206 resumes at N, 200
//! restarts at 0.
use super::Tls;
use caldera_spec::weights::WeightSource;
use futures_util::stream::{self, LocalBoxStream, StreamExt};
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

/// An opened source: its bytes from `offset` (0 when it could not resume).
pub struct Opened {
    pub offset: u64,
    pub body: Body,
}

/// Opens `source` for `sha256` (of `size_bytes`) at `offset`. A peer is
/// told the size, so one still fetching the version may stream it on.
pub async fn open(
    source: &WeightSource,
    sha256: &str,
    size_bytes: u64,
    offset: u64,
    tls: &Tls,
) -> Result<Opened, String> {
    match source {
        WeightSource::Origin { uri } => {
            if let Some(path) = uri.strip_prefix("file://") {
                open_file(path, offset).await
            } else if uri.starts_with("http://") || uri.starts_with("https://") {
                open_http(uri, None, offset, tls)
                    .await
                    .map_err(Refusal::into_reason)
            } else {
                Err(format!(
                    "origin {uri:?} is neither file://, http:// nor https://"
                ))
            }
        }
        WeightSource::Peer { url, token, .. } => {
            let url = format!(
                "{}/v1/weights/{sha256}?size={size_bytes}",
                url.trim_end_matches('/')
            );
            let deadline = tokio::time::Instant::now() + GRANT_WAIT;
            loop {
                match open_http(&url, Some(token), offset, tls).await {
                    Err(Refusal::Refused(_)) if tokio::time::Instant::now() < deadline => {
                        tokio::time::sleep(GRANT_RETRY).await;
                    }
                    other => return other.map_err(Refusal::into_reason),
                }
            }
        }
    }
}

async fn open_file(path: &str, offset: u64) -> Result<Opened, String> {
    if !path.starts_with('/') {
        return Err(format!("file:// origin {path:?} is not an absolute path"));
    }
    let named = |e: std::io::Error| format!("{path}: {e}");
    let mut file = tokio::fs::File::open(path).await.map_err(named)?;
    file.seek(std::io::SeekFrom::Start(offset))
        .await
        .map_err(named)?;
    let path = path.to_string();
    let body = stream::unfold(Some(file), move |file| {
        let path = path.clone();
        async move {
            let mut file = file?;
            let mut buf = vec![0u8; FILE_CHUNK];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(buf), Some(file)))
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

async fn open_http(
    url: &str,
    token: Option<&str>,
    offset: u64,
    tls: &Tls,
) -> Result<Opened, Refusal> {
    let client = awc::Client::builder()
        .connector(awc::Connector::new().rustls_0_23(tls.0.clone()))
        .timeout(CONNECT_TIMEOUT)
        .finish();
    let mut request = client.get(url);
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
