//! The origin allow-lists as configured (`models.tenant-model-origins`,
//! `models.operator-model-origins`) and their check at registration. The rule
//! itself is `caldera_spec::origin`; every agent applies it again to the
//! addresses it is about to connect to, so a name that resolves elsewhere
//! later (DNS rebinding) is still refused.
use crate::errors::{ActorError, Result};
use caldera_spec::origin::{self, OriginRules, OriginUri};
use caldera_spec::weights::{ConfinedRead, OriginAccess};
use caldera_spec::ModelVersionRecord;
use serde::{de, Deserialize, Deserializer, Serialize};
use std::net::IpAddr;
use std::time::Duration;

/// Longest wait for a registration's host name to resolve; one that does
/// not resolve in time is judged by its spelling, and by each node's own
/// lookup before it reads.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// A list of origin patterns: a TOML array, or in the environment one
/// string, comma-separated (`https://*,http://127.0.0.1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OriginList(pub Vec<String>);

impl OriginList {
    pub fn of(patterns: &[&str]) -> OriginList {
        OriginList(patterns.iter().map(|p| p.to_string()).collect())
    }

    /// The first pattern that is not one, with why.
    pub fn problem(&self) -> Option<String> {
        self.0
            .iter()
            .find_map(|p| origin::check_pattern(p).err().map(|e| e.to_string()))
    }

    pub fn rules(&self) -> OriginRules {
        OriginRules {
            allow: self.0.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for OriginList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<String>),
            Text(String),
        }
        let list = match Form::deserialize(d)? {
            Form::List(l) => l,
            Form::Text(t) => t
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
        };
        let list = OriginList(list);
        match list.problem() {
            Some(p) => Err(de::Error::custom(p)),
            None => Ok(list),
        }
    }
}

/// The rules for a registration by `owner` (`None`: the operator).
pub fn rules_for(config: &crate::config::ServerConfig, owner: Option<&str>) -> OriginRules {
    match owner {
        Some(_) => config.models.tenant_model_origins.rules(),
        None => config.models.operator_model_origins.rules(),
    }
}

/// How the agents may read `rec`'s origin: its registrant's rules, and a
/// confined read for a checkpoint, or for a tenant's file under a directory
/// the operator allows (only what any user of the node could read).
pub fn access(config: &crate::config::ServerConfig, rec: &ModelVersionRecord) -> OriginAccess {
    let rules = rules_for(config, rec.owner.as_deref());
    let confined = rec.checkpoint.clone().or_else(|| {
        let path = rec.spec.weights.uri.strip_prefix("file://")?;
        let root = origin::file_root(&rules.allow, path).filter(|_| rec.owner.is_some())?;
        Some(ConfinedRead {
            root: root.to_string(),
            owner_reads: false,
        })
    });
    OriginAccess { rules, confined }
}

/// Checks `uri` against `rules`, resolving its host (a failed or slow
/// lookup is judged by the name alone). Field `weights.uri`.
pub async fn check_registration(rules: &OriginRules, uri: &str, who: &str) -> Result<()> {
    let addrs = match origin::parse_origin_uri(uri) {
        Ok(OriginUri::Http { host, port, .. }) if host.parse::<IpAddr>().is_err() => {
            resolve(&host, port).await
        }
        _ => Vec::new(),
    };
    judge(rules, uri, &addrs, who)
}

/// The decision, given the addresses the host resolved to.
pub fn judge(rules: &OriginRules, uri: &str, addrs: &[IpAddr], who: &str) -> Result<()> {
    origin::admits(&rules.allow, uri, addrs).map_err(|why| {
        ActorError::OriginNotAllowed(format!(
            "weights.uri: {why}; {who}'s origins are set by the operator ({})",
            if who == "the operator" {
                "models.operator-model-origins"
            } else {
                "models.tenant-model-origins"
            }
        ))
    })
}

async fn resolve(host: &str, port: u16) -> Vec<IpAddr> {
    let lookup = tokio::net::lookup_host((host.to_string(), port));
    match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_from_toml_or_a_comma_separated_variable_and_bad_patterns_are_named() {
        let from_env: OriginList =
            serde_json::from_str(r#""https://*, http://127.0.0.1""#).unwrap();
        assert_eq!(from_env, OriginList::of(&["https://*", "http://127.0.0.1"]));
        let from_toml: OriginList = serde_json::from_str(r#"["file:///mnt/models/"]"#).unwrap();
        assert_eq!(from_toml, OriginList::of(&["file:///mnt/models/"]));
        let bad = serde_json::from_str::<OriginList>(r#""ftp://*""#).unwrap_err();
        assert!(bad.to_string().contains("ftp://*"), "{bad}");
    }

    /// What each warm command tells the node: the registrant's rules, and
    /// a confined read for a checkpoint or a tenant's file under an allowed
    /// directory; the operator's own files are read as before.
    #[test]
    fn the_access_a_node_is_given_follows_the_registrant() {
        let mut config = crate::config::ServerConfig::default();
        config.models.tenant_model_origins = OriginList::of(&["https://*", "file:///mnt/shared/"]);
        let rec = |owner: Option<&str>, uri: &str| {
            let mut r: ModelVersionRecord = serde_json::from_value(serde_json::json!({
                "spec": {"name": "m", "version": "v1",
                    "weights": {"uri": uri, "size_bytes": 1, "sha256": "ab".repeat(32)}},
                "state": "registered", "registered_at_ms": 0}))
            .unwrap();
            r.owner = owner.map(str::to_string);
            r
        };
        let tenant_file = access(&config, &rec(Some("t"), "file:///mnt/shared/m.bin"));
        assert_eq!(
            tenant_file.rules.allow,
            ["https://*", "file:///mnt/shared/"]
        );
        assert_eq!(
            tenant_file.confined,
            Some(ConfinedRead {
                root: "/mnt/shared/".into(),
                owner_reads: false
            })
        );
        let operator = access(&config, &rec(None, "file:///mnt/shared/m.bin"));
        assert_eq!(
            (operator.rules.allow, operator.confined),
            (vec!["*".to_string()], None)
        );
        let mut ck = rec(Some("t"), "file:///data/checkpoints/train/ckpt-1");
        let tree = ConfinedRead {
            root: "/data/checkpoints/train".into(),
            owner_reads: true,
        };
        ck.checkpoint = Some(tree.clone());
        assert_eq!(access(&config, &ck).confined, Some(tree));
        config.models.tenant_model_origins = OriginList::of(&["https://*"]);
        let outside = access(&config, &rec(Some("t"), "file:///mnt/shared/m.bin"));
        assert_eq!(outside.confined, None, "refused by the rules on the node");
    }

    #[test]
    fn a_refusal_names_the_field_and_the_key_that_would_allow_it() {
        let tenant = OriginList::of(&["https://*"]).rules();
        let e = judge(&tenant, "file:///etc/shadow", &[], "tenant team-a").unwrap_err();
        assert_eq!(e.field(), Some("weights.uri"));
        assert_eq!(e.error_code().name, "origin_not_allowed");
        assert!(e.to_string().contains("models.tenant-model-origins"), "{e}");
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(judge(&tenant, "https://cdn.example.com/m", &[local], "tenant t").is_err());
        assert!(judge(
            &OriginRules::anything(),
            "file:///mnt/m.bin",
            &[],
            "the operator"
        )
        .is_ok());
    }
}
