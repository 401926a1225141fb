//! Where a webhook may go, checked twice: when it is made (the url as
//! written, and what its name resolves to now) and before every attempt
//! (what the name resolves to then). The attempt connects to the address
//! checked here, never to one a second lookup returns, so a name that
//! answers a public address at the check and a private one a moment later
//! (DNS rebinding) still reaches only the checked one.
use caldera_spec::outbound::{OutboundPolicy, Refusal, Target, NAME_NOT_ALLOWED};
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

/// Who reads a refusal. A refusal decided from the url's spelling (an
/// address written in it, credentials, plain http) is told to anyone; one
/// decided from what a name resolved to is told in full to the operator
/// only: a tenant reads [`NAME_NOT_ALLOWED`], so it cannot map the private
/// network's names by subscribing to them. The server log keeps the detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    Operator,
    Tenant,
}

impl Reader {
    /// The operator for a subscription without an owner, else its tenant.
    pub fn of_owner(owner: Option<&str>) -> Reader {
        match owner {
            None => Reader::Operator,
            Some(_) => Reader::Tenant,
        }
    }
}

/// Checks every address `target` resolved to; the refusal in words for `reader`.
fn check_resolved(
    policy: &OutboundPolicy,
    target: &Target,
    addrs: &[IpAddr],
    reader: Reader,
) -> Result<(), Refusal> {
    for ip in addrs {
        if let Err(detail) = policy.check_address(target, *ip) {
            tracing::info!(host = %target.host_name(), address = %ip, "webhook url refused: {detail}");
            return Err(match reader {
                Reader::Operator => detail,
                Reader::Tenant => Refusal(NAME_NOT_ALLOWED.to_string()),
            });
        }
    }
    Ok(())
}

/// At subscription: the url as written, then every address its name
/// resolves to now. A name that does not resolve (yet) is accepted: each
/// attempt checks again.
pub async fn check_new(
    policy: &OutboundPolicy,
    resolver: &dyn Resolve,
    url: &str,
    reader: Reader,
) -> Result<(), Refusal> {
    let target = policy.target(url)?;
    if let Ok(addrs) = addresses(&target, resolver).await {
        check_resolved(policy, &target, &addrs, reader)?;
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
    reader: Reader,
) -> Result<SocketAddr, Refusal> {
    let target = policy.target(url)?;
    let addrs = addresses(&target, resolver).await?;
    check_resolved(policy, &target, &addrs, reader)?;
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
            checked_address(&p, &dns, "https://hooks.example.com/h", Reader::Operator).await,
            Ok("93.184.216.34:443".parse().unwrap())
        );
        for url in [
            "https://sneaky.example.com/h",
            "https://mixed.example.com/h",
            "https://metadata.example.com/latest",
            "https://v6.example.com/h",
        ] {
            assert!(
                check_new(&p, &dns, url, Reader::Operator).await.is_err(),
                "{url} accepted"
            );
            assert!(
                checked_address(&p, &dns, url, Reader::Operator)
                    .await
                    .is_err(),
                "{url} would be reached"
            );
        }
        // Unknown now: accepted at subscription, refused at the attempt.
        assert_eq!(
            check_new(&p, &dns, "https://later.example.com/", Reader::Operator).await,
            Ok(())
        );
        assert!(
            checked_address(&p, &dns, "https://later.example.com/", Reader::Operator)
                .await
                .is_err()
        );
        // localhost never asks the resolver.
        let before = dns.lookups.load(Ordering::SeqCst);
        assert!(check_new(&p, &dns, "https://localhost/", Reader::Operator)
            .await
            .is_err());
        assert_eq!(dns.lookups.load(Ordering::SeqCst), before);
        // A name that answered a public address when it was subscribed and
        // answers the loopback at the attempt (DNS rebinding) is not reached.
        let mut rebinding = Table::with(&[("rebind.example.com", "93.184.216.34")]);
        assert_eq!(
            check_new(
                &p,
                &rebinding,
                "https://rebind.example.com/h",
                Reader::Operator
            )
            .await,
            Ok(())
        );
        rebinding.names.insert(
            "rebind.example.com".into(),
            vec!["127.0.0.1".parse().unwrap()],
        );
        assert!(checked_address(
            &p,
            &rebinding,
            "https://rebind.example.com/h",
            Reader::Operator
        )
        .await
        .is_err());
        // An operator's allowance opens the private answer.
        let allowed = OutboundPolicy::parse("10.0.0.0/8").unwrap();
        assert_eq!(
            checked_address(
                &allowed,
                &dns,
                "https://sneaky.example.com/h",
                Reader::Operator
            )
            .await,
            Ok("10.0.0.7:443".parse().unwrap())
        );
    }

    /// A tenant cannot tell what a name resolved to: the same words for a
    /// name answering a private, a link-local or a mixed set of addresses,
    /// naming neither the address nor its resolution; the operator reads
    /// the detail. A refusal from the url's spelling keeps its words.
    #[actix_rt::test]
    async fn a_tenant_reads_no_detail_of_what_a_refused_name_resolved_to() {
        let dns = Table::with(&[
            ("db.corp.example", "10.0.0.7"),
            ("metadata.example.com", "169.254.169.254"),
            ("mixed.example.com", "93.184.216.34"),
            ("mixed.example.com", "127.0.0.1"),
        ]);
        let p = OutboundPolicy::default();
        for host in [
            "db.corp.example",
            "metadata.example.com",
            "mixed.example.com",
        ] {
            let url = format!("https://{host}/h");
            for refused in [
                check_new(&p, &dns, &url, Reader::Tenant).await,
                checked_address(&p, &dns, &url, Reader::Tenant)
                    .await
                    .map(|_| ()),
            ] {
                let Err(Refusal(words)) = refused else {
                    panic!("{url} accepted for a tenant");
                };
                assert_eq!(words, NAME_NOT_ALLOWED, "{url}");
                for leak in ["resolves to", "10.0.0.7", "169.254", "127.0.0.1", host] {
                    assert!(!words.contains(leak), "{url}: {words:?} holds {leak:?}");
                }
            }
            let Err(Refusal(detail)) = check_new(&p, &dns, &url, Reader::Operator).await else {
                panic!("{url} accepted for the operator");
            };
            assert!(
                detail.contains("resolves to") && detail.contains(host),
                "{detail}"
            );
        }
        let Err(Refusal(spelled)) =
            check_new(&p, &dns, "https://127.0.0.1/h", Reader::Tenant).await
        else {
            panic!("a literal loopback accepted");
        };
        assert!(
            spelled.contains("loopback") || spelled.contains("127.0.0.1"),
            "{spelled}"
        );
    }
}
