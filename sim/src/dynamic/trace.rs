//! The trace as the dynamic replay needs it: pods with their creation and
//! deletion times (seconds), and the GPU node list. Malformed values are
//! reported with file, line and column, never unwrapped.
use std::path::Path;

use super::DynamicError;

/// One pod of `openb_pod_list_*.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Pod name.
    pub name: String,
    /// CPU, milli-cores.
    pub cpu_milli: u64,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// Number of GPUs (0 = CPU-only).
    pub num_gpu: u32,
    /// Share of one GPU in milli (1000 = whole GPUs).
    pub gpu_milli: u32,
    /// Allowed GPU models (`V100M16|V100M32`), empty = any.
    pub gpu_spec: String,
    /// Arrival, seconds.
    pub creation_s: u64,
    /// Departure, seconds.
    pub deletion_s: u64,
}

impl Pod {
    /// GPUs requested (a share as its fraction).
    pub fn gpus(&self) -> f64 {
        if self.num_gpu == 0 || self.gpu_milli == 0 {
            0.0
        } else if self.num_gpu == 1 && self.gpu_milli < 1000 {
            self.gpu_milli as f64 / 1000.0
        } else {
            self.num_gpu as f64
        }
    }

    /// A GPU-sharing pod (part of one GPU).
    pub fn is_sharing(&self) -> bool {
        self.num_gpu == 1 && self.gpu_milli > 0 && self.gpu_milli < 1000
    }
}

/// The node list is the one the static replay reads: one loader, one type.
pub use crate::trace::TraceNode;

/// Loads a pod list, keeping the order of the file, with the static replay's
/// CSV reader and row checks plus the two time columns.
pub fn load_pods(path: &Path) -> Result<Vec<Pod>, DynamicError> {
    let timed = crate::trace::load_timed_tasks(path).map_err(|e| DynamicError(e.to_string()))?;
    Ok(timed
        .into_iter()
        .map(|(t, creation_s, deletion_s)| Pod {
            name: t.name,
            cpu_milli: t.cpu_milli,
            memory_mib: t.memory_mib,
            num_gpu: t.num_gpu,
            gpu_milli: t.gpu_milli,
            gpu_spec: t.gpu_spec.join("|"),
            creation_s,
            deletion_s,
        })
        .collect())
}

/// Loads a GPU node list with the static replay's loader.
pub fn load_nodes(path: &Path) -> Result<Vec<TraceNode>, DynamicError> {
    crate::trace::load_nodes(path).map_err(|e| DynamicError(e.to_string()))
}
