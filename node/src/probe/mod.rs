//! Hardware probes: what the node offers (inventory, sent in the hello) and how
//! busy it is (metrics, sent in every heartbeat).
pub mod gpu;
pub mod host;

pub use gpu::{GpuProbe, ProcessGpuUse};
pub use host::{DeclaredHost, HostProbe};

use crate::error::AgentError;
use caldera_spec::{NodeInventory, NodeMetrics};
use std::collections::HashMap;
use std::path::Path;

/// The node's hardware as the agent sees it.
pub struct Probe {
    pub host: HostProbe,
    pub gpus: GpuProbe,
    declared: DeclaredHost,
    hostname: String,
}

impl Probe {
    /// Probes the host once, with the figures the operator declared in
    /// place of probed ones; `data_dir` must exist (for the disk match).
    /// The agent's config builds it (`AgentConfig::probe`).
    pub fn new(
        data_dir: &Path,
        declared: DeclaredHost,
        gpus: GpuProbe,
        hostname: String,
    ) -> Result<Self, AgentError> {
        let host =
            HostProbe::new(data_dir, declared).map_err(|e| AgentError::Probe(e.to_string()))?;
        Ok(Probe {
            host,
            gpus,
            declared,
            hostname,
        })
    }

    /// The inventory for a hello.
    pub fn inventory(
        &self,
        labels: &std::collections::BTreeMap<String, String>,
        isolation: &str,
    ) -> NodeInventory {
        NodeInventory {
            runtimes: Vec::new(),
            hostname: self.hostname.clone(),
            gpus: self.gpus.inventory(),
            cpu_cores: self.host.cpu_cores(),
            memory_total_mb: self.host.memory_total_mb(),
            disks: self.host.disks(),
            disk_offered_mb: self.host.disk_offered_mb(),
            labels: labels.clone(),
            simulated_host: self.declared.any(),
            isolation: isolation.to_string(),
            gpu_source: self.gpus.source(),
        }
    }

    /// Live metrics. `simulated_gpu_use` maps a simulated GPU index to the
    /// (utilisation %, memory MiB) its workloads stand for.
    pub fn metrics(&mut self, simulated_gpu_use: &HashMap<u32, (u32, u64)>) -> NodeMetrics {
        let host = self.host.sample();
        let mut gpus = self.gpus.live();
        if self.gpus.is_simulated() {
            for g in &mut gpus {
                if let Some((util, mem)) = simulated_gpu_use.get(&g.index) {
                    g.utilization_pct = (*util).min(100);
                    g.memory_used_mb = *mem;
                }
            }
        }
        NodeMetrics {
            gpus,
            cpu_used_pct: host.cpu_used_pct,
            memory_used_mb: host.memory_used_mb,
            disk_free_mb: host.disk_free_mb,
            disk_read_bytes_per_s: host.disk_read_bytes_per_s,
            disk_write_bytes_per_s: host.disk_write_bytes_per_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AgentConfig;

    #[test]
    fn probes_this_machine() {
        let dir = tempfile::tempdir().unwrap();
        let config = AgentConfig {
            token: "t".into(),
            node_name: "probe-test".into(),
            data_dir: dir.path().to_path_buf(),
            ..AgentConfig::default()
        };
        let mut probe = config.probe().unwrap();
        let inv = probe.inventory(&Default::default(), "none (test)");
        assert!(inv.cpu_cores > 0);
        assert!(inv.memory_total_mb > 0);
        assert!(!inv.simulated_host);
        assert!(inv.disk_offered_mb > 0, "{inv:?}");
        let m = probe.metrics(&HashMap::new());
        assert!(m.memory_used_mb > 0);
    }

    #[test]
    fn declared_figures_replace_probed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let config = AgentConfig {
            token: "t".into(),
            node_name: "sim".into(),
            data_dir: dir.path().to_path_buf(),
            simulate_gpus: Some("2xT4-16GB".into()),
            simulate_cpu_cores: Some(96),
            simulate_memory_gb: Some(1024),
            simulate_disk_gb: Some(4096),
            ..AgentConfig::default()
        };
        let mut probe = config.probe().unwrap();
        let inv = probe.inventory(&Default::default(), "none (test)");
        assert_eq!(inv.cpu_cores, 96);
        assert_eq!(inv.memory_total_mb, 1024 * 1024);
        assert_eq!(inv.disk_offered_mb, 4096 * 1024);
        assert!(inv.simulated_host && inv.any_simulated());
        assert_eq!(inv.gpu_source, "simulated");
        assert_eq!(inv.gpus[1].uuid, "GPU-SIM-sim-1");
        let use_ = HashMap::from([(1u32, (250u32, 512u64))]);
        let m = probe.metrics(&use_);
        assert_eq!(m.gpus[1].utilization_pct, 100);
        assert_eq!(m.gpus[1].memory_used_mb, 512);
        assert_eq!(m.gpus[0].utilization_pct, 0);
    }
}
