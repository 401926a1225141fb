//! What declaring a node lost means: its epoch is fenced (whatever the old
//! session still runs is refused and, when it comes back, killed) and every
//! task with an allocation on it hears `NodeLost` once; each task then decides
//! (see `lifecycle`) whether it is queued again or has spent its retry budget.
//!
//! Pure: no actix, no clock (the silence is an argument), no I/O.
use caldera_spec::Allocation;
use std::collections::HashSet;
use std::time::Duration;

#[cfg(test)]
mod tests;

/// The tasks to tell, in ledger order, once each: those whose allocation is on
/// `node` (an allocation elsewhere is not this node's business).
pub fn tasks_to_tell(node: &str, allocations: &[Allocation]) -> Vec<String> {
    let mut told = HashSet::new();
    allocations
        .iter()
        .filter(|a| a.node == node)
        .filter(|a| told.insert(a.task_id.as_str()))
        .map(|a| a.task_id.clone())
        .collect()
}

/// Past the lease and the stop grace, what a fence waits on top: the
/// LeaseRenewed in flight, the agent's and shim's timer granularity, and the
/// reaping of the SIGKILLed process tree.
pub const FENCE_MARGIN: Duration = Duration::from_millis(500);

/// How long a lost node's `fence` tasks still wait, `since_renewal` after
/// the last LeaseRenewed the control plane sent there: the lease, then the
/// stop grace its shims give a workload (SIGTERM, grace, SIGKILL), then
/// [`FENCE_MARGIN`]; nothing once that has all passed.
pub fn fence_wait(since_renewal: Duration, lease: Duration, stop_grace: Duration) -> Duration {
    (lease + stop_grace + FENCE_MARGIN).saturating_sub(since_renewal)
}

/// The text of the NodeLost event: how long the node was silent, the epoch
/// it is fenced to, and how long its `fence` tasks wait for its lease.
pub fn loss_notice(node: &str, silent: Duration, fenced_epoch: u64, fence: Duration) -> String {
    format!(
        "node {node} silent for {:.1}s: lost; epoch fenced to {fenced_epoch}; its tasks are requeued (`fence` ones in {:.1}s, once its lease has run out)",
        silent.as_secs_f64(),
        fence.as_secs_f64()
    )
}
