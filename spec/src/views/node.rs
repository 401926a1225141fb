//! A node as the API shows it (`GET /v1/nodes`, `GET /v1/nodes/{name}`,
//! cordon, drain, revoke), and the allocation ledger.
use crate::Allocation;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU of a node: what it has, what is allocated, what is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuView {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_total_mb: u64,
    /// Not allocated to any task.
    pub memory_free_mb: u64,
    /// Measured by the agent (NVML, or the simulation).
    pub memory_used_mb: u64,
    pub utilization_pct: u32,
    pub simulated: bool,
    /// The agent's last heartbeat said this GPU did not answer its probe.
    pub faulted: bool,
}

/// A node: its state, what it offers, what is free, what it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeView {
    pub name: String,
    pub state: String,
    /// "cordoned", "drained" or "drained (agent stopping)": no new
    /// placements there; null when it takes work.
    pub cordon: Option<String>,
    pub connected: bool,
    pub epoch: u64,
    pub simulated: bool,
    pub gpu_source: String,
    pub isolation: String,
    /// What runs workloads there: `podman 4.3.1` where its container
    /// runtime is up, else `process` (host processes only).
    pub runtime: String,
    /// Each runtime the node reported, up or not, with what is missing
    /// where one is down (an agent that reports none runs processes).
    pub runtimes: Vec<crate::container::RuntimeInfo>,
    pub gpus: Vec<GpuView>,
    pub cpu_cores: u32,
    pub cpu_free_milli: u64,
    pub cpu_used_pct: f32,
    pub memory_total_mb: u64,
    pub memory_free_mb: u64,
    pub memory_used_mb: u64,
    pub disk_offered_mb: u64,
    pub disk_free_mb: u64,
    pub labels: BTreeMap<String, String>,
    pub last_seen: String,
    pub allocations: usize,
    /// The node's weight cache as last reported (`GET /v1/nodes/{name}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<crate::weights::CacheReport>,
    /// The images the node holds as last reported (the operator's views
    /// only: an image's name can tell one tenant's work to another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<crate::images::ImageReport>,
}

/// `podman 4.3.1` for an up container runtime, else `process`.
pub fn runtime_label(runtimes: &[crate::container::RuntimeInfo]) -> String {
    use crate::container::RuntimeKind;
    match runtimes
        .iter()
        .find(|r| r.kind == RuntimeKind::Container && r.up)
    {
        Some(r) if r.version.is_empty() => r.engine.clone(),
        Some(r) => format!("{} {}", r.engine, r.version),
        None => RuntimeKind::Process.as_str().into(),
    }
}

/// The node's runtimes; an agent that reports none (older ones) runs
/// host processes only.
pub fn runtimes_or_process(
    runtimes: &[crate::container::RuntimeInfo],
) -> Vec<crate::container::RuntimeInfo> {
    use crate::container::{RuntimeInfo, RuntimeKind};
    if runtimes.is_empty() {
        return vec![RuntimeInfo {
            kind: RuntimeKind::Process,
            engine: "caldera-shim".into(),
            version: String::new(),
            up: true,
            detail: String::new(),
        }];
    }
    runtimes.to_vec()
}

/// `GET /v1/nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeList {
    pub nodes: Vec<NodeView>,
}

/// `GET /v1/allocations`: the Scheduler's ledger and sled's copy of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Allocations {
    pub ledger: Vec<Allocation>,
    pub stored: Vec<Allocation>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::{RuntimeInfo, RuntimeKind};

    fn node() -> NodeView {
        NodeView {
            name: "node-1".into(),
            state: "ready".into(),
            cordon: Some("cordoned".into()),
            connected: true,
            epoch: 2,
            simulated: true,
            gpu_source: "simulated".into(),
            isolation: "none".into(),
            runtime: "process".into(),
            runtimes: runtimes_or_process(&[]),
            gpus: vec![GpuView {
                index: 0,
                uuid: "SIM-0".into(),
                model: "A100-80GB".into(),
                memory_total_mb: 81_920,
                memory_free_mb: 40_960,
                memory_used_mb: 1_024,
                utilization_pct: 12,
                simulated: true,
                faulted: false,
            }],
            cpu_cores: 96,
            cpu_free_milli: 64_000,
            cpu_used_pct: 3.5,
            memory_total_mb: 1_048_576,
            memory_free_mb: 786_432,
            memory_used_mb: 2_048,
            disk_offered_mb: 4_194_304,
            disk_free_mb: 4_194_304,
            labels: [("zone".to_string(), "a".to_string())].into(),
            last_seen: "2026-11-29T10:00:00Z".into(),
            allocations: 1,
            cache: None,
            images: None,
        }
    }

    #[test]
    fn a_node_list_reads_back_as_the_server_wrote_it() {
        let list = NodeList {
            nodes: vec![node()],
        };
        let wire = serde_json::to_value(&list).expect("serializes");
        // The operator's extras are left out when absent.
        assert!(wire["nodes"][0].get("cache").is_none());
        assert_eq!(serde_json::from_value::<NodeList>(wire).ok(), Some(list));
    }

    #[test]
    fn a_runtime_label_names_the_container_runtime_that_is_up() {
        let podman = |up: bool| RuntimeInfo {
            kind: RuntimeKind::Container,
            engine: "podman".into(),
            version: "4.3.1".into(),
            up,
            detail: String::new(),
        };
        assert_eq!(runtime_label(&[podman(true)]), "podman 4.3.1");
        assert_eq!(runtime_label(&[podman(false)]), "process");
        assert_eq!(runtimes_or_process(&[])[0].kind, RuntimeKind::Process);
    }
}
