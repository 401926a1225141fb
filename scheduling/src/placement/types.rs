//! The vocabulary of placement: what a node offers, what a request asks for, and
//! where a request was put. Plain data, shared by the live scheduler and `caldera sim`.
use std::collections::{BTreeMap, BTreeSet};

/// Dense index of a node inside a [`crate::placement::Pool`]. Stable for the
/// life of the pool: re-registering a node under the same name keeps its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

/// The unit a pool counts GPU room in. The live scheduler counts MiB of GPU
/// memory; the trace simulator counts milli-GPUs (every GPU has capacity 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GpuUnit {
    /// MiB of GPU memory (rejections speak of GB).
    #[default]
    MiB,
    /// Thousandths of one GPU (rejections speak of GPUs).
    Milli,
}

impl GpuUnit {
    /// A person-readable amount, e.g. `20 GB` or `0.46 GPU`.
    pub fn describe(self, units: u64) -> String {
        match self {
            GpuUnit::MiB => {
                if units.is_multiple_of(1024) {
                    format!("{} GB", units / 1024)
                } else {
                    format!("{:.1} GB", units as f64 / 1024.0)
                }
            }
            GpuUnit::Milli => format!("{} GPU", trim_float(units as f64 / 1000.0)),
        }
    }
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One GPU of a node, with its free room counted per GPU (never per node: 4 x 10 GB
/// free is not 40 GB free).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GpuSlot {
    /// Device index on the node.
    pub index: u32,
    /// Model name, e.g. `A100`, `V100M32`, `G2`.
    pub model: String,
    /// Capacity in the pool's [`GpuUnit`].
    pub capacity: u64,
    /// Free room in the pool's [`GpuUnit`]; never above `capacity`.
    pub free: u64,
}

impl GpuSlot {
    /// Whether nothing is allocated on this GPU.
    pub fn is_idle(&self) -> bool {
        self.free >= self.capacity
    }
}

/// What the placement engine knows about one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    /// Unique node name (the key the live scheduler and traces use).
    pub name: String,
    /// Whether the node may receive work (heartbeating, not drained).
    pub healthy: bool,
    /// Cordoned by an operator or drained: up, but no new placements.
    pub cordoned: bool,
    /// The node's GPUs.
    pub gpus: Vec<GpuSlot>,
    /// CPU capacity in milli-cores.
    pub cpu_capacity_milli: u64,
    /// Free CPU in milli-cores.
    pub cpu_free_milli: u64,
    /// Memory capacity in MiB.
    pub memory_capacity_mib: u64,
    /// Free memory in MiB.
    pub memory_free_mib: u64,
    /// Disk capacity in MiB.
    pub disk_capacity_mib: u64,
    /// Free disk in MiB.
    pub disk_free_mib: u64,
    /// Node labels; a request's labels must all be present with equal values.
    pub labels: BTreeMap<String, String>,
    /// A task holds this node exclusively: nothing else may land on it.
    pub exclusive_held: bool,
    /// Number of allocations on the node (an exclusive request needs 0).
    pub allocations: u32,
    /// What the node's weight cache holds (from its last report).
    pub weights: NodeWeights,
    /// The images the node holds (from its last image report).
    pub images: NodeImages,
    /// The node's container runtime is up (its inventory says so): tasks
    /// that run in a container may go there.
    pub container_runtime: bool,
}

/// A node's weight cache as placement sees it: which versions (by sha256)
/// it holds verified, which it is fetching, and how much room it could make.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeWeights {
    /// Capacity of the cache in bytes; 0: the node has no cache, and a
    /// demand with weights cannot run there.
    pub capacity_bytes: u64,
    /// Bytes the cache could hold for a new version: capacity less what is
    /// pinned or in use (those are never evicted).
    pub evictable_room_bytes: u64,
    /// Verified copies, by sha256 (for a copy that serves only one
    /// tenant's versions, its sha256 and that tenant: see the control
    /// plane's `placement_key`).
    pub cached: BTreeSet<String>,
    /// Copies being fetched, named as `cached` names them.
    pub warming: BTreeSet<String>,
}

/// The images a node holds as placement sees them: each name (canonical,
/// `registry/repo:tag`) and each `repo@digest` it answers to, with the
/// image's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeImages {
    pub held: BTreeMap<String, u64>,
}

/// The image a demand runs in, named as [`NodeImages::held`] names images,
/// with its size as the nodes that hold it report it (a demand only carries
/// one when that size is known: an image no node holds earns no node a
/// preference).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageNeed {
    pub image: String,
    pub size_bytes: u64,
}

/// The model weights a demand needs on its node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WeightsNeed {
    /// `name:version`, for explanations.
    pub model: String,
    /// The copy it needs, named as [`NodeWeights::cached`] names copies.
    pub sha256: String,
    pub size_bytes: u64,
}

impl NodeView {
    /// Summed free GPU room, each GPU counted in milli of its own capacity.
    pub fn gpu_free_milli(&self) -> u64 {
        self.gpus.iter().map(|g| to_milli(g.free, g.capacity)).sum()
    }
}

/// `units` of a GPU of `capacity`, as thousandths of that GPU (rounded down).
pub fn to_milli(units: u64, capacity: u64) -> u64 {
    if capacity == 0 {
        0
    } else {
        (units.min(capacity) as u128 * 1000 / capacity as u128) as u64
    }
}

/// What a request needs from GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GpuDemand {
    /// No GPU.
    None,
    /// A fraction of ONE GPU in milli (1..=999): needs `ceil(capacity*milli/1000)`
    /// free on one GPU (the trace's `gpu_milli`; the live `share`).
    Share { milli: u32 },
    /// `count` GPUs each with at least `per_gpu` units free (live `memory_gb` per
    /// GPU). With `count == 1` the GPU may be shared with other tasks.
    Memory { count: u32, per_gpu: u64 },
    /// `count` entirely free GPUs (trace `num_gpu >= 1` with `gpu_milli == 1000`).
    Whole { count: u32 },
}

impl GpuDemand {
    /// Number of GPUs touched.
    pub fn count(&self) -> u32 {
        match self {
            GpuDemand::None => 0,
            GpuDemand::Share { .. } => 1,
            GpuDemand::Memory { count, .. } | GpuDemand::Whole { count } => *count,
        }
    }

    /// Units needed on each chosen GPU of `capacity`, and whether that GPU must be
    /// entirely free. `None` when no GPU is asked for.
    pub fn per_gpu_need(&self, capacity: u64) -> Option<(u64, bool)> {
        match *self {
            GpuDemand::None => None,
            GpuDemand::Share { milli } => {
                let need = (capacity as u128 * milli as u128).div_ceil(1000) as u64;
                Some((need.max(1), false))
            }
            GpuDemand::Memory { per_gpu, .. } => Some((per_gpu.max(1), false)),
            GpuDemand::Whole { .. } => Some((capacity, true)),
        }
    }

    /// Milli of a GPU of `capacity` this demand needs on each GPU it takes
    /// (rounded up; 1000 when the GPU must be idle). `None` when no GPU is
    /// asked for or the need exceeds the capacity. Fragmentation and hole
    /// values measure in these units.
    pub fn need_milli(&self, capacity: u64) -> Option<u64> {
        match self.per_gpu_need(capacity)? {
            (_, true) => Some(1000),
            (units, false) if units <= capacity => {
                Some((units as u128 * 1000).div_ceil(capacity.max(1) as u128) as u64)
            }
            _ => None,
        }
    }

    /// Total GPU request in milli-GPUs of a GPU of `capacity` (what the trace
    /// metrics sum up).
    pub fn total_milli(&self, capacity: u64) -> u64 {
        match self.per_gpu_need(capacity) {
            None => 0,
            Some((need, _)) => to_milli(need, capacity) * self.count() as u64,
        }
    }

    /// Whether this is a GPU-sharing request (one GPU, partly).
    pub fn is_sharing(&self) -> bool {
        matches!(
            self,
            GpuDemand::Share { .. } | GpuDemand::Memory { count: 1, .. }
        )
    }
}

/// A request for resources on one node, computed once per placement cycle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Demand {
    /// GPU part of the request.
    pub gpu: GpuDemand,
    /// Allowed GPU models; empty = any model.
    pub gpu_models: Vec<String>,
    /// CPU in milli-cores.
    pub cpu_milli: u64,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Disk in MiB.
    pub disk_mib: u64,
    /// Labels the node must carry (all of them, equal values).
    pub labels: BTreeMap<String, String>,
    /// The request wants the whole node for itself.
    pub exclusive: bool,
    /// The model weights the task serves, if any (cache-aware placement).
    pub weights: Option<WeightsNeed>,
    /// The image the task runs in, if some node holds it (image locality).
    pub image: Option<ImageNeed>,
    /// The task runs in a container: only nodes with a container runtime up.
    pub needs_container: bool,
}

impl Default for Demand {
    fn default() -> Self {
        Demand {
            gpu: GpuDemand::None,
            gpu_models: Vec::new(),
            cpu_milli: 0,
            memory_mib: 0,
            disk_mib: 0,
            labels: BTreeMap::new(),
            exclusive: false,
            weights: None,
            image: None,
            needs_container: false,
        }
    }
}

impl Demand {
    /// Whether a GPU of `model` is acceptable.
    pub fn allows_model(&self, model: &str) -> bool {
        self.gpu_models.is_empty() || self.gpu_models.iter().any(|m| m == model)
    }
}

/// Where a request goes: a node and, per GPU, how many units are taken on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The chosen node.
    pub node: NodeId,
    /// `(gpu index, units taken on it)`.
    pub gpus: Vec<(u32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_need_rounds_up_per_gpu() {
        // 0.46 of a 16160 MiB GPU = 7433.6 -> 7434 MiB.
        let d = GpuDemand::Share { milli: 460 };
        assert_eq!(d.per_gpu_need(16160), Some((7434, false)));
        assert_eq!(d.per_gpu_need(1000), Some((460, false)));
        assert_eq!(GpuDemand::Whole { count: 2 }.total_milli(1000), 2000);
    }

    #[test]
    fn units_read_like_a_person_wrote_them() {
        assert_eq!(GpuUnit::MiB.describe(20 * 1024), "20 GB");
        assert_eq!(GpuUnit::Milli.describe(460), "0.46 GPU");
    }
}
