//! What a node's hello means for the workloads on it. The node reports what
//! it runs; the ledger says what it owns. [`reconcile`] compares the two: a
//! workload both know is kept (the node adopts it under its new epoch), one
//! the ledger no longer gives the node is killed (it was fenced: its task was
//! requeued elsewhere or ended), and an allocation the node did not report has
//! lost its workload (its task decides: dispatch again, requeue, or finish a
//! release). Exits the node kept while it was away are forwarded once.
//!
//! Pure: no actix, no clock, no I/O.
use caldera_spec::wire::{ExitStatus, WorkloadReport};
use caldera_spec::{Allocation, NodeInventory};
use std::collections::HashSet;

#[cfg(test)]
mod tests;

/// The outcome of one hello, in the order the node reported its workloads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reconciliation {
    /// Allocation ids the node still owns: it adopts them under the new epoch.
    pub keep: Vec<String>,
    /// Allocation ids it no longer owns: it kills them now.
    pub kill: Vec<String>,
    /// Allocations the node owns but did not report.
    pub missing: Vec<MissingWorkload>,
    /// Exits of kept workloads, at most one per allocation.
    pub exits: Vec<ReportedExit>,
}

/// An owned allocation whose workload the node no longer has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingWorkload {
    pub task_id: String,
    pub allocation_id: String,
}

/// An exit a node reported for a workload it still owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedExit {
    /// The task as the node names it (the task checks the allocation is its own).
    pub task_id: String,
    pub allocation_id: String,
    pub status: ExitStatus,
}

/// Compares what the ledger says a node owns with what the node reported.
/// A workload reported twice counts once (its first exit is the one forwarded).
pub fn reconcile(owned: &[Allocation], reported: &[WorkloadReport]) -> Reconciliation {
    let owned_ids: HashSet<&str> = owned.iter().map(|a| a.allocation_id.as_str()).collect();
    let reported_ids: HashSet<&str> = reported.iter().map(|w| w.allocation_id.as_str()).collect();
    let mut out = Reconciliation::default();
    let mut seen = HashSet::new();
    let mut exited = HashSet::new();
    for w in reported {
        let id = w.allocation_id.as_str();
        let ours = owned_ids.contains(id);
        if seen.insert(id) {
            if ours {
                out.keep.push(id.to_string());
            } else {
                out.kill.push(id.to_string());
            }
        }
        if let (true, Some(status)) = (ours, &w.exit) {
            if exited.insert(id) {
                out.exits.push(ReportedExit {
                    task_id: w.task_id.clone(),
                    allocation_id: id.to_string(),
                    status: status.clone(),
                });
            }
        }
    }
    let mut told = HashSet::new();
    for a in owned {
        let id = a.allocation_id.as_str();
        if !reported_ids.contains(id) && told.insert(id) {
            out.missing.push(MissingWorkload {
                task_id: a.task_id.clone(),
                allocation_id: id.to_string(),
            });
        }
    }
    out
}

impl Reconciliation {
    /// The fencing event's text, when the node is told to kill anything.
    pub fn kill_notice(&self, node: &str) -> Option<String> {
        (!self.kill.is_empty()).then(|| {
            format!(
                "node {node} told to kill workloads it no longer owns: {}",
                self.kill.join(", ")
            )
        })
    }
}

/// The text of the event recorded when a node's session opens.
/// `returned`: the node had been declared lost.
pub fn join_notice(node: &str, epoch: u64, returned: bool, inv: &NodeInventory) -> String {
    let sim = if inv.any_simulated() {
        " (simulated)"
    } else {
        ""
    };
    format!(
        "node {node} joined with epoch {epoch} ({}): {} GPUs{sim}, {} cores, {} MiB memory, isolation {}",
        if returned {
            "returned after loss"
        } else {
            "session"
        },
        inv.gpus.len(),
        inv.cpu_cores,
        inv.memory_total_mb,
        inv.isolation
    )
}
