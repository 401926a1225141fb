//! Where a webhook may go, checked twice: when it is made (the url as
//! written, and what its name resolves to now) and before every attempt
//! (what the name resolves to then). The attempt connects to the address
//! checked here, never to one a second lookup returns, so a name that
//! answers a public address at the check and a private one a moment later
//! (DNS rebinding) still reaches only the checked one.
use caldera_spec::outbound::{OutboundPolicy, Refusal, Target};
use futures_util::future::BoxFuture;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// How long a name may take to resolve.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Turns a host name into addresses. The control plane asks the system;
/// tests hand in a table, so no test ever resolves or reaches a real name.
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: String, port: u16) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>>;
}

/// The system's resolver (getaddrinfo, off the async threads).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: String, port: u16) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), port)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// The addresses `target` stands for: fixed ones as they are, a name as
/// the resolver answers (within [`RESOLVE_TIMEOUT`]).
async fn addresses(target: &Target, resolver: &dyn Resolve) -> Result<Vec<IpAddr>, Refusal> {
    if let Some(fixed) = target.fixed_addresses() {
        return Ok(fixed);
    }
    let lookup = resolver.resolve(target.host_name(), target.port);
    match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Ok(Ok(_)) => Err(Refusal(format!("{} has no address", target.host_name()))),
        Ok(Err(e)) => Err(Refusal(format!(
            "{} does not resolve: {e}",
            target.host_name()
        ))),
        Err(_) => Err(Refusal(format!(
            "{} did not resolve within {} s",
            target.host_name(),
            RESOLVE_TIMEOUT.as_secs()
        ))),
    }
}

/// At subscription: the url as written, then every address its name
/// resolves to now. A name that does not resolve (yet) is accepted: each
/// attempt checks again.
pub async fn check_new(
    policy: &OutboundPolicy,
    resolver: &dyn Resolve,
    url: &str,
) -> Result<(), Refusal> {
    let target = policy.target(url)?;
    if let Ok(addrs) = addresses(&target, resolver).await {
        for ip in addrs {
            policy.check_address(&target, ip)?;
        }
    }
    Ok(())
}

/// Before an attempt: the address to connect to, every address the host
/// resolved to having passed the policy (one that does not refuses all:
/// a name that mixes a public and a private answer is not used).
pub async fn checked_address(
    policy: &OutboundPolicy,
    resolver: &dyn Resolve,
    url: &str,
) -> Result<SocketAddr, Refusal> {
    let target = policy.target(url)?;
    let addrs = addresses(&target, resolver).await?;
    for ip in &addrs {
        policy.check_address(&target, *ip)?;
    }
    Ok(SocketAddr::new(addrs[0], target.port))
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A resolver that answers from a table, and counts its lookups.
    #[derive(Default)]
    pub struct Table {
        pub names: HashMap<String, Vec<IpAddr>>,
        pub lookups: Arc<AtomicUsize>,
    }

    impl Table {
        pub fn with(pairs: &[(&str, &str)]) -> Table {
            let mut names: HashMap<String, Vec<IpAddr>> = HashMap::new();
            for (name, ip) in pairs {
                names
                    .entry(name.to_string())
                    .or_default()
                    .push(ip.parse().expect("a test address"));
            }
            Table {
                names,
                lookups: Arc::default(),
            }
        }
    }

    impl Resolve for Table {
        fn resolve(
            &self,
            host: String,
            _: u16,
        ) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
            self.lookups.fetch_add(1, Ordering::SeqCst);
            let found = self.names.get(&host).cloned();
            Box::pin(async move {
                found.ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such name")
                })
            })
        }
    }

    #[actix_rt::test]
    async fn a_name_is_checked_by_every_address_it_resolves_to() {
        let dns = Table::with(&[
            ("hooks.example.com", "93.184.216.34"),
            ("sneaky.example.com", "10.0.0.7"),
            ("mixed.example.com", "93.184.216.34"),
            ("mixed.example.com", "127.0.0.1"),
            ("metadata.example.com", "169.254.169.254"),
            ("v6.example.com", "fe80::1"),
        ]);
        let p = OutboundPolicy::default();
        assert_eq!(
            checked_address(&p, &dns, "https://hooks.example.com/h").await,
            Ok("93.184.216.34:443".parse().unwrap())
        );
        for url in [
            "https://sneaky.example.com/h",
            "https://mixed.example.com/h",
            "https://metadata.example.com/latest",
            "https://v6.example.com/h",
        ] {
            assert!(check_new(&p, &dns, url).await.is_err(), "{url} accepted");
            assert!(
                checked_address(&p, &dns, url).await.is_err(),
                "{url} would be reached"
            );
        }
        // Unknown now: accepted at subscription, refused at the attempt.
        assert_eq!(
            check_new(&p, &dns, "https://later.example.com/").await,
            Ok(())
        );
        assert!(checked_address(&p, &dns, "https://later.example.com/")
            .await
            .is_err());
        // localhost never asks the resolver.
        let before = dns.lookups.load(Ordering::SeqCst);
        assert!(check_new(&p, &dns, "https://localhost/").await.is_err());
        assert_eq!(dns.lookups.load(Ordering::SeqCst), before);
        // A name that answered a public address when it was subscribed and
        // answers the loopback at the attempt (DNS rebinding) is not reached.
        let mut rebinding = Table::with(&[("rebind.example.com", "93.184.216.34")]);
        assert_eq!(
            check_new(&p, &rebinding, "https://rebind.example.com/h").await,
            Ok(())
        );
        rebinding.names.insert(
            "rebind.example.com".into(),
            vec!["127.0.0.1".parse().unwrap()],
        );
        assert!(
            checked_address(&p, &rebinding, "https://rebind.example.com/h")
                .await
                .is_err()
        );
        // An operator's allowance opens the private answer.
        let allowed = OutboundPolicy::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            checked_address(&allowed, &dns, "https://sneaky.example.com/h").await,
            Ok("10.0.0.7:443".parse().unwrap())
        );
    }
}
