//! Control-plane configuration. Loaded by the binary from a TOML file plus
//! `CALDERA_*` environment overrides (the `config` crate); keys are kebab-case.
use caldera_scheduling::placement::PolicyName;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything `caldera server` can be told. Every field's default is in its doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address of the HTTP gateway. Default `127.0.0.1:7070`.
    pub listen: String,
    /// Where sled keeps its files. Default `./caldera-data`.
    pub data_dir: PathBuf,
    /// Operator bearer token. Default: none; one is generated on first start,
    /// printed once, and only its hash is kept.
    pub operator_token: Option<String>,
    /// Token node agents join with. Default: generated on first start like the operator token.
    pub join_token: Option<String>,
    /// Heartbeat period asked of node agents, ms. Default 1000.
    pub heartbeat_interval_ms: u64,
    /// A node silent this long is lost, ms. Default 4000 (detection within 5 s).
    pub node_timeout_ms: u64,
    /// After a control-plane restart, nodes get this long to reconnect before
    /// they can be declared lost, ms: longer than the agents' reconnect backoff
    /// cap (5 s), so a restart never looks like a fleet-wide node loss. Default 10000.
    pub boot_grace_ms: u64,
    /// A task restarted after a preemption or node loss cannot be preempted
    /// again before it has run this long, ms (stops eviction ping-pong). Default 60000.
    pub preemption_min_runtime_ms: u64,
    /// How long past its declared `duration` a training task or reservation
    /// may run before its time limit stops it (training: checkpoint signal,
    /// stop grace, then failed with reason `time_limit`; a reservation is
    /// released), ms. Default 60000.
    pub time_limit_grace_ms: u64,
    /// How long a replacement replica must have run before a drain stops
    /// the replica it replaces, ms (Kubernetes' `minReadySeconds`: a started
    /// process is not yet a serving one). Default 1000.
    pub replica_min_ready_ms: u64,
    /// A task stuck in Preparing this long fails, ms. Default 120000.
    pub preparing_timeout_ms: u64,
    /// Grace between SIGTERM and SIGKILL when stopping a workload, ms. Default 10000.
    pub stop_grace_ms: u64,
    /// How long a node's workloads may run after the heartbeat the control
    /// plane last confirmed (`LeaseRenewed`), ms: a node cut off for longer
    /// stops them by itself, and a lost node's `fence` tasks are requeued
    /// only once this plus the stop grace has passed since that renewal.
    /// Longer leases ride out longer control-plane outages; shorter ones
    /// move fenced work sooner. Default 30000.
    pub workload_lease_ms: u64,
    /// Placement policy of the live scheduler. Default `caldera`.
    pub placement_policy: String,
    /// Seed of the placement tie-break. Default 42.
    pub placement_seed: u64,
    /// sled page cache, MiB. Default 64 (sled's own default of 1 GiB would
    /// blow the 1 GB control-plane memory target by itself).
    pub cache_mb: u64,
    /// Largest accepted request body, bytes. Default 65536.
    pub max_body_bytes: usize,
    /// HTTP worker threads. Default 2.
    pub http_workers: usize,
    /// How long a client may take to send a request's head, and then its
    /// whole body, ms; past it the request is answered 408 and closed, so a
    /// client that declares a body and never sends it cannot hold a
    /// connection. Default 5000.
    pub client_request_timeout_ms: u64,
    /// Requests one client (one bearer token, or one address without a token)
    /// may have in flight at once; more are answered 429 at once. The node
    /// WebSocket and `/healthz` are exempt. Default 256 (above the 128
    /// connections the submit benchmark drives from one token).
    pub max_requests_per_client: usize,
    /// An allocation using less than this (GPU utilisation, or CPU % for
    /// CPU-only work) counts as idle. Default 5.
    pub idle_threshold_pct: f32,
    /// Idle this long gets a warning, ms; 0 disables the inspector. Default 1800000 (30 min).
    pub idle_window_ms: u64,
    /// Still idle this long after the warning is reclaimed, ms. Default 1800000.
    pub idle_grace_ms: u64,
    /// Where idle warnings are POSTed (JSON). Default: none.
    pub idle_webhook_url: Option<String>,
    /// HMAC secret of the `idle-webhook-url` subscription (at least 16
    /// characters). Default: none; one is generated when the subscription is
    /// made, and printed in the log that once.
    pub idle_webhook_secret: Option<String>,
    /// Webhook deliveries: a delivery without a 2xx is retried until this long
    /// after its first attempt, then marked failed, ms. Default 86400000 (24 h).
    pub webhook_retry_for_ms: u64,
    /// Webhook deliveries: the first retry's delay, doubling each retry (with
    /// +-20% jitter), ms. Default 10000.
    pub webhook_retry_initial_ms: u64,
    /// Webhook deliveries: the longest delay between two retries, ms. Default 3600000 (1 h).
    pub webhook_retry_max_ms: u64,
    /// Webhook deliveries: how long one attempt may take (connect, send,
    /// answer) before it counts as failed, ms. Default 10000.
    pub webhook_timeout_ms: u64,
    /// PEM certificates trusted for `https://` webhook urls besides the
    /// host's certificate store (a receiver behind a private CA). Default: none.
    pub webhook_ca_file: Option<PathBuf>,
    /// Webhook deliveries: attempts in flight at once over all subscriptions
    /// (each subscription has at most 4 of them). Default 32.
    pub webhook_max_in_flight: usize,
    /// Where webhooks may go besides https to public addresses: host names,
    /// addresses and CIDR blocks (`hooks.internal, 10.0.0.0/8, ::1`),
    /// separated by commas. What is listed may be reached over plain http
    /// and at loopback, private and link-local addresses; nothing else may.
    /// Default: empty (https to public addresses only).
    pub webhook_allow_hosts: String,
    /// Webhook deliveries: attempts in flight at once for one tenant's
    /// subscriptions (the operator's count as one more tenant), so one
    /// tenant's slow receivers never hold every slot. Default 8.
    pub webhook_max_in_flight_per_tenant: usize,
    /// Webhook deliveries: pending deliveries one tenant's subscriptions may
    /// have queued; an event past it is recorded `failed` at once, unsent,
    /// saying so. Default 2000.
    pub webhook_max_pending_per_tenant: usize,
    /// Finished (delivered or failed) deliveries kept per subscription; the
    /// oldest go first as new ones come. Default 500.
    pub webhook_deliveries_kept: usize,
    /// Finished deliveries older than this are deleted, ms. Default 604800000 (7 days).
    pub webhook_delivery_retention_ms: u64,
    /// Webhook subscriptions one tenant may have (the operator's are not
    /// counted): with the two bounds above, what one tenant's deliveries
    /// can hold on disk. Default 50.
    pub webhook_max_per_tenant: usize,
    /// Period of the inspector and of the tenant usage samples, ms. Default 10000.
    pub usage_sample_ms: u64,
    /// How long a portal login lasts, ms (sessions are held in memory: a
    /// restart ends them). Default 43200000 (12 h).
    pub portal_session_ttl_ms: u64,
    /// Most portal sessions one principal (the operator, or one tenant) holds
    /// at once; a login past it ends that principal's own oldest session,
    /// never another's. Default 16.
    pub portal_sessions_per_principal: usize,
    /// Portal logins one principal may make a minute, and failed logins one
    /// client address may make a minute; more are answered 429. Default 20.
    pub portal_logins_per_minute: u32,
    /// Most GPU memory one inference replica may ask for, as a fraction of the
    /// largest GPU in the pool: scale out with replicas, not up. Default 0.5.
    pub inference_replica_cap: f64,
    /// Queue a request no registered node could ever hold (pending reason
    /// `unschedulable: ...`) instead of refusing it with 422. Default false.
    pub accept_unschedulable: bool,
    /// How many nodes may read one model version from its origin (the
    /// registered uri) at once; the others wait for a peer. Default 1.
    pub max_origin_pulls_per_version: u32,
    /// How many origin reads may run at once across all versions: the
    /// shared storage's budget. Default 4.
    pub max_origin_pulls: u32,
    /// How many nodes may pull one image at once; the starts (and
    /// pre-pulls) of the others wait in Preparing until one of those pulls
    /// ends. Default 2.
    pub max_image_pulls: u32,
    /// Nodes fetch from peers that hold a verified copy. False: only ever
    /// from the origin (still within the two budgets above). Default true.
    pub peer_warmup: bool,
    /// A peer still reading a version (from the origin or another peer)
    /// streams it on to a receiver as its bytes arrive, instead of the
    /// receiver waiting for a verified copy somewhere: a rollout overlaps
    /// the origin read with the peer copies. Each receiver still checks the
    /// whole copy's SHA-256 before use. False: only verified copies are
    /// served. Default true.
    pub peer_stream_partial: bool,
    /// A task stuck in Warming this long fails (`warming_timeout`, naming
    /// the source it was reading), ms. Default 600000 (10 min).
    pub warming_timeout_ms: u64,
    /// After a node's second failed read of a version in a row, it waits
    /// this long before the next one, doubling with each further failure
    /// up to `warm-retry-max-ms` (the first failure is re-sourced at once:
    /// a cut read or a lost peer resumes without delay), ms. Default 1000.
    pub warm_retry_first_ms: u64,
    /// The longest wait between two reads of a copy that keep failing, ms.
    /// Default 300000 (5 min).
    pub warm_retry_max_ms: u64,
    /// Failed reads in a row (without 1 MiB of progress) after which a
    /// node's copy is `failed` and not read again until a new task needs it
    /// there or a prewarm asks. Default 10.
    pub warm_retry_attempts: u32,
    /// How long a peer grant's token lets its receiver read from the peer,
    /// ms; a transfer that outlives it is re-sourced with a new one. Default 60000.
    pub peer_token_ttl_ms: u64,
    /// Tenants may register their own model versions (visible to themselves
    /// and the operator). Default false: only the operator registers.
    pub tenants_may_register_models: bool,
    /// Where a tenant's model versions may read their weights: origin
    /// patterns (`*`, `https://*`, `http://*`, `http(s)://HOST[:PORT]`,
    /// `file:///DIR/`; README "Models"). Checked at registration and by
    /// every agent against the addresses it connects to. Default
    /// `["https://*"]`: https to public hosts only.
    pub tenant_model_origins: crate::model::origins::OriginList,
    /// The same for the operator's own registrations. Default `["*"]`:
    /// anything (shared mounts, private object stores).
    pub operator_model_origins: crate::model::origins::OriginList,
    // Chargeback (README "Chargeback"). Prices are decimals with at most 6
    // places, kept as integer micro-units.
    /// Price of one GPU-hour by GPU model, a table (`{ default = "1.00",
    /// A100 = "2.40" }`; in the environment `default=1.00,A100=2.40`). A
    /// model is priced by the longest entry that names it as a request
    /// would, else `default`. A slice pays its fraction. Default `{ default = "0" }`.
    pub price_gpu_hour: crate::chargeback::GpuPrices,
    /// Price of one CPU core-hour. Default `0`.
    pub price_cpu_core_hour: crate::chargeback::Micros,
    /// Price of one GB-hour of memory (GB = 1024 MiB). Default `0`.
    pub price_memory_gb_hour: crate::chargeback::Micros,
    /// Price of one GB-hour of disk. Default `0`.
    pub price_disk_gb_hour: crate::chargeback::Micros,
    /// The currency the prices are in, a label only. Default `USD`.
    pub price_currency: String,
    /// Billing records of freed allocations older than this are deleted, days. Default 400.
    pub billing_retention_days: u64,
    /// Every task runs in a container: a task without an image, or with
    /// `"runtime": "process"`, is refused at submission (422
    /// `image_required`), so nothing a tenant supplies runs on a host.
    /// Default false.
    pub require_images: bool,
    /// The data volumes tasks may mount (`volumes` in a task spec): name,
    /// host path, tenants (`*` or names), read-write allowed. A TOML array
    /// of tables (`[{ name = "datasets", host-path = "/srv/datasets",
    /// tenants = ["*"] }]`); in the environment comma-separated
    /// `NAME=HOST_PATH:TENANTS[:rw]` (`datasets=/srv/datasets:*`). Default:
    /// none.
    pub data_volumes: crate::container::DataVolumes,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:7070".into(),
            data_dir: PathBuf::from("./caldera-data"),
            operator_token: None,
            join_token: None,
            heartbeat_interval_ms: 1000,
            node_timeout_ms: 4000,
            boot_grace_ms: 10_000,
            preemption_min_runtime_ms: 60_000,
            time_limit_grace_ms: 60_000,
            replica_min_ready_ms: 1000,
            preparing_timeout_ms: 120_000,
            stop_grace_ms: 10_000,
            workload_lease_ms: 30_000,
            placement_policy: "caldera".into(),
            placement_seed: 42,
            cache_mb: 64,
            max_body_bytes: 64 * 1024,
            http_workers: 2,
            client_request_timeout_ms: 5000,
            max_requests_per_client: 256,
            idle_threshold_pct: 5.0,
            idle_window_ms: 1_800_000,
            idle_grace_ms: 1_800_000,
            idle_webhook_url: None,
            idle_webhook_secret: None,
            webhook_retry_for_ms: 86_400_000,
            webhook_retry_initial_ms: 10_000,
            webhook_retry_max_ms: 3_600_000,
            webhook_timeout_ms: 10_000,
            webhook_ca_file: None,
            webhook_max_in_flight: 32,
            webhook_allow_hosts: String::new(),
            webhook_max_in_flight_per_tenant: 8,
            webhook_max_pending_per_tenant: 2000,
            webhook_deliveries_kept: 500,
            webhook_delivery_retention_ms: 604_800_000,
            webhook_max_per_tenant: 50,
            usage_sample_ms: 10_000,
            portal_session_ttl_ms: 43_200_000,
            portal_sessions_per_principal: 16,
            portal_logins_per_minute: 20,
            inference_replica_cap: 0.5,
            accept_unschedulable: false,
            max_origin_pulls_per_version: 1,
            max_origin_pulls: 4,
            max_image_pulls: 2,
            peer_warmup: true,
            peer_stream_partial: true,
            warming_timeout_ms: 600_000,
            warm_retry_first_ms: 1000,
            warm_retry_max_ms: 300_000,
            warm_retry_attempts: 10,
            peer_token_ttl_ms: 60_000,
            tenants_may_register_models: false,
            tenant_model_origins: crate::model::origins::OriginList::of(&["https://*"]),
            operator_model_origins: crate::model::origins::OriginList::of(&["*"]),
            price_gpu_hour: crate::chargeback::GpuPrices(
                [("default".to_string(), crate::chargeback::Micros(0))].into(),
            ),
            price_cpu_core_hour: crate::chargeback::Micros(0),
            price_memory_gb_hour: crate::chargeback::Micros(0),
            price_disk_gb_hour: crate::chargeback::Micros(0),
            price_currency: "USD".into(),
            billing_retention_days: 400,
            require_images: false,
            data_volumes: crate::container::DataVolumes::default(),
        }
    }
}

/// A configuration value that cannot work.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("config {key}: {message}")]
pub struct ConfigError {
    pub key: &'static str,
    pub message: String,
}

impl ServerConfig {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |key, message: &str| {
            Err(ConfigError {
                key,
                message: message.to_string(),
            })
        };
        if self.heartbeat_interval_ms == 0 {
            return err("heartbeat-interval-ms", "must be greater than 0");
        }
        if self.node_timeout_ms < 2 * self.heartbeat_interval_ms {
            return err(
                "node-timeout-ms",
                "must be at least twice heartbeat-interval-ms",
            );
        }
        if self.workload_lease_ms < 2 * self.heartbeat_interval_ms {
            // Shorter, and a healthy node's leases would lapse between heartbeats.
            return err(
                "workload-lease-ms",
                "must be at least twice heartbeat-interval-ms",
            );
        }
        if self.preparing_timeout_ms == 0 {
            return err("preparing-timeout-ms", "must be greater than 0");
        }
        if self.max_origin_pulls_per_version == 0 {
            return err("max-origin-pulls-per-version", "must be greater than 0");
        }
        if self.max_origin_pulls == 0 {
            return err("max-origin-pulls", "must be greater than 0");
        }
        if self.max_image_pulls == 0 {
            return err("max-image-pulls", "must be greater than 0");
        }
        if self.warming_timeout_ms == 0 {
            return err("warming-timeout-ms", "must be greater than 0");
        }
        if self.warm_retry_first_ms == 0 {
            return err("warm-retry-first-ms", "must be greater than 0");
        }
        if self.warm_retry_max_ms < self.warm_retry_first_ms {
            return err("warm-retry-max-ms", "must be at least warm-retry-first-ms");
        }
        if self.warm_retry_attempts < 2 {
            return err("warm-retry-attempts", "must be at least 2");
        }
        if self.peer_token_ttl_ms < 1000 {
            return err("peer-token-ttl-ms", "must be at least 1000");
        }
        if self.cache_mb == 0 {
            return err("cache-mb", "must be greater than 0");
        }
        if self.max_body_bytes < 1024 {
            return err("max-body-bytes", "must be at least 1024");
        }
        if !(self.inference_replica_cap > 0.0 && self.inference_replica_cap <= 1.0) {
            return err("inference-replica-cap", "must be in (0, 1]");
        }
        if self.usage_sample_ms == 0 {
            return err("usage-sample-ms", "must be greater than 0");
        }
        if self.portal_session_ttl_ms < 1000 {
            return err("portal-session-ttl-ms", "must be at least 1000");
        }
        if self.portal_sessions_per_principal == 0 {
            return err("portal-sessions-per-principal", "must be greater than 0");
        }
        if self.portal_logins_per_minute == 0 {
            return err("portal-logins-per-minute", "must be greater than 0");
        }
        if self.billing_retention_days == 0 {
            return err("billing-retention-days", "must be greater than 0");
        }
        if self.http_workers == 0 {
            return err("http-workers", "must be greater than 0");
        }
        if !(100..=600_000).contains(&self.client_request_timeout_ms) {
            return err(
                "client-request-timeout-ms",
                "must be from 100 to 600000 (10 minutes)",
            );
        }
        if self.max_requests_per_client == 0 {
            return err("max-requests-per-client", "must be greater than 0");
        }
        if let Some(key) = crate::webhook::config_problem(self) {
            return Err(key);
        }
        if let Some(why) = self.data_volumes.problem() {
            return err("data-volumes", &why);
        }
        // Checked here, not when the Scheduler starts: there an unknown name
        // would surface as a boot ("storage") failure that names no key.
        if self.placement_policy.parse::<PolicyName>().is_err() {
            let known: Vec<&str> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
            return err(
                "placement-policy",
                &format!(
                    "unknown policy {:?}; known policies: {}",
                    self.placement_policy,
                    known.join(", ")
                ),
            );
        }
        for t in [&self.operator_token, &self.join_token]
            .into_iter()
            .flatten()
        {
            if t.len() < 16 {
                return err(
                    "operator-token/join-token",
                    "tokens must be at least 16 characters",
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
    }

    #[test]
    fn a_node_timeout_shorter_than_two_heartbeats_is_refused() {
        let c = ServerConfig {
            node_timeout_ms: 1500,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "node-timeout-ms");
    }

    #[test]
    fn a_lease_shorter_than_two_heartbeats_is_refused() {
        let c = ServerConfig {
            workload_lease_ms: 1500,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "workload-lease-ms");
        let ok = ServerConfig {
            workload_lease_ms: 2000,
            ..Default::default()
        };
        assert_eq!(ok.validate(), Ok(()));
    }

    #[test]
    fn an_unknown_placement_policy_is_refused_naming_the_key_and_the_known_ones() {
        let c = ServerConfig {
            placement_policy: "tetris".into(),
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "placement-policy");
        assert!(e.message.contains("\"tetris\""), "{e}");
        for p in PolicyName::ALL {
            assert!(e.message.contains(p.as_str()), "{e}");
        }
        let known = ServerConfig {
            placement_policy: "fgd".into(),
            ..Default::default()
        };
        assert_eq!(known.validate(), Ok(()));
    }
}
