//! Where the control plane may send a request on a tenant's behalf (a
//! webhook delivery), and what an operator allows beyond that.
//!
//! The default is https to public addresses only. An operator's allow-list
//! (hosts, addresses and CIDR blocks) opens plain http and non-public
//! addresses for what it names, nothing else. An url is read the way a
//! browser or `curl` reads it (WHATWG): `127.1`, `2130706433`, `0x7f000001`
//! and `0177.0.0.1` are all 127.0.0.1, so no spelling of an address gets
//! past the check. Names are checked again after resolution, address by
//! address, by the caller that resolves them ([`OutboundPolicy::check_address`]);
//! it then connects to the address it checked, never resolving twice.
//! No I/O here.
use crate::address_class::{in_v4, in_v6, special_use};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Where an url points, once read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    pub host: TargetHost,
    /// The url's port, or its scheme's (80, 443).
    pub port: u16,
}

/// An url's host: a name to resolve, or an address as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetHost {
    /// Lower case, without a trailing dot.
    Name(String),
    Ip(IpAddr),
}

impl Target {
    /// The addresses the host stands for without asking DNS: an address
    /// itself, and `localhost` names (RFC 6761: always the loopback).
    pub fn fixed_addresses(&self) -> Option<Vec<IpAddr>> {
        match &self.host {
            TargetHost::Ip(ip) => Some(vec![*ip]),
            TargetHost::Name(n) if n == "localhost" || n.ends_with(".localhost") => Some(vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]),
            TargetHost::Name(_) => None,
        }
    }

    /// The host as a resolver takes it.
    pub fn host_name(&self) -> String {
        match &self.host {
            TargetHost::Name(n) => n.clone(),
            TargetHost::Ip(ip) => ip.to_string(),
        }
    }
}

/// One entry of the operator's allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    Name(String),
    V4(u32, u8),
    V6(u128, u8),
}

/// What an operator allows beyond https to public addresses: plain http,
/// and whatever addresses the entries name (`webhook-allow-hosts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    allowed: Vec<Allowed>,
}

/// Why an url or an address is refused, in words for the url's author.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An allow-list entry that is not a host, an address or a CIDR block,
/// named as the operator wrote it (the config key's error message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("entry {entry:?}: {problem}")]
pub struct BadAllowEntry {
    pub entry: String,
    pub problem: EntryProblem,
}

/// What is wrong with one allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("{len:?} is not a prefix length")]
    PrefixLength { len: String },
    #[error("the prefix length is longer than the address")]
    PrefixTooLong,
    #[error("{addr:?} is not an IP address")]
    NotAnAddress { addr: String },
    #[error("not a host name, an IP address or a CIDR block")]
    NotAHost,
}

/// A config error's message is these words as they are.
impl From<BadAllowEntry> for String {
    fn from(e: BadAllowEntry) -> String {
        e.to_string()
    }
}

/// What a tenant reads when a host name is refused for what it resolved
/// to: the same words whatever the address, so subscribing is no way to
/// learn which internal names resolve to private addresses. The operator
/// and the server log get the detail ([`OutboundPolicy::check_address`]).
pub const NAME_NOT_ALLOWED: &str = "this host is not allowed for webhooks (https to public addresses, or a host the operator allows)";

/// How a refusal tells the author what an operator can do about it.
const ASK_OPERATOR: &str =
    "unless the operator allows the host (the server's webhook-allow-hosts setting)";

impl OutboundPolicy {
    /// Reads an allow-list: entries separated by commas or spaces, each a
    /// host name (`hooks.internal`), an address (`127.0.0.1`, `::1`) or a
    /// CIDR block (`10.0.0.0/8`, `fd00::/8`). Empty: nothing beyond the
    /// default. The error names the entry.
    pub fn parse(list: &str) -> Result<OutboundPolicy, BadAllowEntry> {
        let mut allowed = Vec::new();
        for entry in list.split([',', ' ', '\t', '\n']).filter(|e| !e.is_empty()) {
            allowed.push(parse_entry(entry).map_err(|problem| BadAllowEntry {
                entry: entry.into(),
                problem,
            })?);
        }
        Ok(OutboundPolicy { allowed })
    }

    /// Reads `url` and checks what can be checked without resolving it: an
    /// http(s) url with a host, no user name or password, plain http only
    /// to an allowed host, and an address written in it (or `localhost`)
    /// public or allowed.
    pub fn target(&self, url: &str) -> Result<Target, Refusal> {
        let parsed =
            url::Url::parse(url).map_err(|e| Refusal(format!("the url cannot be read ({e})")))?;
        let https = match parsed.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(Refusal(format!(
                    "scheme {other:?} is not allowed: webhooks are http:// or https:// only"
                )))
            }
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(Refusal(
                "the url holds a user name or password: credentials do not belong in a webhook url (deliveries are signed; a receiver that needs a token can take it in the path)".into(),
            ));
        }
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) => {
                TargetHost::Name(d.trim_end_matches('.').to_ascii_lowercase())
            }
            Some(url::Host::Ipv4(v4)) => TargetHost::Ip(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => TargetHost::Ip(IpAddr::V6(v6)),
            None => return Err(Refusal("the url names no host".into())),
        };
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| Refusal("the url names no port".into()))?;
        let target = Target { https, host, port };
        if !https && !self.host_allowed(&target) {
            return Err(Refusal(format!(
                "plain http:// is not allowed to {}: use https:// {ASK_OPERATOR}",
                target.host_name()
            )));
        }
        if let Some(fixed) = target.fixed_addresses() {
            for ip in fixed {
                self.check_address(&target, ip).map_err(|_| {
                    Refusal(format!(
                        "{} is a {} address: webhooks reach public addresses only, {ASK_OPERATOR}",
                        target.host_name(),
                        special_use(ip).unwrap_or("non-public")
                    ))
                })?;
            }
        }
        Ok(target)
    }

    /// Whether `target` may be reached at `ip`, one of the addresses its
    /// host resolved to: a public address, one an entry allows, or any
    /// address of a host allowed by name.
    pub fn check_address(&self, target: &Target, ip: IpAddr) -> Result<(), Refusal> {
        if special_use(ip).is_none() || self.ip_allowed(ip) || self.name_allowed(target) {
            return Ok(());
        }
        Err(Refusal(format!(
            "{} resolves to an address webhooks may not reach (not public), {ASK_OPERATOR}",
            target.host_name()
        )))
    }

    /// Whether the host itself is on the allow-list (by name, or an address
    /// written in the url that an entry covers).
    fn host_allowed(&self, t: &Target) -> bool {
        match &t.host {
            TargetHost::Ip(ip) => self.ip_allowed(*ip),
            TargetHost::Name(_) => self.name_allowed(t),
        }
    }

    fn name_allowed(&self, t: &Target) -> bool {
        let TargetHost::Name(name) = &t.host else {
            return false;
        };
        self.allowed
            .iter()
            .any(|a| matches!(a, Allowed::Name(n) if n == name))
    }

    fn ip_allowed(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        self.allowed.iter().any(|a| match (a, ip) {
            (Allowed::V4(net, len), IpAddr::V4(v4)) => in_v4(u32::from(v4), *net, *len),
            (Allowed::V6(net, len), IpAddr::V6(v6)) => in_v6(u128::from(v6), *net, *len),
            _ => false,
        })
    }
}

fn parse_entry(entry: &str) -> Result<Allowed, EntryProblem> {
    if let Some((addr, len)) = entry.split_once('/') {
        let len: u8 = len
            .parse()
            .map_err(|_| EntryProblem::PrefixLength { len: len.into() })?;
        return match addr.parse::<IpAddr>() {
            Ok(IpAddr::V4(v4)) if len <= 32 => Ok(Allowed::V4(u32::from(v4), len)),
            Ok(IpAddr::V6(v6)) if len <= 128 => Ok(Allowed::V6(u128::from(v6), len)),
            Ok(_) => Err(EntryProblem::PrefixTooLong),
            Err(_) => Err(EntryProblem::NotAnAddress { addr: addr.into() }),
        };
    }
    let bare = entry.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(match ip {
            IpAddr::V4(v4) => Allowed::V4(u32::from(v4), 32),
            IpAddr::V6(v6) => Allowed::V6(u128::from(v6), 128),
        });
    }
    // Another spelling of an address (`127.1`) reads as one, as in an url.
    match url::Host::parse(entry) {
        Ok(url::Host::Ipv4(v4)) => Ok(Allowed::V4(u32::from(v4), 32)),
        Ok(url::Host::Domain(d)) if !d.contains(['/', '@', ':']) => {
            Ok(Allowed::Name(d.trim_end_matches('.').to_ascii_lowercase()))
        }
        _ => Err(EntryProblem::NotAHost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(p: &OutboundPolicy, url: &str) -> bool {
        p.target(url).is_err()
    }

    /// Every spelling of an internal address is refused with the default
    /// policy, over https too.
    #[test]
    fn the_default_refuses_every_spelling_of_an_internal_address() {
        let p = OutboundPolicy::default();
        for host in [
            "127.0.0.1",
            "127.1",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "0x7f.0.0.1",
            "localhost",
            "LOCALHOST.",
            "api.localhost",
            "0.0.0.0",
            "0",
            "[::1]",
            "[::]",
            "[::ffff:127.0.0.1]",
            "[::ffff:7f00:1]",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.0.10",
            "169.254.169.254",
            "[fc00::1]",
            "[fd00:ec2::254]",
            "[fe80::1]",
            "127.0.0.%31",
        ] {
            for scheme in ["http", "https"] {
                let url = format!("{scheme}://{host}:8080/hook");
                assert!(refused(&p, &url), "{url} was allowed");
            }
        }
    }

    #[test]
    fn credentials_and_plain_http_to_public_hosts_are_refused() {
        let p = OutboundPolicy::default();
        for url in [
            "https://user:pass@hooks.example.com/x",
            "https://user@hooks.example.com/x",
            "http://hooks.example.com/x",
            "http://93.184.216.34/x",
            "ftp://hooks.example.com/",
        ] {
            assert!(refused(&p, url), "{url} was allowed");
        }
        let why = p.target("https://u:p@hooks.example.com/").unwrap_err().0;
        assert!(why.contains("user name or password"), "{why}");
        let why = p.target("https://127.1/").unwrap_err().0;
        assert!(
            why.contains("loopback") && why.contains("webhook-allow-hosts"),
            "{why}"
        );
        let t = p.target("https://Hooks.Example.com./x").unwrap();
        assert_eq!(
            (t.host, t.port),
            (TargetHost::Name("hooks.example.com".into()), 443)
        );
        assert!(!refused(&p, "https://93.184.216.34:8443/x"));
    }

    #[test]
    fn an_allow_list_opens_http_and_the_addresses_it_names_only() {
        let p = OutboundPolicy::parse("127.0.0.0/8, hooks.internal ::1").unwrap();
        for ok in [
            "http://127.0.0.1:9000/h",
            "http://127.1:9000/h",
            "http://[::1]:9000/h",
            "http://[::ffff:127.0.0.1]:9000/h",
            "http://hooks.internal/h",
            "https://hooks.example.com/h",
        ] {
            assert!(!refused(&p, ok), "{ok} was refused");
        }
        for bad in [
            "http://localhost:9000/h",
            "http://10.0.0.1/h",
            "https://169.254.169.254/latest/meta-data",
            "http://hooks.example.com/h",
            "http://u:p@127.0.0.1:9000/h",
        ] {
            assert!(refused(&p, bad), "{bad} was allowed");
        }
        // After resolution: a name allowed by name may resolve anywhere;
        // any other name only to public or allowed addresses.
        let internal = p.target("http://hooks.internal/").unwrap();
        let public = p.target("https://hooks.example.com/").unwrap();
        let ten: IpAddr = "10.9.8.7".parse().unwrap();
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(p.check_address(&internal, ten).is_ok());
        assert!(p.check_address(&public, ten).is_err());
        assert!(p.check_address(&public, lo).is_ok());
        assert!(p.check_address(&public, "8.8.8.8".parse().unwrap()).is_ok());
    }

    #[test]
    fn a_bad_allow_list_entry_is_named() {
        for bad in ["10.0.0.0/33", "10.0.0.0/x", "nothost/8", "a@b", "http://x"] {
            let e = OutboundPolicy::parse(&format!("127.0.0.1,{bad}")).unwrap_err();
            assert_eq!(e.entry, bad);
            assert!(e.to_string().contains(bad), "{e}");
        }
        let problem = |list: &str| OutboundPolicy::parse(list).unwrap_err().problem;
        assert_eq!(problem("10.0.0.0/33"), EntryProblem::PrefixTooLong);
        assert_eq!(
            problem("10.0.0.0/x"),
            EntryProblem::PrefixLength { len: "x".into() }
        );
        assert_eq!(
            problem("nothost/8"),
            EntryProblem::NotAnAddress {
                addr: "nothost".into()
            }
        );
        assert_eq!(problem("a@b"), EntryProblem::NotAHost);
        assert_eq!(
            String::from(OutboundPolicy::parse("::1 fd00::/129").unwrap_err()),
            "entry \"fd00::/129\": the prefix length is longer than the address"
        );
        assert_eq!(
            OutboundPolicy::parse(" , ").unwrap(),
            OutboundPolicy::default()
        );
    }
}
