//! Where a model version's weights may be read from: the operator's origin
//! allow-lists (`tenant-model-origins`, `operator-model-origins`) and the one
//! rule that applies them. Pure: the caller resolves host names and hands in
//! the addresses, so the control plane (at registration) and every agent
//! (again, just before it connects) decide alike, and tests need no DNS.
//!
//! A pattern is one of:
//! - `*`: anything (every scheme, host, address and path);
//! - `https://*`, `http://*`: that scheme to any host whose every address is
//!   public — never loopback, private, link-local, carrier-grade NAT,
//!   unique-local, multicast or unspecified, however it is spelled;
//! - `https://HOST`, `http://HOST[:PORT]`: that host by name or address
//!   (any port unless one is given), whatever it resolves to: the operator
//!   vouches for it (a private object store, `http://127.0.0.1` in tests);
//! - `file:///DIR/`: files under DIR, read without following links out of it
//!   and only if any user of the node could read them.
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// What an origin uri says, as far as the allow-list cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginUri {
    /// `http` or `https`; `host` lowercase, without brackets.
    Http {
        scheme: &'static str,
        host: String,
        port: u16,
    },
    /// `file://` and its absolute path.
    File { path: String },
}

/// The rules that applied to a version's registrant, carried with every
/// origin read so the agent checks the addresses it is about to connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginRules {
    pub allow: Vec<String>,
}

impl Default for OriginRules {
    /// Nothing: rules that were never given (a warm command without
    /// `origin`) must not open the node to every file and address its agent,
    /// as root, could read. Whoever means to allow says so.
    fn default() -> Self {
        OriginRules { allow: Vec::new() }
    }
}

impl OriginRules {
    /// Anything (`*`): what an operator's registration is allowed by default
    /// (`operator-model-origins`).
    pub fn anything() -> Self {
        OriginRules {
            allow: vec!["*".into()],
        }
    }
}

/// Why an origin uri cannot be read. The words reach the registrant (a
/// registration's refusal) and the node's log (a fetch that did not start).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginUriError {
    #[error("{uri:?} is neither file://, http:// nor https://")]
    Scheme { uri: String },
    #[error("an origin's uri may not carry a user or password")]
    Credentials,
    #[error("{uri:?} has no valid host[:port]")]
    Host { uri: String },
}

/// Why an operator's origin pattern is not one (a config key's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("{pattern:?}: a file pattern names an absolute directory, e.g. file:///mnt/models/")]
    FileNotAbsolute { pattern: String },
    #[error(
        "{pattern:?} is not an origin pattern: *, https://*, http://*, http(s)://HOST[:PORT] or file:///DIR/"
    )]
    NotAPattern { pattern: String },
}

/// Why the rules refuse an origin, in words for the registrant: the
/// control plane prefixes them with the field and the setting to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdmitted {
    #[error("no origin is allowed here (the rules allow nothing)")]
    NothingAllowed,
    #[error(transparent)]
    Uri(#[from] OriginUriError),
    #[error("file:// origins are not allowed here (allowed: {})", .allowed.join(", "))]
    File { allowed: Vec<String> },
    #[error("{scheme}://{host} is not an allowed origin (allowed: {})", .allowed.join(", "))]
    Host {
        scheme: &'static str,
        host: String,
        allowed: Vec<String>,
    },
    #[error(
        "{host} is a loopback, private, link-local or unspecified address; origins must be public hosts unless the operator lists them"
    )]
    NotPublic { host: String },
}

/// Parses an origin uri: `http(s)://host[:port]/...` or `file:///path`.
pub fn parse_origin_uri(uri: &str) -> Result<OriginUri, OriginUriError> {
    if let Some(path) = uri.strip_prefix("file://") {
        return Ok(OriginUri::File {
            path: path.to_string(),
        });
    }
    let (scheme, rest, default_port) = if let Some(r) = uri.strip_prefix("https://") {
        ("https", r, 443)
    } else if let Some(r) = uri.strip_prefix("http://") {
        ("http", r, 80)
    } else {
        return Err(OriginUriError::Scheme { uri: uri.into() });
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(OriginUriError::Credentials);
    }
    let (host, port) = split_host_port(authority, default_port)
        .ok_or_else(|| OriginUriError::Host { uri: uri.into() })?;
    Ok(OriginUri::Http { scheme, host, port })
}

/// `host`, `host:port`, `[v6]`, `[v6]:port` -> (lowercase host, port).
fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        // Brackets hold an IPv6 address and nothing else (no zone).
        h.parse::<std::net::Ipv6Addr>().ok()?;
        match after.strip_prefix(':') {
            Some(p) => (h, p.parse().ok()?),
            None if after.is_empty() => (h, default_port),
            None => return None,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, default_port),
        }
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    // A name is letters, digits, '-', '_' and '.': nothing a resolver or
    // an url parser could read another way.
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let ok = !host.is_empty() && (host.contains(':') || host.chars().all(plain));
    ok.then_some((host, port))
}

/// True for an address anyone on the internet could reach: not this host,
/// not a private, shared or link-local network, not multicast or unspecified
/// (the special-use blocks of `address_class`).
pub fn is_public(ip: IpAddr) -> bool {
    crate::address_class::special_use(ip).is_none()
}

/// A host whose last label is a number (`127.1`, `2130706433`,
/// `0x7f000001`): browsers and resolvers read it as an IPv4 address in some
/// spelling, so it is refused unless written plainly as `a.b.c.d`.
fn is_odd_numeric(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or(host);
    host.parse::<IpAddr>().is_err()
        && (last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"))
}

/// Names that mean this host whatever DNS says.
fn is_local_name(host: &str) -> bool {
    host == "localhost" || host.ends_with(".localhost")
}

/// Checks a pattern's shape (config validation).
pub fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    if pattern == "*" {
        return Ok(());
    }
    if let Some(dir) = pattern.strip_prefix("file://") {
        return if dir.starts_with('/') && !dir.split('/').any(|c| c == "..") {
            Ok(())
        } else {
            Err(PatternError::FileNotAbsolute {
                pattern: pattern.into(),
            })
        };
    }
    if pattern == "https://*" || pattern == "http://*" {
        return Ok(());
    }
    match host_pattern(pattern) {
        Some(_) => Ok(()),
        None => Err(PatternError::NotAPattern {
            pattern: pattern.into(),
        }),
    }
}

/// `http(s)://HOST[:PORT][/]` -> (scheme, host, the port if one is given).
fn host_pattern(pattern: &str) -> Option<(&'static str, String, Option<u16>)> {
    let (scheme, rest) = if let Some(r) = pattern.strip_prefix("https://") {
        ("https", r)
    } else {
        ("http", pattern.strip_prefix("http://")?)
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority == "*" || authority.contains(['/', '@', '?', '#']) {
        return None;
    }
    let (host, port) = split_host_port(authority, 0)?;
    Some((scheme, host, (port != 0).then_some(port)))
}

/// The file pattern that admits `path`, if one does (the directory its
/// reads are confined to).
pub fn file_root<'a>(allow: &'a [String], path: &str) -> Option<&'a str> {
    allow.iter().find_map(|p| {
        let dir = p.strip_prefix("file://")?;
        under(path, dir).then_some(dir)
    })
}

/// Whether `path` lies under `dir`, component by component, without `..`.
fn under(path: &str, dir: &str) -> bool {
    if path.split('/').any(|c| c == "..") {
        return false;
    }
    let dir = dir.trim_end_matches('/');
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
}

/// Whether `allow` admits `uri` when its host resolves to `addrs` (empty:
/// not resolved; only the host's own spelling is judged then). The error
/// says why, in words for the registrant.
pub fn admits(allow: &[String], uri: &str, addrs: &[IpAddr]) -> Result<(), NotAdmitted> {
    if allow.iter().any(|p| p == "*") {
        return Ok(());
    }
    if allow.is_empty() {
        return Err(NotAdmitted::NothingAllowed);
    }
    match parse_origin_uri(uri)? {
        OriginUri::File { path } => match file_root(allow, &path) {
            Some(_) => Ok(()),
            None => Err(NotAdmitted::File {
                allowed: allow.to_vec(),
            }),
        },
        OriginUri::Http { scheme, host, port } => {
            let named = allow
                .iter()
                .filter_map(|p| host_pattern(p))
                .any(|(s, h, pp)| s == scheme && h == host && pp.is_none_or(|pp| pp == port));
            if named {
                return Ok(());
            }
            if !allow.iter().any(|p| *p == format!("{scheme}://*")) {
                return Err(NotAdmitted::Host {
                    scheme,
                    host,
                    allowed: allow.to_vec(),
                });
            }
            let literal = host.parse::<IpAddr>().ok();
            let private = is_local_name(&host)
                || is_odd_numeric(&host)
                || literal.is_some_and(|ip| !is_public(ip))
                || addrs.iter().any(|ip| !is_public(*ip));
            if private {
                return Err(NotAdmitted::NotPublic { host });
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(!is_public(ip(private)), "{private}");
        }
        for public in ["1.1.1.1", "93.184.216.34", "2606:4700::1111"] {
            assert!(is_public(ip(public)), "{public}");
        }
    }

    /// The tenants' default: https to public hosts only, in every spelling.
    #[test]
    fn the_tenant_default_refuses_local_private_and_file_origins() {
        let allow = list(&["https://*"]);
        assert!(admits(
            &allow,
            "https://models.example.com/m.bin",
            &[ip("93.184.216.34")]
        )
        .is_ok());
        for (uri, addrs) in [
            ("file:///etc/shadow", vec![]),
            ("file:///proc/self/environ", vec![]),
            ("http://127.0.0.1:7070/v1/tenants", vec![]),
            ("https://127.0.0.1/x", vec![]),
            ("https://[::1]/x", vec![]),
            ("https://localhost/x", vec![]),
            ("https://LOCALHOST./x", vec![]),
            ("https://0.0.0.0/x", vec![]),
            ("https://169.254.169.254/latest", vec![]),
            ("https://10.0.0.5/m", vec![]),
            // A public-looking name that resolves to a private address.
            (
                "https://rebind.example.com/m",
                vec![ip("93.184.216.34"), ip("10.0.0.1")],
            ),
            ("https://user:pw@models.example.com/m", vec![]),
            ("https://127.1/m", vec![]),
            ("https://2130706433/m", vec![]),
            ("https://0x7f000001/m", vec![]),
            ("https://[fe80::1%25eth0]/m", vec![]),
            ("https://exa%6dple.com/m", vec![]),
        ] {
            assert!(admits(&allow, uri, &addrs).is_err(), "{uri} {addrs:?}");
        }
    }

    #[test]
    fn listed_hosts_and_directories_are_what_the_operator_vouches_for() {
        let allow = list(&[
            "https://*",
            "http://127.0.0.1",
            "http://store.internal:9000",
            "file:///mnt/models/",
        ]);
        for p in &allow {
            assert_eq!(check_pattern(p), Ok(()), "{p}");
        }
        assert!(admits(&allow, "http://127.0.0.1:4321/m", &[]).is_ok());
        assert!(admits(&allow, "http://store.internal:9000/m", &[ip("10.0.0.9")]).is_ok());
        assert!(admits(&allow, "http://store.internal:9001/m", &[ip("10.0.0.9")]).is_err());
        assert!(
            admits(&allow, "https://127.0.0.1/m", &[]).is_err(),
            "another scheme"
        );
        assert!(admits(&allow, "file:///mnt/models/llama.bin", &[]).is_ok());
        assert_eq!(
            file_root(&allow, "/mnt/models/a/b.bin"),
            Some("/mnt/models/")
        );
        for uri in [
            "file:///mnt/models/../../etc/shadow",
            "file:///mnt/models",
            "file:///mnt/modelsx/a",
        ] {
            assert!(admits(&allow, uri, &[]).is_err(), "{uri}");
        }
        assert!(admits(&list(&["*"]), "file:///etc/anything", &[]).is_ok());
        for bad in ["ftp://*", "file://relative/", "https://", "https://h/path"] {
            assert!(check_pattern(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_refusal_is_a_kind_whose_words_name_the_origin_and_the_rules() {
        let allow = list(&["https://*", "file:///mnt/models/"]);
        assert_eq!(
            admits(&[], "https://a.example/m", &[]),
            Err(NotAdmitted::NothingAllowed)
        );
        assert_eq!(
            admits(&allow, "ftp://a/m", &[]),
            Err(NotAdmitted::Uri(OriginUriError::Scheme {
                uri: "ftp://a/m".into()
            }))
        );
        assert_eq!(
            admits(&allow, "https://u@a/m", &[]),
            Err(NotAdmitted::Uri(OriginUriError::Credentials))
        );
        assert_eq!(
            parse_origin_uri("http://a b/"),
            Err(OriginUriError::Host {
                uri: "http://a b/".into()
            })
        );
        assert_eq!(
            admits(&allow, "file:///etc/x", &[])
                .unwrap_err()
                .to_string(),
            "file:// origins are not allowed here (allowed: https://*, file:///mnt/models/)"
        );
        assert_eq!(
            admits(&allow, "http://store.internal/m", &[]).unwrap_err().to_string(),
            "http://store.internal is not an allowed origin (allowed: https://*, file:///mnt/models/)"
        );
        let e = admits(&allow, "https://10.0.0.5/m", &[]).unwrap_err();
        assert_eq!(
            e,
            NotAdmitted::NotPublic {
                host: "10.0.0.5".into()
            }
        );
        assert!(
            e.to_string().starts_with("10.0.0.5 is a loopback, private"),
            "{e}"
        );
        assert_eq!(
            admits(&allow, "ftp://a/m", &[]).unwrap_err().to_string(),
            "\"ftp://a/m\" is neither file://, http:// nor https://"
        );
        assert_eq!(
            check_pattern("file://relative/"),
            Err(PatternError::FileNotAbsolute {
                pattern: "file://relative/".into()
            })
        );
        assert_eq!(
            check_pattern("ftp://*").unwrap_err().to_string(),
            "\"ftp://*\" is not an origin pattern: *, https://*, http://*, http(s)://HOST[:PORT] \
             or file:///DIR/"
        );
    }
}
