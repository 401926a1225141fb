//! `[models]`: who may register model versions, from where, and how nodes
//! fetch their weights.
use super::key::section;
use super::ConfigError;
use crate::model::origins::OriginList;

section! {
    /// Registration rights, weight origins and warm-up.
    pub struct ModelsSection = "models" {
        /// How many nodes may read one model version from its origin (the
        /// registered uri) at once; the others wait for a peer.
        max_origin_pulls_per_version: u32 = 1, was "max-origin-pulls-per-version";
        /// How many origin reads may run at once across all versions: the
        /// shared storage's budget.
        max_origin_pulls: u32 = 4, was "max-origin-pulls";
        /// Nodes fetch from peers that hold a verified copy. False: only
        /// ever from the origin (still within the two budgets above).
        peer_warmup: bool = true, was "peer-warmup";
        /// A peer still reading a version (from the origin or another peer)
        /// streams it on to a receiver as its bytes arrive, instead of the
        /// receiver waiting for a verified copy somewhere: a rollout overlaps
        /// the origin read with the peer copies. Each receiver still checks
        /// the whole copy's SHA-256 before use. False: only verified copies
        /// are served.
        peer_stream_partial: bool = true, was "peer-stream-partial";
        /// A task stuck in Warming this long fails (`warming_timeout`,
        /// naming the source it was reading), ms.
        warming_timeout_ms: u64 = 600_000, was "warming-timeout-ms";
        /// After a node's second failed read of a version in a row, it waits
        /// this long before the next one, doubling with each further failure
        /// up to `models.warm-retry-max-ms` (the first failure is re-sourced
        /// at once: a cut read or a lost peer resumes without delay), ms.
        warm_retry_first_ms: u64 = 1000, was "warm-retry-first-ms";
        /// The longest wait between two reads of a copy that keep failing, ms.
        warm_retry_max_ms: u64 = 300_000, was "warm-retry-max-ms";
        /// Failed reads in a row (without 1 MiB of progress) after which a
        /// node's copy is `failed` and not read again until a new task needs
        /// it there or a prewarm asks.
        warm_retry_attempts: u32 = 10, was "warm-retry-attempts";
        /// How long a peer grant's token lets its receiver read from the
        /// peer, ms; a transfer that outlives it is re-sourced with a new one.
        peer_token_ttl_ms: u64 = 60_000, was "peer-token-ttl-ms";
        /// Tenants may register their own model versions (visible to
        /// themselves and the operator). False: only the operator registers.
        tenants_may_register_models: bool = false, was "tenants-may-register-models";
        /// Where a tenant's model versions may read their weights: origin
        /// patterns (`*`, `https://*`, `http://*`, `http(s)://HOST[:PORT]`,
        /// `file:///DIR/`). Checked at registration and by every agent
        /// against the addresses it connects to. The default allows https to
        /// public hosts only.
        tenant_model_origins: OriginList = OriginList::of(&["https://*"]), was "tenant-model-origins";
        /// The same for the operator's own registrations. The default allows
        /// anything (shared mounts, private object stores).
        operator_model_origins: OriginList = OriginList::of(&["*"]), was "operator-model-origins";
    }
}

impl ModelsSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            (
                "models.max-origin-pulls-per-version",
                u64::from(self.max_origin_pulls_per_version),
            ),
            ("models.max-origin-pulls", u64::from(self.max_origin_pulls)),
            ("models.warming-timeout-ms", self.warming_timeout_ms),
            ("models.warm-retry-first-ms", self.warm_retry_first_ms),
        ];
        if let Some(&(key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::new(key, "must be greater than 0"));
        }
        if self.warm_retry_max_ms < self.warm_retry_first_ms {
            return Err(ConfigError::new(
                "models.warm-retry-max-ms",
                "must be at least models.warm-retry-first-ms",
            ));
        }
        if self.warm_retry_attempts < 2 {
            return Err(ConfigError::new(
                "models.warm-retry-attempts",
                "must be at least 2",
            ));
        }
        if self.peer_token_ttl_ms < 1000 {
            return Err(ConfigError::new(
                "models.peer-token-ttl-ms",
                "must be at least 1000",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_cap_below_the_first_wait_is_refused_naming_the_key() {
        let c = ModelsSection {
            warm_retry_first_ms: 5000,
            warm_retry_max_ms: 1000,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "models.warm-retry-max-ms");
    }
}
