//! Stage 5, preempt: a task that found no room may stop running work it
//! outranks, on ONE node, and have that node reserved for it while the victims
//! checkpoint and stop.
//!
//! Who may be a victim: an allocation of lower priority, or, when the
//! preemptor is within its guarantee, borrowed room of another tenant; never
//! one already stopping, and never a task restarted (attempt > 1) less than
//! `min_runtime_ms` ago, so the cheapest victim (the one that just restarted)
//! is not evicted over and over.
//!
//! Which: on every node holding a victim, victims are taken cheapest first
//! until the preemptor fits; the node whose set costs least wins (the first
//! in name order on a tie). Cost, compared in order: guaranteed (not borrowed)
//! victims taken, the highest victim priority, work lost since the victims'
//! last checkpoints (GPU-weighted: an 8-GPU job loses eight times the work of
//! a 1-GPU job in the same time), and the number of victims.
use super::super::core::{Core, Decision, Waiting};
use super::super::ledger::{node_view, Entry};
use super::backfill::Reservation;
use crate::placement::{Demand, GpuDemand, GpuUnit, Pool};
use caldera_spec::{Allocation, NodeInventory};
use std::collections::HashSet;

/// Cost of a victim set, compared in order: guaranteed victims, highest victim
/// priority, work lost (GPU-milli x ms), number of victims.
type Cost = (usize, u16, u64, usize);

/// Cost of one victim, compared in order: guaranteed (not borrowed), its
/// priority, work lost (GPU-milli x ms).
type VictimCost = (bool, u16, u64);

/// The task asking for room, and so what it may evict.
#[derive(Debug, Clone, Copy)]
pub struct Preemptor<'a> {
    pub demand: &'a Demand,
    pub priority: u16,
    pub tenant: &'a str,
    /// Within its guarantee: it may also take other tenants' borrowed room.
    pub within_guarantee: bool,
}

impl Preemptor<'_> {
    /// Whether it outranks `a`: a lower priority, or borrowed room of another
    /// tenant while the preemptor is within its guarantee.
    pub fn outranks(&self, a: &Allocation) -> bool {
        a.priority < self.priority
            || (self.within_guarantee && a.borrowed && a.tenant != self.tenant)
    }

    /// Why it stops `victim`, as the victim is told.
    fn reason(&self, victim: &Allocation) -> String {
        if victim.priority < self.priority {
            format!("priority {} outranks {}", self.priority, victim.priority)
        } else {
            format!(
                "tenant {} reclaims its guarantee from borrowed capacity",
                self.tenant
            )
        }
    }
}

/// A restarted task (attempt > 1) that has run less than `min_runtime_ms`.
pub fn protected(e: &Entry, min_runtime_ms: u64, now_ms: u64) -> bool {
    e.attempt > 1 && now_ms.saturating_sub(e.allocation.created_ms) < min_runtime_ms
}

/// GPUs held, in thousandths (a share counts as its fraction; CPU-only work as one).
fn gpu_weight(e: &Entry) -> u64 {
    match e.demand.gpu {
        GpuDemand::Share { milli } => milli as u64,
        _ if e.allocation.gpus.is_empty() => 1000,
        _ => e.allocation.gpus.len() as u64 * 1000,
    }
}

/// What stopping `e` now costs.
pub fn victim_cost(e: &Entry, now_ms: u64) -> VictimCost {
    let lost = now_ms
        .saturating_sub(e.checkpoint_ms)
        .saturating_mul(gpu_weight(e));
    (!e.allocation.borrowed, e.allocation.priority, lost)
}

/// Whether `who` may stop `e` now.
fn evictable(e: &Entry, who: &Preemptor, min_runtime_ms: u64, now_ms: u64) -> bool {
    !e.preempting && !protected(e, min_runtime_ms, now_ms) && who.outranks(&e.allocation)
}

/// `(node, victim allocation ids)` or `None` when no set of allowed victims
/// on one node frees enough room.
pub fn choose_victims(
    core: &mut Core,
    who: &Preemptor,
    now_ms: u64,
) -> Option<(String, Vec<String>)> {
    let mut best: Option<(Cost, String, Vec<String>)> = None;
    for node in nodes_with_victims(core, who, now_ms) {
        let Some((cost, ids)) = cheapest_on(core, &node, who, now_ms) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((cost, node, ids));
        }
    }
    best.map(|(_, n, v)| (n, v))
}

/// Healthy nodes holding a victim `who` may stop, in name order.
fn nodes_with_victims(core: &Core, who: &Preemptor, now_ms: u64) -> Vec<String> {
    let min_runtime_ms = core.config.min_runtime_ms;
    let mut nodes: Vec<String> = core
        .ledger
        .all()
        .filter(|e| {
            evictable(e, who, min_runtime_ms, now_ms) && core.healthy.contains(&e.allocation.node)
        })
        .map(|e| e.allocation.node.clone())
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The cheapest victims on `node` that make room for `who` (taken cheapest
/// first until it fits): their cost and sorted ids; `None` when even all of
/// them do not.
fn cheapest_on(
    core: &mut Core,
    node: &str,
    who: &Preemptor,
    now_ms: u64,
) -> Option<(Cost, Vec<String>)> {
    let inv = core.inventories.get(node)?.clone();
    let min_runtime_ms = core.config.min_runtime_ms;
    let mut cands: Vec<(VictimCost, String)> = core
        .ledger
        .on_node(node)
        .filter(|e| evictable(e, who, min_runtime_ms, now_ms))
        .map(|e| (victim_cost(e, now_ms), e.allocation.allocation_id.clone()))
        .collect();
    cands.sort();
    let mut chosen: HashSet<String> = HashSet::new();
    let mut cost: Cost = (0, 0, 0, 0);
    for ((guaranteed, prio, lost), id) in cands {
        chosen.insert(id);
        cost = (
            cost.0 + guaranteed as usize,
            cost.1.max(prio),
            cost.2 + lost,
            cost.3 + 1,
        );
        if fits_without(core, node, &inv, &chosen, who.demand) {
            let mut ids: Vec<String> = chosen.into_iter().collect();
            ids.sort();
            return Some((cost, ids));
        }
    }
    None
}

/// Whether `demand` fits on `node` once the `chosen` allocations are gone.
fn fits_without(
    core: &mut Core,
    node: &str,
    inv: &NodeInventory,
    chosen: &HashSet<String>,
    demand: &Demand,
) -> bool {
    let held = core
        .ledger
        .on_node(node)
        .filter(|e| !chosen.contains(&e.allocation.allocation_id))
        .map(|e| &e.allocation);
    let mut pool = Pool::new(GpuUnit::MiB);
    pool.upsert_node(node_view(node, inv, true, held));
    core.checker.place(&pool, demand).is_ok()
}

impl Core {
    /// Stops the cheapest victims on one node for `w`, which found no room,
    /// and reserves that node for it. `false` (nothing done) when preemption
    /// is off, another preemption holds the head, or no victims make room.
    pub(in crate::queue) fn preempt(
        &mut self,
        id: &str,
        w: &Waiting,
        within_guarantee: bool,
        now_ms: u64,
        out: &mut Vec<Decision>,
    ) -> bool {
        if !self.config.preemption || self.head.as_ref().is_some_and(|h| h.preempting) {
            return false;
        }
        let who = Preemptor {
            demand: &w.demand,
            priority: w.task.spec.priority.0,
            tenant: &w.task.tenant,
            within_guarantee,
        };
        // Cheap gate before the search: is there any possible victim at all?
        if !self
            .ledger
            .all()
            .any(|e| !e.preempting && who.outranks(&e.allocation))
        {
            return false;
        }
        let Some((node, victims)) = choose_victims(self, &who, now_ms) else {
            return false;
        };
        for v in &victims {
            if let Some(e) = self.ledger.get_mut(v) {
                e.preempting = true;
                out.push(Decision::Preempt {
                    victim: e.allocation.clone(),
                    for_task: id.to_string(),
                    reason: who.reason(&e.allocation),
                });
            }
        }
        let start = now_ms + self.config.stop_grace_ms;
        let reason = format!(
            "preempting {} allocation(s) on {node} to make room",
            victims.len()
        );
        self.head = Some(Reservation {
            task_id: id.to_string(),
            priority: who.priority,
            node,
            start_ms: Some(start),
            preempting: true,
        });
        self.estimates.insert(id.to_string(), Some(start));
        self.pending(out, id, reason, Some(start));
        true
    }
}
