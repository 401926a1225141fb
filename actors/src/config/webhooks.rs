//! `[webhooks]`: where event webhooks may go and how their deliveries are
//! retried, bounded and kept.
use super::key::section;
use super::ConfigError;
use caldera_spec::outbound::OutboundPolicy;
use caldera_spec::webhook_request::check_url;
use std::path::PathBuf;

section! {
    /// Targets, retries, concurrency and retention of deliveries.
    pub struct WebhooksSection = "webhooks" {
        /// Where idle warnings are POSTed (JSON). Unset: nowhere.
        idle_url: Option<String> = None, was "idle-webhook-url";
        /// HMAC secret of the `webhooks.idle-url` subscription (at least 16
        /// characters). Unset: one is generated when the subscription is
        /// made, and printed in the log that once.
        idle_secret: Option<String> = None, was "idle-webhook-secret";
        /// A delivery without a 2xx is retried until this long after its
        /// first attempt, then marked failed, ms (24 h by default).
        retry_for_ms: u64 = 86_400_000, was "webhook-retry-for-ms";
        /// The first retry's delay, doubling each retry (with +-20% jitter), ms.
        retry_initial_ms: u64 = 10_000, was "webhook-retry-initial-ms";
        /// The longest delay between two retries, ms (1 h by default).
        retry_max_ms: u64 = 3_600_000, was "webhook-retry-max-ms";
        /// How long one attempt may take (connect, send, answer) before it
        /// counts as failed, ms.
        timeout_ms: u64 = 10_000, was "webhook-timeout-ms";
        /// PEM certificates trusted for `https://` webhook urls besides the
        /// host's certificate store (a receiver behind a private CA).
        /// Unset: the host's store only.
        ca_file: Option<PathBuf> = None, was "webhook-ca-file";
        /// Attempts in flight at once over all subscriptions (each
        /// subscription has at most 4 of them).
        max_in_flight: usize = 32, was "webhook-max-in-flight";
        /// Where webhooks may go besides https to public addresses: host
        /// names, addresses and CIDR blocks (`hooks.internal, 10.0.0.0/8,
        /// ::1`), separated by commas. What is listed may be reached over
        /// plain http and at loopback, private and link-local addresses;
        /// nothing else may. Empty: https to public addresses only.
        allow_hosts: String = String::new(), was "webhook-allow-hosts";
        /// Attempts in flight at once for one tenant's subscriptions (the
        /// operator's count as one more tenant), so one tenant's slow
        /// receivers never hold every slot.
        max_in_flight_per_tenant: usize = 8, was "webhook-max-in-flight-per-tenant";
        /// Pending deliveries one tenant's subscriptions may have queued; an
        /// event past it is recorded `failed` at once, unsent, saying so.
        max_pending_per_tenant: usize = 2000, was "webhook-max-pending-per-tenant";
        /// Finished (delivered or failed) deliveries kept per subscription;
        /// the oldest go first as new ones come.
        deliveries_kept: usize = 500, was "webhook-deliveries-kept";
        /// Finished deliveries older than this are deleted, ms (7 days by default).
        delivery_retention_ms: u64 = 604_800_000, was "webhook-delivery-retention-ms";
        /// Webhook subscriptions one tenant may have (the operator's are not
        /// counted): with the two bounds above, what one tenant's deliveries
        /// can hold on disk.
        max_per_tenant: usize = 50, was "webhook-max-per-tenant";
    }
}

impl WebhooksSection {
    /// Checks values that would make deliveries misbehave, and targets the
    /// outbound policy would refuse anyway.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let allowed = OutboundPolicy::parse(&self.allow_hosts)
            .map_err(|e| ConfigError::new("webhooks.allow-hosts", e))?;
        if let Some(url) = &self.idle_url {
            check_url(url).map_err(|e| ConfigError::new("webhooks.idle-url", e.message))?;
            allowed
                .target(url)
                .map_err(|why| ConfigError::new("webhooks.idle-url", why.0))?;
        }
        if let Some(ca) = &self.ca_file {
            caldera_tls::client_config(Some(ca), "webhooks.ca-file")
                .map_err(|e| ConfigError::new("webhooks.ca-file", e))?;
        }
        if self.idle_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err(ConfigError::new(
                "webhooks.idle-secret",
                "must be at least 16 characters",
            ));
        }
        if self.retry_initial_ms == 0 {
            return Err(ConfigError::new(
                "webhooks.retry-initial-ms",
                "must be greater than 0",
            ));
        }
        if self.retry_max_ms < self.retry_initial_ms {
            return Err(ConfigError::new(
                "webhooks.retry-max-ms",
                "must be at least webhooks.retry-initial-ms",
            ));
        }
        if !(100..=600_000).contains(&self.timeout_ms) {
            return Err(ConfigError::new(
                "webhooks.timeout-ms",
                "must be from 100 to 600000 (10 minutes)",
            ));
        }
        let positive = [
            ("webhooks.max-in-flight", self.max_in_flight as u64),
            (
                "webhooks.max-in-flight-per-tenant",
                self.max_in_flight_per_tenant as u64,
            ),
            (
                "webhooks.max-pending-per-tenant",
                self.max_pending_per_tenant as u64,
            ),
            ("webhooks.deliveries-kept", self.deliveries_kept as u64),
            ("webhooks.delivery-retention-ms", self.delivery_retention_ms),
            ("webhooks.max-per-tenant", self.max_per_tenant as u64),
        ];
        if let Some(&(key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::new(key, "must be greater than 0"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(c: WebhooksSection) -> &'static str {
        c.validate().unwrap_err().key
    }

    #[test]
    fn webhook_settings_that_cannot_work_are_refused_by_key() {
        let d = WebhooksSection::default;
        let url = |u: &str| WebhooksSection {
            idle_url: Some(u.into()),
            ..d()
        };
        assert_eq!(bad(url("file:///x")), "webhooks.idle-url");
        // https is delivered (TLS): fine as a url.
        assert_eq!(url("https://h/x").validate(), Ok(()));
        let dir = tempfile::tempdir().unwrap();
        let no_pem = dir.path().join("ca.pem");
        std::fs::write(&no_pem, "not a certificate\n").unwrap();
        let ca = WebhooksSection {
            ca_file: Some(no_pem),
            ..d()
        };
        assert_eq!(bad(ca), "webhooks.ca-file");
        let secret = WebhooksSection {
            idle_secret: Some("short".into()),
            ..d()
        };
        assert_eq!(bad(secret), "webhooks.idle-secret");
        let retry = WebhooksSection {
            retry_max_ms: 1,
            ..d()
        };
        assert_eq!(bad(retry), "webhooks.retry-max-ms");
        let timeout = WebhooksSection {
            timeout_ms: 5,
            ..d()
        };
        assert_eq!(bad(timeout), "webhooks.timeout-ms");
        // A loopback receiver needs the operator's allowance.
        assert_eq!(bad(url("http://127.0.0.1:9/i")), "webhooks.idle-url");
        let hosts = WebhooksSection {
            allow_hosts: "127.0.0.1, 10.0.0.0/33".into(),
            ..d()
        };
        assert_eq!(bad(hosts), "webhooks.allow-hosts");
        let per_tenant = WebhooksSection {
            max_in_flight_per_tenant: 0,
            ..d()
        };
        assert_eq!(bad(per_tenant), "webhooks.max-in-flight-per-tenant");
        let ok = WebhooksSection {
            idle_url: Some("http://127.0.0.1:9/i".into()),
            allow_hosts: "127.0.0.1".into(),
            ..d()
        };
        assert_eq!(ok.validate(), Ok(()));
    }
}
