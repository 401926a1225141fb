//! The placement-relevant state of a node, in a canonical form: two nodes with
//! equal `NodeState` are interchangeable for every filter and score. The pool
//! groups nodes by it, so a decision scores each distinct state once instead of
//! every node (a fresh 1,213-node trace cluster has 15 distinct states).
use std::collections::BTreeMap;

use super::types::{to_milli, NodeView};

/// One GPU as the scorers see it (device index dropped: position is canonical).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuState {
    /// Model name.
    pub model: String,
    /// Capacity in pool units.
    pub capacity: u64,
    /// Free room in pool units.
    pub free: u64,
}

impl GpuState {
    /// Free room as thousandths of this GPU.
    pub fn free_milli(&self) -> u64 {
        to_milli(self.free, self.capacity)
    }

    /// Whether nothing is allocated on it.
    pub fn is_idle(&self) -> bool {
        self.free >= self.capacity
    }
}

/// Kind of task for GPU clustering: `0` = GPU-sharing, `k` = `k` whole GPUs.
pub type TaskKind = u32;

/// Canonical node state; see the module comment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeState {
    /// Node may receive work.
    pub healthy: bool,
    /// Cordoned: no new placements.
    pub cordoned: bool,
    /// A task holds it exclusively.
    pub exclusive_held: bool,
    /// At least one allocation is on it.
    pub in_use: bool,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Its container runtime is up.
    pub container_runtime: bool,
    /// CPU capacity, milli-cores.
    pub cpu_capacity: u64,
    /// Free CPU, milli-cores.
    pub cpu_free: u64,
    /// Memory capacity, MiB.
    pub memory_capacity: u64,
    /// Free memory, MiB.
    pub memory_free: u64,
    /// Disk capacity, MiB.
    pub disk_capacity: u64,
    /// Free disk, MiB.
    pub disk_free: u64,
    /// GPUs sorted by (model, capacity, free): the canonical order.
    pub gpus: Vec<GpuState>,
    /// Running task kinds with their counts, sorted by kind (GPU clustering).
    pub kinds: Vec<(TaskKind, u32)>,
}

impl NodeState {
    /// The canonical state of `view` running tasks of `kinds`.
    pub fn of(view: &NodeView, kinds: &BTreeMap<TaskKind, u32>) -> Self {
        let mut gpus: Vec<GpuState> = view
            .gpus
            .iter()
            .map(|g| GpuState {
                model: g.model.clone(),
                capacity: g.capacity,
                free: g.free.min(g.capacity),
            })
            .collect();
        gpus.sort();
        NodeState {
            healthy: view.healthy,
            cordoned: view.cordoned,
            exclusive_held: view.exclusive_held,
            in_use: view.allocations > 0,
            labels: view.labels.clone(),
            container_runtime: view.container_runtime,
            cpu_capacity: view.cpu_capacity_milli,
            cpu_free: view.cpu_free_milli,
            memory_capacity: view.memory_capacity_mib,
            memory_free: view.memory_free_mib,
            disk_capacity: view.disk_capacity_mib,
            disk_free: view.disk_free_mib,
            gpus,
            kinds: kinds
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| (*k, *n))
                .collect(),
        }
    }

    /// Summed free GPU room in milli-GPUs.
    pub fn gpu_free_milli(&self) -> u64 {
        self.gpus.iter().map(GpuState::free_milli).sum()
    }

    /// Summed GPU capacity in milli-GPUs (1000 per GPU).
    pub fn gpu_capacity_milli(&self) -> u64 {
        self.gpus.len() as u64 * 1000
    }

    /// Number of entirely free GPUs.
    pub fn idle_gpus(&self) -> usize {
        self.gpus.iter().filter(|g| g.is_idle()).count()
    }
}

/// Canonical positions of `view`'s GPUs: `order[p]` is the index into
/// `view.gpus` of the GPU at canonical position `p` (ties by device index).
pub fn canonical_order(view: &NodeView) -> Vec<usize> {
    let mut order: Vec<usize> = (0..view.gpus.len()).collect();
    order.sort_by(|&a, &b| {
        let (ga, gb) = (&view.gpus[a], &view.gpus[b]);
        (&ga.model, ga.capacity, ga.free.min(ga.capacity), ga.index).cmp(&(
            &gb.model,
            gb.capacity,
            gb.free.min(gb.capacity),
            gb.index,
        ))
    });
    order
}
