//! What a node offers and how busy it is, as its agent reports it.
use crate::error::{SpecError, SpecErrorKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One GPU of a node. `simulated` GPUs exist because the machine has none; they
/// are labelled as such in every view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_total_mb: u64,
    pub memory_used_mb: u64,
    pub utilization_pct: u32,
    pub simulated: bool,
}

/// One mounted disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskInfo {
    pub mount: String,
    pub total_mb: u64,
    pub free_mb: u64,
}

/// Everything a node offers, sent in its hello.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInventory {
    pub hostname: String,
    pub gpus: Vec<GpuInfo>,
    /// Logical CPU cores offered to workloads.
    pub cpu_cores: u32,
    pub memory_total_mb: u64,
    pub disks: Vec<DiskInfo>,
    /// Disk offered to workloads (the data dir's filesystem), MiB.
    pub disk_offered_mb: u64,
    pub labels: BTreeMap<String, String>,
    /// True when CPU, memory or disk figures are declared rather than probed.
    pub simulated_host: bool,
    /// What isolation the runtime applies: "cgroup-v2", "cgroup-v1" or "none (...)".
    pub isolation: String,
    /// How GPUs were found: "nvml", "simulated", or "none (reason)".
    pub gpu_source: String,
    /// The runtimes it can run workloads with (absent from older agents:
    /// the process runtime only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtimes: Vec<crate::container::RuntimeInfo>,
}

/// Most GPUs one node may report (the largest single machines hold 16; a
/// rack-scale system that shows as one host, 72).
pub const MAX_NODE_GPUS: usize = 256;
/// Most memory one GPU may report, MiB: 1 TiB (the largest GPUs hold 288 GB).
pub const MAX_GPU_MEMORY_MB: u64 = 1024 * 1024;
/// Most CPU cores one node may report (the largest servers have about 2,000
/// logical cores).
pub const MAX_NODE_CPU_CORES: u32 = 16_384;
/// Most host memory one node may report, MiB: 64 TiB.
pub const MAX_NODE_MEMORY_MB: u64 = 64 * 1024 * 1024;
/// Most disk one node may offer or one mount may report, MiB: 1 PiB.
pub const MAX_NODE_DISK_MB: u64 = 1024 * 1024 * 1024;

impl NodeInventory {
    /// Refuses an inventory no real machine reports: a GPU index or uuid
    /// listed twice (placement would hand the same GPU out as two), or more
    /// GPUs, GPU memory, cores, memory or disk than any machine has (the
    /// `MAX_*` bounds above: placement would put any task on such a node).
    pub fn validate(&self) -> Result<(), SpecError> {
        self.validate_bounds()?;
        for (i, g) in self.gpus.iter().enumerate() {
            let earlier = &self.gpus[..i];
            if earlier.iter().any(|e| e.index == g.index) {
                return Err(twice(
                    i,
                    "index",
                    format!("GPU index {} is listed twice", g.index),
                ));
            }
            if earlier.iter().any(|e| e.uuid == g.uuid) {
                return Err(twice(
                    i,
                    "uuid",
                    format!("GPU uuid {:?} is listed twice", g.uuid),
                ));
            }
        }
        Ok(())
    }

    /// Every figure within what a machine could have; the error names the
    /// figure, what was reported and the bound.
    fn validate_bounds(&self) -> Result<(), SpecError> {
        if self.gpus.len() > MAX_NODE_GPUS {
            return Err(implausible(
                "inventory.gpus".into(),
                format!(
                    "{} GPUs reported; a node has at most {MAX_NODE_GPUS}",
                    self.gpus.len()
                ),
            ));
        }
        for (i, g) in self.gpus.iter().enumerate() {
            if g.memory_total_mb > MAX_GPU_MEMORY_MB {
                return Err(implausible(
                    format!("inventory.gpus[{i}].memory_total_mb"),
                    format!(
                        "GPU {} reports {} MiB of memory; a GPU has at most {MAX_GPU_MEMORY_MB} MiB (1 TiB)",
                        g.index, g.memory_total_mb
                    ),
                ));
            }
        }
        if self.cpu_cores > MAX_NODE_CPU_CORES {
            return Err(implausible(
                "inventory.cpu_cores".into(),
                format!(
                    "{} CPU cores reported; a node has at most {MAX_NODE_CPU_CORES}",
                    self.cpu_cores
                ),
            ));
        }
        if self.memory_total_mb > MAX_NODE_MEMORY_MB {
            return Err(implausible(
                "inventory.memory_total_mb".into(),
                format!(
                    "{} MiB of memory reported; a node has at most {MAX_NODE_MEMORY_MB} MiB (64 TiB)",
                    self.memory_total_mb
                ),
            ));
        }
        if self.disk_offered_mb > MAX_NODE_DISK_MB {
            return Err(implausible(
                "inventory.disk_offered_mb".into(),
                format!(
                    "{} MiB of disk offered; a node offers at most {MAX_NODE_DISK_MB} MiB (1 PiB)",
                    self.disk_offered_mb
                ),
            ));
        }
        for (i, d) in self.disks.iter().enumerate() {
            if d.total_mb > MAX_NODE_DISK_MB {
                return Err(implausible(
                    format!("inventory.disks[{i}].total_mb"),
                    format!(
                        "disk {:?} reports {} MiB; a disk has at most {MAX_NODE_DISK_MB} MiB (1 PiB)",
                        d.mount, d.total_mb
                    ),
                ));
            }
        }
        Ok(())
    }

    /// True when any part of this node is simulated.
    pub fn any_simulated(&self) -> bool {
        self.simulated_host || self.gpus.iter().any(|g| g.simulated)
    }
}

fn implausible(field: String, message: String) -> SpecError {
    SpecError::new(SpecErrorKind::OutOfRange, field, message)
}

fn twice(i: usize, what: &str, message: String) -> SpecError {
    SpecError::new(
        SpecErrorKind::Conflict,
        format!("inventory.gpus[{i}].{what}"),
        message,
    )
}

/// Live metrics in each heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMetrics {
    /// Per GPU, same order as the inventory.
    pub gpus: Vec<GpuLive>,
    pub cpu_used_pct: f32,
    pub memory_used_mb: u64,
    pub disk_free_mb: u64,
    pub disk_read_bytes_per_s: u64,
    pub disk_write_bytes_per_s: u64,
}

/// Live figures of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuLive {
    pub index: u32,
    pub memory_used_mb: u64,
    pub utilization_pct: u32,
    /// The GPU did not answer its probe (NVML could not open it or read its
    /// memory: fallen off the bus, an XID the driver gave up on). A
    /// simulated GPU never faults. Absent in older agents' heartbeats.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub faulted: bool,
}

/// A node as the control plane records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub name: String,
    pub inventory: NodeInventory,
    /// Lease epoch of the current (or last) session; bumped on every hello.
    pub epoch: u64,
    pub state: NodeState,
    pub joined_ms: u64,
    pub last_seen_ms: u64,
    /// SHA-256 (hex) of the node secret issued when the name was registered;
    /// None for a record from before node secrets (the next hello claims it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_sha256: Option<String>,
    /// Revoked by an operator: no hello for this name is welcomed again.
    #[serde(default)]
    pub revoked: bool,
    /// No new placements here (cordoned, or drained: its work moved away).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cordon: Option<Cordon>,
}

/// Why a node takes no new placements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cordon {
    pub by: CordonBy,
    /// Its work was moved away too (a drain), not only new placements stopped.
    pub drain: bool,
    pub at_ms: u64,
}

/// Who cordoned a node, which decides what lifts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CordonBy {
    /// `caldera node cordon|drain`: lifted only by `caldera node uncordon`.
    Operator,
    /// The agent said it is going away (SIGTERM): lifted by its next hello.
    Agent,
}

impl Cordon {
    /// How `caldera nodes` shows it.
    pub fn label(&self) -> &'static str {
        match (self.drain, self.by) {
            (false, _) => "cordoned",
            (true, CordonBy::Operator) => "drained",
            (true, CordonBy::Agent) => "drained (agent stopping)",
        }
    }
}

/// Whether the node is in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Ready,
    /// Silent past the heartbeat timeout; its tasks were requeued and its epoch fenced.
    Lost,
}

/// A name safe as one path component: `/` becomes `+` (task keys are
/// `tenant/id`, and `_` would make `a_b/c` and `a/b_c` one file), anything
/// else but `[A-Za-z0-9._-]` becomes `_`, and `.`/`..` cannot occur. The agent names a task's checkpoint dir and log
/// with it, and the control plane checks reported checkpoint paths against it.
pub fn safe_file_name(s: &str) -> String {
    let name: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else if c == '/' {
                '+'
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        format!("_{name}")
    } else {
        name
    }
}
