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

/// The text of the NodeLost event: how long the node was silent and the epoch
/// it is fenced to.
pub fn loss_notice(node: &str, silent: Duration, fenced_epoch: u64) -> String {
    format!(
        "node {node} silent for {:.1}s: lost; epoch fenced to {fenced_epoch}; its tasks are requeued",
        silent.as_secs_f64()
    )
}
