//! `[limits]`: what one client or one task may ask of the control plane.
use super::key::section;
use super::ConfigError;
use crate::container::DataVolumes;

section! {
    /// Request sizes and rates, replica size, and what a task
    /// may run and mount.
    pub struct LimitsSection = "limits" {
        /// Largest accepted request body, bytes.
        max_body_bytes: usize = 64 * 1024, was "max-body-bytes";
        /// How long a client may take to send a request's head, and then its
        /// whole body, ms; past it the request is answered 408 and closed, so
        /// a client that declares a body and never sends it cannot hold a
        /// connection.
        client_request_timeout_ms: u64 = 5000, was "client-request-timeout-ms";
        /// Requests one client (one bearer token, or one address without a
        /// token) may have in flight at once; more are answered 429 at once.
        /// The node WebSocket and `/healthz` are exempt. The default is above
        /// the 128 connections the submit benchmark drives from one token.
        max_requests_per_client: usize = 256, was "max-requests-per-client";
        /// Most GPU memory one inference replica may ask for, as a fraction
        /// of the largest GPU in the pool: scale out with replicas, not up.
        inference_replica_cap: f64 = 0.5, was "inference-replica-cap";
        /// Every task runs in a container: a task without an image, or with
        /// `"runtime": "process"`, is refused at submission (422
        /// `image_required`), so nothing a tenant supplies runs on a host.
        require_images: bool = false, was "require-images";
        /// The data volumes tasks may mount (`volumes` in a task spec): name,
        /// host path, tenants (`*` or names), read-write allowed. A TOML
        /// array of tables (`[{ name = "datasets", host-path =
        /// "/srv/datasets", tenants = ["*"] }]`); in the environment
        /// comma-separated `NAME=HOST_PATH:TENANTS[:rw]`
        /// (`datasets=/srv/datasets:*`). Empty: no task mounts anything.
        data_volumes: DataVolumes = DataVolumes::default(), was "data-volumes";
    }
}

impl LimitsSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::new(
                "limits.max-body-bytes",
                "must be at least 1024",
            ));
        }
        if !(100..=600_000).contains(&self.client_request_timeout_ms) {
            return Err(ConfigError::new(
                "limits.client-request-timeout-ms",
                "must be from 100 to 600000 (10 minutes)",
            ));
        }
        if self.max_requests_per_client == 0 {
            return Err(ConfigError::new(
                "limits.max-requests-per-client",
                "must be greater than 0",
            ));
        }
        if !(self.inference_replica_cap > 0.0 && self.inference_replica_cap <= 1.0) {
            return Err(ConfigError::new(
                "limits.inference-replica-cap",
                "must be more than 0 and at most 1",
            ));
        }
        if let Some(why) = self.data_volumes.problem() {
            return Err(ConfigError::new("limits.data-volumes", why));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_cap_outside_zero_to_one_is_refused_naming_the_key() {
        for cap in [0.0, 1.5, f64::NAN] {
            let c = LimitsSection {
                inference_replica_cap: cap,
                ..Default::default()
            };
            assert_eq!(
                c.validate().unwrap_err().key,
                "limits.inference-replica-cap"
            );
        }
    }
}
