//! Choosing victims: the cheapest set of allocations on ONE node whose removal
//! lets a waiting task fit. Cost, in order: guaranteed (not borrowed) victims
//! taken, the highest victim priority, work lost since the victims' last
//! checkpoints (GPU-weighted: an 8-GPU job loses eight times the work of a
//! 1-GPU job in the same time), and the number of victims. A task restarted
//! after a preemption or a node loss is protected for `min_runtime_ms`, so the
//! cheapest victim (the one that just restarted) is not evicted over and over.
use super::core::Core;
use super::ledger::node_view;
use crate::placement::{Demand, GpuUnit, Pool};
use std::collections::HashSet;

/// Cost of a victim set, compared in order: guaranteed victims, highest victim
/// priority, work lost (GPU-milli x ms), number of victims.
type Cost = (usize, u16, u64, usize);

/// A restarted task (attempt > 1) that has run less than `min_runtime_ms`.
pub fn protected(e: &super::ledger::Entry, min_runtime_ms: u64, now_ms: u64) -> bool {
    e.attempt > 1 && now_ms.saturating_sub(e.allocation.created_ms) < min_runtime_ms
}

/// GPUs held, in thousandths (a share counts as its fraction; CPU-only work as one).
fn gpu_weight(e: &super::ledger::Entry) -> u64 {
    match e.demand.gpu {
        crate::placement::GpuDemand::Share { milli } => milli as u64,
        _ if e.allocation.gpus.is_empty() => 1000,
        _ => e.allocation.gpus.len() as u64 * 1000,
    }
}

/// `(node, victim allocation ids)` or `None` when no set of allowed victims frees enough room.
pub fn choose_victims(
    core: &mut Core,
    demand: &Demand,
    priority: u16,
    tenant: &str,
    within_guarantee: bool,
    now_ms: u64,
) -> Option<(String, Vec<String>)> {
    let min_runtime_ms = core.config.min_runtime_ms;
    let mut best: Option<(Cost, String, Vec<String>)> = None;
    // Only nodes holding an allowed victim are searched, in name order.
    let mut nodes: Vec<String> = core
        .ledger
        .all()
        .filter(|e| {
            !e.preempting
                && !protected(e, min_runtime_ms, now_ms)
                && core.healthy.contains(&e.allocation.node)
        })
        .filter(|e| {
            e.allocation.priority < priority
                || (within_guarantee && e.allocation.borrowed && e.allocation.tenant != tenant)
        })
        .map(|e| e.allocation.node.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    for node in nodes {
        let Some(inv) = core.inventories.get(&node).cloned() else {
            continue;
        };
        // Allowed victims: lower priority, or borrowed room of another tenant
        // when the preemptor is within its guarantee.
        let mut cands: Vec<(bool, u16, u64, String)> = core
            .ledger
            .on_node(&node)
            .filter(|e| !e.preempting && !protected(e, min_runtime_ms, now_ms))
            .filter(|e| {
                e.allocation.priority < priority
                    || (within_guarantee && e.allocation.borrowed && e.allocation.tenant != tenant)
            })
            .map(|e| {
                (
                    !e.allocation.borrowed,
                    e.allocation.priority,
                    now_ms
                        .saturating_sub(e.checkpoint_ms)
                        .saturating_mul(gpu_weight(e)),
                    e.allocation.allocation_id.clone(),
                )
            })
            .collect();
        if cands.is_empty() {
            continue;
        }
        cands.sort();
        let mut chosen: HashSet<String> = HashSet::new();
        let mut cost: Cost = (0, 0, 0, 0);
        for (guaranteed, prio, lost, id) in cands {
            chosen.insert(id);
            cost = (
                cost.0 + guaranteed as usize,
                cost.1.max(prio),
                cost.2 + lost,
                cost.3 + 1,
            );
            let held = core
                .ledger
                .on_node(&node)
                .filter(|e| !chosen.contains(&e.allocation.allocation_id))
                .map(|e| &e.allocation);
            let view = node_view(&node, &inv, true, held);
            let mut pool = Pool::new(GpuUnit::MiB);
            pool.upsert_node(view);
            if core.checker.place(&pool, demand).is_ok() {
                if best.as_ref().is_none_or(|b| cost < b.0) {
                    let mut ids: Vec<String> = chosen.iter().cloned().collect();
                    ids.sort();
                    best = Some((cost, node.clone(), ids));
                }
                break;
            }
        }
    }
    best.map(|(_, n, v)| (n, v))
}
