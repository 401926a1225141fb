//! Control-plane configuration, in sections: `[server]`, `[storage]`,
//! `[scheduling]`, `[nodes]`, `[models]`, `[webhooks]`, `[portal]`,
//! `[limits]` and `[chargeback]`, with kebab-case keys.
//!
//! The binary loads it from a TOML file plus `CALDERA_<SECTION>__<KEY>`
//! environment variables (`CALDERA_SCHEDULING__MAX_IMAGE_PULLS`). Each key
//! is declared once, in its section's file, with its type, default, doc text
//! and the flat key it had before sections (still accepted, with a
//! deprecation warning naming the new key: see [`legacy`]); the reference
//! page is written from those declarations ([`reference::config_reference`]).
pub mod chargeback;
pub mod key;
pub mod legacy;
pub mod limits;
pub mod models;
pub mod nodes;
pub mod portal;
pub mod reference;
pub mod scheduling;
pub mod server;
pub mod storage;
pub mod webhooks;

pub use chargeback::ChargebackSection;
pub use key::Key;
pub use limits::LimitsSection;
pub use models::ModelsSection;
pub use nodes::NodesSection;
pub use portal::PortalSection;
pub use scheduling::SchedulingSection;
pub use server::ServerSection;
pub use storage::StorageSection;
pub use webhooks::WebhooksSection;

use serde::{Deserialize, Serialize};

/// Everything `caldera server` can be told, one struct per section.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub server: ServerSection,
    pub storage: StorageSection,
    pub scheduling: SchedulingSection,
    pub nodes: NodesSection,
    pub models: ModelsSection,
    pub webhooks: WebhooksSection,
    pub portal: PortalSection,
    pub limits: LimitsSection,
    pub chargeback: ChargebackSection,
}

/// A section as the loader and the reference walk it.
#[derive(Debug, Clone, Copy)]
pub struct Section {
    /// Its name in the file (`scheduling`).
    pub name: &'static str,
    /// Its doc comment.
    pub about: &'static str,
    /// Its keys, in declaration order.
    pub keys: &'static [Key],
}

macro_rules! sections {
    ($($ty:ty),* $(,)?) => {
        &[$(Section { name: <$ty>::SECTION, about: <$ty>::ABOUT, keys: <$ty>::KEYS }),*]
    };
}

/// The sections, in the order the file and the reference list them.
pub const SECTIONS: &[Section] = sections![
    ServerSection,
    StorageSection,
    SchedulingSection,
    NodesSection,
    ModelsSection,
    WebhooksSection,
    PortalSection,
    LimitsSection,
    ChargebackSection,
];

/// Every key of every section, in order.
pub fn keys() -> impl Iterator<Item = &'static Key> {
    SECTIONS.iter().flat_map(|s| s.keys.iter())
}

/// The key `name` of section `section`, if there is one.
pub fn key(section: &str, name: &str) -> Option<&'static Key> {
    keys().find(|k| k.section == section && k.name() == name)
}

/// Whether `name` is a section.
pub fn is_section(name: &str) -> bool {
    SECTIONS.iter().any(|s| s.name == name)
}

/// A configuration value that cannot work, naming its key as
/// `section.key`.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("config key {key} ({in_file} in a file, {env} in the environment): {message}", in_file = in_file(self.key), env = env_var(self.key))]
pub struct ConfigError {
    /// `section.key`, e.g. `scheduling.max-image-pulls`.
    pub key: &'static str,
    /// What is wrong with its value, in words.
    pub message: String,
}

impl ConfigError {
    pub fn new(key: &'static str, message: impl Into<String>) -> Self {
        ConfigError {
            key,
            message: message.into(),
        }
    }
}

/// `scheduling.max-image-pulls` as a file writes it: `[scheduling] max-image-pulls`.
fn in_file(path: &str) -> String {
    match path.split_once('.') {
        Some((section, name)) => format!("[{section}] {name}"),
        None => path.to_string(),
    }
}

/// `scheduling.max-image-pulls` as a variable: `CALDERA_SCHEDULING__MAX_IMAGE_PULLS`.
fn env_var(path: &str) -> String {
    let upper = |s: &str| s.to_ascii_uppercase().replace('-', "_");
    match path.split_once('.') {
        Some((section, name)) => format!(
            "{}{}{}{}",
            key::ENV_PREFIX,
            upper(section),
            key::ENV_SECTION_SEPARATOR,
            upper(name)
        ),
        None => format!("{}{}", key::ENV_PREFIX, upper(path)),
    }
}

impl ServerConfig {
    /// Checks values that would make the server misbehave; the first
    /// problem found names its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        self.storage.validate()?;
        self.scheduling.validate()?;
        self.nodes.validate()?;
        self.models.validate()?;
        self.webhooks.validate()?;
        self.portal.validate()?;
        self.limits.validate()?;
        self.chargeback.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn defaults_validate() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
    }

    /// The key table and the serde names are the same keys: the table is
    /// what the loader and the reference walk, serde is what reads them.
    #[test]
    fn the_key_table_names_exactly_the_keys_serde_reads() {
        let value = serde_json::to_value(ServerConfig {
            server: ServerSection {
                operator_token: Some("x".repeat(16)),
                join_token: Some("x".repeat(16)),
                ..Default::default()
            },
            webhooks: WebhooksSection {
                idle_url: Some("https://example.invalid/".into()),
                idle_secret: Some("x".repeat(16)),
                ca_file: Some("/ca.pem".into()),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        let serde_keys: BTreeSet<String> = value
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(section, keys)| {
                let keys = keys.as_object().unwrap().keys();
                keys.map(move |k| format!("{section}.{k}"))
            })
            .collect();
        let table: BTreeSet<String> = keys().map(Key::path).collect();
        assert_eq!(serde_keys, table);
    }

    #[test]
    fn every_key_has_a_description_and_no_two_share_a_former_name() {
        let mut was = BTreeSet::new();
        for k in keys() {
            assert!(!k.description().is_empty(), "{} has no doc", k.path());
            if let Some(old) = k.was {
                assert!(was.insert(old), "{old} maps to two keys");
                assert!(!is_section(old), "{old} is also a section");
            }
        }
    }

    #[test]
    fn an_error_names_the_key_in_the_file_and_in_the_environment() {
        let mut c = ServerConfig::default();
        c.nodes.timeout_ms = 1500;
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "nodes.timeout-ms");
        assert_eq!(
            e.to_string(),
            "config key nodes.timeout-ms ([nodes] timeout-ms in a file, \
             CALDERA_NODES__TIMEOUT_MS in the environment): \
             must be at least twice nodes.heartbeat-interval-ms"
        );
    }

    /// Every key `validate` can name is a key of the table.
    #[test]
    fn validate_names_only_keys_that_exist() {
        let mut bad = Vec::new();
        let mut c = ServerConfig::default();
        c.server.http_workers = 0;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.storage.cache_mb = 0;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.scheduling.usage_sample_ms = 0;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.models.peer_token_ttl_ms = 10;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.portal.logins_per_minute = 0;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.limits.max_body_bytes = 10;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.chargeback.billing_retention_days = 0;
        bad.push(c);
        let mut c = ServerConfig::default();
        c.webhooks.deliveries_kept = 0;
        bad.push(c);
        for c in bad {
            let e = c.validate().unwrap_err();
            let (section, name) = e.key.split_once('.').unwrap();
            assert!(key(section, name).is_some(), "{} is not a key", e.key);
        }
    }
}
