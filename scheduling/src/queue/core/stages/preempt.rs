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
use super::super::{Core, Decision, Waiting};
use super::backfill::Reservation;
use crate::placement::{Demand, GpuDemand, GpuUnit, Pool};
use crate::queue::ledger::{node_view, Entry};
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
    pub fn reason(&self, victim: &Allocation) -> String {
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
        .filter(|e| evictable(e, who, min_runtime_ms, now_ms) && core.placeable(&e.allocation.node))
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
    let mut view = node_view(node, inv, true, held);
    // As reported: the victims' versions may become evictable once they
    // stop, but the node has not said so yet.
    view.weights = core.node_weights(node);
    let mut pool = Pool::new(GpuUnit::MiB);
    pool.upsert_node(view);
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
        // The reservation changed: what waiting tasks were told (waiting
        // behind another head, its start) may no longer be true. The next
        // pass looks at the whole queue and tells each what holds now.
        self.room_grew();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::fixtures::{core_with, running, spec, waiting};

    const LOW: u16 = 100;
    const MEDIUM: u16 = 500;
    const HIGH: u16 = 900;

    /// The whole-GPU demand of a task asking `gpus` (as the core computes it).
    fn asking(core: &Core, gpus: u32) -> Demand {
        core.demand_for(&spec("p", gpus, "medium", None))
    }

    #[test]
    fn a_victims_cost_is_guaranteed_then_priority_then_gpu_weighted_work_lost() {
        let mut c = core_with(&[("a", 8)]);
        // (task, GPUs, priority, borrowed, last checkpoint s) at now = 100 s
        let rows = [
            // Guaranteed, low, 1 GPU x (100 - 0) s = 1000 milli x 100000 ms = 1e8.
            ("one", 1, "low", false, 0, (true, LOW, 100_000_000)),
            // 8 GPUs x 100 s: 8000 x 100000 = 8e8, eight times "one".
            ("eight", 8, "low", false, 0, (true, LOW, 800_000_000)),
            // Checkpointed at 90 s: 1000 x (100 - 90) s = 1e7.
            ("saved", 1, "low", false, 90, (true, LOW, 10_000_000)),
            // Borrowed, high: not guaranteed (false sorts first), priority 900.
            ("lent", 1, "high", true, 0, (false, HIGH, 100_000_000)),
        ];
        for (id, gpus, prio, borrowed, ckpt_s, want) in rows {
            let indices: Vec<u32> = (0..gpus).collect();
            let w = waiting("t", spec(id, gpus, prio, None), 1, 1);
            running(&mut c, "a", w, &indices, borrowed, ckpt_s * 1000);
            let e = c.ledger.get(&format!("{id}.1")).expect("restored");
            assert_eq!(victim_cost(e, 100_000), want, "{id}");
        }
        // A 0.25 share for 100 s: 250 milli x 100000 ms = 2.5e7.
        let e = c.ledger.get("one.1").expect("restored").clone();
        let share = Entry {
            demand: Demand {
                gpu: GpuDemand::Share { milli: 250 },
                ..e.demand.clone()
            },
            ..e
        };
        assert_eq!(victim_cost(&share, 100_000), (true, LOW, 25_000_000));
    }

    #[test]
    fn a_restarted_task_is_protected_until_it_has_run_its_minimum() {
        let mut c = core_with(&[("a", 1)]);
        running(
            &mut c,
            "a",
            waiting("t", spec("x", 1, "low", None), 1, 2),
            &[0],
            false,
            0,
        );
        let mut e = c.ledger.get("x.2").expect("restored").clone();
        // (attempt, started s, now s, protected?) with a 60 s minimum runtime
        let rows = [
            // First start: never protected.
            (1, 0, 10, false),
            // Restarted, ran 10 - 0 = 10 s < 60 s: protected.
            (2, 0, 10, true),
            // Ran 60 s, not < 60 s: no longer protected.
            (2, 0, 60, false),
            // Third attempt, started at 50 s, ran 100 - 50 = 50 s < 60 s.
            (3, 50, 100, true),
        ];
        for (attempt, started_s, now_s, want) in rows {
            e.attempt = attempt;
            e.allocation.created_ms = started_s * 1000;
            assert_eq!(
                protected(&e, 60_000, now_s * 1000),
                want,
                "{attempt} {started_s} {now_s}"
            );
        }
    }

    #[test]
    fn the_cheapest_set_on_one_node_wins() {
        // Node a: a-low (GPU 0, low) and a-med (GPU 1, medium); node b: b-low2
        // (GPUs 0 and 1, low). All tenant t, guaranteed, checkpointed at 0.
        let mut c = core_with(&[("a", 2), ("b", 2)]);
        let run = |c: &mut Core, node, id, gpus: &[u32], prio| {
            let w = waiting("t", spec(id, gpus.len() as u32, prio, None), 1, 1);
            running(c, node, w, gpus, false, 0);
        };
        run(&mut c, "a", "a-low", &[0], "low");
        run(&mut c, "a", "a-med", &[1], "medium");
        run(&mut c, "b", "b-low2", &[0, 1], "low");
        // (preemptor priority, GPUs asked, chosen) at now = 100 s. Costs are
        // (guaranteed victims, highest priority, GPU-milli x ms lost, victims).
        let rows = [
            // a: {a-low} = (1, 100, 1000 x 100000 = 1e8, 1) frees 1 GPU: fits.
            // b: {b-low2} = (1, 100, 2000 x 100000 = 2e8, 1). 1e8 < 2e8 -> a.
            (HIGH, 1, Some(("a", vec!["a-low.1"]))),
            // a: a-low (cheaper: 100 < 500) frees 1 of 2, then a-med:
            // (2, 500, 2e8, 2). b: (1, 100, 2e8, 1). 1 < 2 guaranteed -> b.
            (HIGH, 2, Some(("b", vec!["b-low2.1"]))),
            // a-med is not lower than medium: a can free only 1 GPU of 2 -> b.
            (MEDIUM, 2, Some(("b", vec!["b-low2.1"]))),
            // Medium, 1 GPU: as the first row, a-low (1e8 < 2e8).
            (MEDIUM, 1, Some(("a", vec!["a-low.1"]))),
            // Low outranks nothing (100 is not < 100).
            (LOW, 1, None),
        ];
        for (priority, gpus, want) in rows {
            let demand = asking(&c, gpus);
            let who = Preemptor {
                demand: &demand,
                priority,
                tenant: "t",
                within_guarantee: false,
            };
            let got = choose_victims(&mut c, &who, 100_000);
            let want =
                want.map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect()));
            assert_eq!(got, want, "priority {priority}, {gpus} GPUs");
        }
    }

    #[test]
    fn a_container_task_preempts_only_where_a_container_runtime_is_up() {
        // Node a runs processes only; node b has podman up. Each holds one
        // low task on its one GPU; a high container task needs one GPU.
        let mut c = core_with(&[("a", 1)]);
        let mut podman = crate::queue::fixtures::node(1);
        podman.runtimes = vec![caldera_spec::container::RuntimeInfo {
            kind: caldera_spec::container::RuntimeKind::Container,
            engine: "podman".into(),
            version: "4.3.1".into(),
            up: true,
            detail: String::new(),
        }];
        c.node_up("b", podman);
        // On a, the low task is checkpointed at 99 s (cost 1000 x 1000 = 1e6),
        // on b at 0 (1000 x 100000 = 1e8): a is the cheaper victim, but a
        // container cannot run there.
        running(
            &mut c,
            "a",
            waiting("t", spec("on-a", 1, "low", None), 1, 1),
            &[0],
            false,
            99_000,
        );
        running(
            &mut c,
            "b",
            waiting("t", spec("on-b", 1, "low", None), 2, 1),
            &[0],
            false,
            0,
        );
        let mut container = spec("p", 1, "high", None);
        container.image = Some("registry.internal/team/app:1".into());
        let demand = c.demand_for(&container);
        assert!(demand.needs_container);
        let who = Preemptor {
            demand: &demand,
            priority: HIGH,
            tenant: "t",
            within_guarantee: false,
        };
        let got = choose_victims(&mut c, &who, 100_000);
        assert_eq!(got, Some(("b".to_string(), vec!["on-b.1".to_string()])));
        // The same task as a process takes the cheaper victim on a.
        let process = asking(&c, 1);
        let who = Preemptor {
            demand: &process,
            ..who
        };
        let got = choose_victims(&mut c, &who, 100_000);
        assert_eq!(got, Some(("a".to_string(), vec!["on-a.1".to_string()])));
    }

    /// Node c: "lent", tenant t, medium, borrowed, checkpointed at 0 ->
    /// cost (0, 500, 1000 x 100000 = 1e8, 1). Node d: "owned", tenant t, low,
    /// guaranteed, checkpointed at 99 s -> (1, 100, 1000 x 1000 = 1e6, 1).
    fn lent_and_owned() -> Core {
        let mut c = core_with(&[("c", 1), ("d", 1)]);
        let lent = waiting("t", spec("lent", 1, "medium", None), 1, 1);
        running(&mut c, "c", lent, &[0], true, 0);
        let owned = waiting("t", spec("owned", 1, "low", None), 2, 1);
        running(&mut c, "d", owned, &[0], false, 99_000);
        c
    }

    #[test]
    fn borrowed_room_goes_first_to_a_tenant_within_its_guarantee() {
        let mut c = lent_and_owned();
        // (tenant, priority, within its guarantee, chosen)
        let rows = [
            // u within its guarantee may take t's borrowed room: 0 guaranteed
            // victims beats 1, though it loses 100x the work -> lent.
            ("u", MEDIUM, true, "lent.1"),
            // u borrowing itself: lent is not lower (500), only owned (100).
            ("u", MEDIUM, false, "owned.1"),
            // t may not reclaim its own borrowed room: owned.
            ("t", MEDIUM, true, "owned.1"),
            // High outranks both; 0 guaranteed victims still wins -> lent.
            ("u", HIGH, true, "lent.1"),
        ];
        for (tenant, priority, within_guarantee, want) in rows {
            let demand = asking(&c, 1);
            let who = Preemptor {
                demand: &demand,
                priority,
                tenant,
                within_guarantee,
            };
            let got = choose_victims(&mut c, &who, 100_000).map(|(_, v)| v);
            assert_eq!(
                got,
                Some(vec![want.to_string()]),
                "{tenant} {priority} {within_guarantee}"
            );
        }
    }

    #[test]
    fn a_victim_is_told_whether_priority_or_a_guarantee_stops_it() {
        let c = lent_and_owned();
        let demand = asking(&c, 1);
        let who = Preemptor {
            demand: &demand,
            priority: MEDIUM,
            tenant: "u",
            within_guarantee: true,
        };
        let told = |id: &str| who.reason(&c.ledger.get(id).expect("running").allocation);
        // 500 > 100: by priority.
        assert_eq!(told("owned.1"), "priority 500 outranks 100");
        // 500 = 500, borrowed: by the guarantee.
        assert_eq!(
            told("lent.1"),
            "tenant u reclaims its guarantee from borrowed capacity"
        );
    }
}
