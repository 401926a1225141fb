//! Signed webhooks: subscriptions (`POST /v1/webhooks`), and the
//! [`Dispatcher`](dispatcher::Dispatcher) that follows the event log and
//! POSTs each event to the subscriptions that want it.
//!
//! The guarantee is at-least-once: a delivery is recorded in sled (and
//! flushed) before its first attempt and stays queued until a 2xx is
//! recorded, so a control plane killed at any point sends it again after its
//! restart. The event id is the event's seq; receivers deduplicate by it.
//! Each POST is signed (`signature.rs`); failures are retried with
//! exponential backoff (`backoff.rs`) for `webhook-retry-for-ms`. Where a
//! webhook may go is checked when it is made and before every attempt
//! (`target.rs`); who may attempt when is `slots.rs`; how many deliveries
//! are kept is `retention.rs`.
pub mod backoff;
pub mod dispatcher;
pub mod payload;
pub mod retention;
pub mod send;
pub mod signature;
pub mod slots;
pub mod subscriptions;
pub mod target;

use crate::config::{ConfigError, ServerConfig};
use caldera_spec::outbound::OutboundPolicy;
use caldera_spec::webhook_request::check_url;

/// Attempts in flight at once to one subscription: a slow receiver holds
/// at most these, never the whole budget.
pub const MAX_IN_FLIGHT_PER_WEBHOOK: usize = 4;

/// Where webhooks may go under `c` (`webhook-allow-hosts`). A list that
/// does not read (refused at start by [`config_problem`]) allows nothing
/// beyond the default.
pub fn policy(c: &ServerConfig) -> OutboundPolicy {
    OutboundPolicy::parse(&c.webhook_allow_hosts).unwrap_or_default()
}

/// The first unusable webhook setting, if any (for `ServerConfig::validate`).
pub fn config_problem(c: &ServerConfig) -> Option<ConfigError> {
    let err = |key, message: &str| {
        Some(ConfigError {
            key,
            message: message.to_string(),
        })
    };
    let allowed = match OutboundPolicy::parse(&c.webhook_allow_hosts) {
        Ok(p) => p,
        Err(e) => return err("webhook-allow-hosts", &e),
    };
    if let Some(url) = &c.idle_webhook_url {
        if let Err(e) = check_url(url) {
            return err("idle-webhook-url", &e.message);
        }
        if let Err(why) = allowed.target(url) {
            return err("idle-webhook-url", &why.0);
        }
    }
    if let Some(ca) = &c.webhook_ca_file {
        if let Err(e) = caldera_tls::client_config(Some(ca), "webhook-ca-file") {
            return Some(ConfigError {
                key: "webhook-ca-file",
                message: e,
            });
        }
    }
    if c.idle_webhook_secret.as_ref().is_some_and(|s| s.len() < 16) {
        return err("idle-webhook-secret", "must be at least 16 characters");
    }
    if c.webhook_retry_initial_ms == 0 {
        return err("webhook-retry-initial-ms", "must be greater than 0");
    }
    if c.webhook_retry_max_ms < c.webhook_retry_initial_ms {
        return err(
            "webhook-retry-max-ms",
            "must be at least webhook-retry-initial-ms",
        );
    }
    if !(100..=600_000).contains(&c.webhook_timeout_ms) {
        return err(
            "webhook-timeout-ms",
            "must be from 100 to 600000 (10 minutes)",
        );
    }
    if c.webhook_max_in_flight == 0 {
        return err("webhook-max-in-flight", "must be greater than 0");
    }
    if c.webhook_max_in_flight_per_tenant == 0 {
        return err("webhook-max-in-flight-per-tenant", "must be greater than 0");
    }
    if c.webhook_max_pending_per_tenant == 0 {
        return err("webhook-max-pending-per-tenant", "must be greater than 0");
    }
    if c.webhook_deliveries_kept == 0 {
        return err("webhook-deliveries-kept", "must be greater than 0");
    }
    if c.webhook_delivery_retention_ms == 0 {
        return err("webhook-delivery-retention-ms", "must be greater than 0");
    }
    if c.webhook_max_per_tenant == 0 {
        return err("webhook-max-per-tenant", "must be greater than 0");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_settings_that_cannot_work_are_refused_by_key() {
        let bad = |c: ServerConfig| c.validate().unwrap_err().key;
        let d = ServerConfig::default;
        assert_eq!(
            bad(ServerConfig {
                idle_webhook_url: Some("file:///x".into()),
                ..d()
            }),
            "idle-webhook-url"
        );
        // https is delivered (TLS): fine as a url.
        assert!(ServerConfig {
            idle_webhook_url: Some("https://h/x".into()),
            ..d()
        }
        .validate()
        .is_ok());
        let dir = tempfile::tempdir().unwrap();
        let no_pem = dir.path().join("ca.pem");
        std::fs::write(&no_pem, "not a certificate\n").unwrap();
        assert_eq!(
            bad(ServerConfig {
                webhook_ca_file: Some(no_pem),
                ..d()
            }),
            "webhook-ca-file"
        );
        assert_eq!(
            bad(ServerConfig {
                idle_webhook_secret: Some("short".into()),
                ..d()
            }),
            "idle-webhook-secret"
        );
        assert_eq!(
            bad(ServerConfig {
                webhook_retry_max_ms: 1,
                ..d()
            }),
            "webhook-retry-max-ms"
        );
        assert_eq!(
            bad(ServerConfig {
                webhook_timeout_ms: 5,
                ..d()
            }),
            "webhook-timeout-ms"
        );
        // A loopback receiver needs the operator's allowance.
        assert_eq!(
            bad(ServerConfig {
                idle_webhook_url: Some("http://127.0.0.1:9/i".into()),
                ..d()
            }),
            "idle-webhook-url"
        );
        assert_eq!(
            bad(ServerConfig {
                webhook_allow_hosts: "127.0.0.1, 10.0.0.0/33".into(),
                ..d()
            }),
            "webhook-allow-hosts"
        );
        assert_eq!(
            bad(ServerConfig {
                webhook_max_in_flight_per_tenant: 0,
                ..d()
            }),
            "webhook-max-in-flight-per-tenant"
        );
        let ok = ServerConfig {
            idle_webhook_url: Some("http://127.0.0.1:9/i".into()),
            webhook_allow_hosts: "127.0.0.1".into(),
            ..d()
        };
        assert_eq!(ok.validate(), Ok(()));
    }
}
