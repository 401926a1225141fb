//! `[nodes]`: how the control plane watches node agents and how long their
//! workloads may outlive its silence.
use super::key::section;
use super::ConfigError;

section! {
    /// Heartbeats, loss detection, leases and stop grace.
    pub struct NodesSection = "nodes" {
        /// Heartbeat period asked of node agents, ms.
        heartbeat_interval_ms: u64 = 1000, was "heartbeat-interval-ms";
        /// A node silent this long is lost, ms (the default detects a loss
        /// within 5 s).
        timeout_ms: u64 = 4000, was "node-timeout-ms";
        /// After a control-plane restart, nodes get this long to reconnect
        /// before they can be declared lost, ms: longer than the agents'
        /// reconnect backoff cap (5 s), so a restart never looks like a
        /// fleet-wide node loss.
        boot_grace_ms: u64 = 10_000, was "boot-grace-ms";
        /// Grace between SIGTERM and SIGKILL when stopping a workload, ms.
        stop_grace_ms: u64 = 10_000, was "stop-grace-ms";
        /// How long a node's workloads may run after the heartbeat the
        /// control plane last confirmed (`LeaseRenewed`), ms: a node cut off
        /// for longer stops them by itself, and a lost node's `fence` tasks
        /// are requeued only once this plus the stop grace has passed since
        /// that renewal. Longer leases ride out longer control-plane outages;
        /// shorter ones move fenced work sooner.
        workload_lease_ms: u64 = 30_000, was "workload-lease-ms";
    }
}

impl NodesSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.heartbeat_interval_ms == 0 {
            return Err(ConfigError::new(
                "nodes.heartbeat-interval-ms",
                "must be greater than 0",
            ));
        }
        let twice = "must be at least twice nodes.heartbeat-interval-ms";
        if self.timeout_ms < 2 * self.heartbeat_interval_ms {
            return Err(ConfigError::new("nodes.timeout-ms", twice));
        }
        if self.workload_lease_ms < 2 * self.heartbeat_interval_ms {
            // Shorter, and a healthy node's leases would lapse between heartbeats.
            return Err(ConfigError::new("nodes.workload-lease-ms", twice));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_timeout_shorter_than_two_heartbeats_is_refused() {
        let c = NodesSection {
            timeout_ms: 1500,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "nodes.timeout-ms");
    }

    #[test]
    fn a_lease_shorter_than_two_heartbeats_is_refused() {
        let c = NodesSection {
            workload_lease_ms: 1500,
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "nodes.workload-lease-ms");
        let ok = NodesSection {
            workload_lease_ms: 2000,
            ..Default::default()
        };
        assert_eq!(ok.validate(), Ok(()));
    }
}
