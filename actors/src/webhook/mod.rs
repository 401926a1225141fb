//! Signed webhooks: subscriptions (`POST /v1/webhooks`), and the
//! [`Dispatcher`](dispatcher::Dispatcher) that follows the event log and
//! POSTs each event to the subscriptions that want it.
//!
//! The guarantee is at-least-once: a delivery is recorded in sled (and
//! flushed) before its first attempt and stays queued until a 2xx is
//! recorded, so a control plane killed at any point sends it again after its
//! restart. The event id is the event's seq; receivers deduplicate by it.
//! Each POST is signed (`signature.rs`); failures are retried with
//! exponential backoff (`backoff.rs`) for `webhook-retry-for-ms`.
pub mod backoff;
pub mod dispatcher;
pub mod payload;
pub mod signature;
pub mod subscriptions;

use crate::config::{ConfigError, ServerConfig};
use caldera_spec::webhook_request::check_url;

/// Attempts in flight at once to one subscription: a slow receiver holds
/// at most these, never the whole budget.
pub const MAX_IN_FLIGHT_PER_WEBHOOK: usize = 4;

/// The first unusable webhook setting, if any (for `ServerConfig::validate`).
pub fn config_problem(c: &ServerConfig) -> Option<ConfigError> {
    let err = |key, message: &str| {
        Some(ConfigError {
            key,
            message: message.to_string(),
        })
    };
    if let Some(url) = &c.idle_webhook_url {
        if let Err(e) = check_url(url) {
            return err("idle-webhook-url", &e.message);
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
        let ok = ServerConfig {
            idle_webhook_url: Some("http://127.0.0.1:9/i".into()),
            ..d()
        };
        assert_eq!(ok.validate(), Ok(()));
    }
}
