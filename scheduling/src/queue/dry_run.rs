//! A dry run: where a task would go now, or why not and when it should start,
//! through the same stages a pass runs (admit -> place -> model quota ->
//! backfill) but binding nothing. The pool, the ledger, the queue and the
//! placer's seeded draws are exactly as they were afterwards, so a dry run
//! can never change what the live scheduler (or a replay) decides next.
use super::core::estimate;
use super::core::stages::admit::standing;
use super::core::stages::backfill::{blocks, Candidate};
use super::core::stages::place;
use super::core::stages::preempt::{choose_victims, Preemptor};
use super::core::Core;
use super::demand;
pub use caldera_spec::views::{Admission, DryRun, WouldPreempt};
use caldera_spec::{Standing, TaskSpec};

/// The answer of a task that would wait: no node, no GPUs, and why.
fn waits(admission: Admission, reason: String, estimated_start_ms: Option<u64>) -> DryRun {
    DryRun {
        placeable: false,
        node: None,
        gpu_indices: Vec::new(),
        reason: Some(reason),
        estimated_start_ms,
        admission,
        preempts: Vec::new(),
    }
}

impl Core {
    /// Where `spec` of `tenant` (its task key `task_id`) would go if it were
    /// submitted now. Read-only in effect: the placer's draws are rewound,
    /// and only memoised scores (a pure function of the pool) may be left
    /// warmer than before.
    pub fn dry_run(&mut self, task_id: &str, tenant: &str, spec: &TaskSpec, now_ms: u64) -> DryRun {
        let draws = (self.placer.draws(), self.checker.draws());
        let answer = self.preview(task_id, tenant, spec, now_ms);
        self.placer.rewind(draws.0);
        self.checker.rewind(draws.1);
        answer
    }

    fn preview(&mut self, task_id: &str, tenant: &str, spec: &TaskSpec, now_ms: u64) -> DryRun {
        let demand = self.demand_for(spec);
        let usage = demand::requested_usage(spec, &demand);
        let held = self.ledger.tenant_usage(tenant);
        let admission = match standing(self.limits.get(tenant), held, &usage) {
            Standing::Guaranteed => Admission::Guaranteed,
            Standing::Borrowing => Admission::Borrowing,
            Standing::OverQuota { dim, limit, would } => {
                let est = estimate::quota_start(self, tenant, &usage, now_ms);
                let reason = format!("over quota: {dim} would be {would:.2}, tenant {tenant} may use {limit:.2} (guarantee + borrowing limit)");
                return waits(Admission::OverQuota, reason, est);
            }
        };
        if let Some(why) = self.offers().never_fits(spec) {
            return waits(admission, format!("unschedulable: {why}"), None);
        }
        // A service's replica is placed under its spread, as a pass would
        // (never on a GPU another replica of the service holds).
        let placed = match place::spread_of(&self.ledger, &self.pool, task_id, spec) {
            Some(spread) => {
                place::place_replica(&mut self.placer, &mut self.pool, &demand, &spread)
                    .map(|(p, _)| p)
                    .map_err(|no_room| no_room.reason)
            }
            None => self
                .placer
                .place(&self.pool, &demand)
                .map_err(|rejections| rejections.summary(&demand)),
        };
        let p = match placed {
            Ok(p) => p,
            Err(reason) => {
                let within_guarantee = admission == Admission::Guaranteed;
                if let Some(d) =
                    self.preview_preemption(tenant, spec, &demand, within_guarantee, now_ms)
                {
                    return DryRun { admission, ..d };
                }
                let est = self.estimate_behind_queue(spec, &demand, now_ms);
                return waits(admission, reason, est);
            }
        };
        let node = self
            .pool
            .node(p.node)
            .map(|n| n.name.clone())
            .unwrap_or_default();
        let admission = match self.model_admission(tenant, &node, &demand, &p) {
            Ok(true) => Admission::Borrowing,
            Ok(false) => admission,
            Err(why) => return waits(Admission::OverQuota, why.to_string(), None),
        };
        let candidate = Candidate {
            task_id,
            priority: spec.priority.0,
            duration_ms: spec.duration_ms(),
            node: &node,
        };
        if let Some(why) = blocks(self.head.as_ref(), candidate, now_ms) {
            let est = self.head.as_ref().and_then(|h| h.start_ms);
            let est = spec.duration_ms().and(est).filter(|t| *t >= now_ms);
            return waits(admission, why, est);
        }
        DryRun {
            placeable: true,
            node: Some(node),
            gpu_indices: p.gpus.iter().map(|(i, _)| *i).collect(),
            reason: None,
            estimated_start_ms: Some(now_ms),
            admission,
            preempts: Vec::new(),
        }
    }

    /// What a pass would do for a task that found no room and may preempt
    /// (see the preempt stage): the victims it would stop on one node, and
    /// its start once they have had their stop grace. `None` when
    /// preemption is off, another preemption holds the head, or no victims
    /// make room. Chooses with the same function a pass uses.
    fn preview_preemption(
        &mut self,
        tenant: &str,
        spec: &TaskSpec,
        demand: &crate::placement::Demand,
        within_guarantee: bool,
        now_ms: u64,
    ) -> Option<DryRun> {
        if !self.config.preemption || self.head.as_ref().is_some_and(|h| h.preempting) {
            return None;
        }
        let who = Preemptor {
            demand,
            priority: spec.priority.0,
            tenant,
            within_guarantee,
        };
        let (node, victims) = choose_victims(self, &who, now_ms)?;
        let preempts: Vec<WouldPreempt> = victims
            .iter()
            .filter_map(|id| self.ledger.get(id))
            .map(|e| {
                let a = &e.allocation;
                WouldPreempt {
                    task: caldera_spec::as_seen_by(Some(tenant), &a.task_id),
                    gpus: a.gpus.len() as u32,
                    priority: caldera_spec::Priority(a.priority).label(),
                    reason: who.reason(a),
                }
            })
            .collect();
        let reason = format!(
            "would preempt {} running task(s) on {node} to make room, then start once they have stopped",
            preempts.len()
        );
        Some(DryRun {
            placeable: false,
            node: Some(node),
            gpu_indices: Vec::new(),
            reason: Some(reason),
            estimated_start_ms: Some(now_ms + self.config.stop_grace_ms),
            admission: Admission::Guaranteed,
            preempts,
        })
    }

    /// The start estimate of a task that finds no room: planned in after
    /// the waiting tasks of its priority or higher (those a pass would
    /// consider before it), the first `estimate_depth` of them, as the
    /// queue's own estimates are.
    fn estimate_behind_queue(
        &mut self,
        spec: &TaskSpec,
        demand: &crate::placement::Demand,
        now_ms: u64,
    ) -> Option<u64> {
        let ids = self.waiting.keys().cloned().collect();
        let mut ahead: Vec<_> = self
            .order(ids)
            .iter()
            .filter_map(|id| self.waiting.get(id))
            .filter(|w| w.task.spec.priority.0 >= spec.priority.0)
            .take(self.config.estimate_depth.saturating_sub(1))
            .map(|w| ((*w.demand).clone(), w.task.spec.duration_ms()))
            .collect();
        ahead.push((demand.clone(), spec.duration_ms()));
        let starts = estimate::queue_starts(self, &ahead, now_ms);
        starts.last().cloned().flatten().map(|(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::core::{TenantLimits, WaitingTask};
    use crate::queue::fixtures::{core_with, running, spec, waiting};
    use caldera_spec::Quota;

    #[test]
    fn a_task_that_fits_names_its_node_and_gpus_and_binds_nothing() {
        // One node "a" with 2 A100s; asking 1 GPU fits now.
        let mut c = core_with(&[("a", 2)]);
        let before = c.placer.draws();
        let d = c.dry_run("t/one", "t", &spec("one", 1, "medium", None), 5);
        assert!(d.placeable, "{d:?}");
        assert_eq!(d.node.as_deref(), Some("a"));
        assert_eq!(d.gpu_indices.len(), 1);
        assert_eq!(d.estimated_start_ms, Some(5));
        assert_eq!(d.admission, Admission::Guaranteed);
        // Nothing bound, nothing queued, the seeded draws where they were.
        assert_eq!(c.ledger().len(), 0);
        assert_eq!(c.queued(), 0);
        assert_eq!(format!("{:?}", c.placer.draws()), format!("{before:?}"));
    }

    #[test]
    fn a_task_without_room_says_why_and_when_the_running_work_ends() {
        // "a": 2 GPUs, both held by a one-hour task since t = 0.
        let mut c = core_with(&[("a", 2)]);
        let busy = waiting("t", spec("busy", 2, "medium", Some("01:00:00")), 1, 1);
        running(&mut c, "a", busy, &[0, 1], false, 0);
        let d = c.dry_run("t/next", "t", &spec("next", 1, "medium", None), 1000);
        assert!(!d.placeable);
        assert!(
            d.reason.as_deref().is_some_and(|r| r.contains("idle GPU")),
            "{d:?}"
        );
        // The busy task ends at 3600 s: the estimate.
        assert_eq!(d.estimated_start_ms, Some(3_600_000));
        // A task no node could ever hold (4 GPUs on a 2-GPU pool).
        let d = c.dry_run("t/big", "t", &spec("big", 4, "medium", None), 1000);
        assert!(
            d.reason
                .as_deref()
                .is_some_and(|r| r.starts_with("unschedulable")),
            "{d:?}"
        );
        assert_eq!(c.ledger().len(), 1);
    }

    /// A waiting task of `tenant` known by its key `tenant/id`.
    fn keyed(tenant: &str, id: &str, gpus: u32, priority: &str) -> WaitingTask {
        let mut w = waiting(tenant, spec(id, gpus, priority, None), 1, 1);
        w.task_id = format!("{tenant}/{id}");
        w
    }

    #[test]
    fn a_task_that_would_preempt_names_its_victims_and_stops_nothing() {
        // "a": 2 GPUs, both held by tenant u's low-priority task; a 1-GPU
        // task of t's own at medium on "b" (1 GPU).
        let mut c = core_with(&[("a", 2), ("b", 1)]);
        running(&mut c, "a", keyed("u", "six", 2, "low"), &[0, 1], false, 0);
        running(&mut c, "b", keyed("t", "mine", 1, "medium"), &[0], false, 0);
        // Asking 2 GPUs at high: no room, and u's task is outranked.
        let d = c.dry_run("t/urgent", "t", &spec("urgent", 2, "high", None), 1000);
        assert!(!d.placeable, "{d:?}");
        assert_eq!(d.node.as_deref(), Some("a"));
        assert_eq!(
            d.preempts,
            vec![WouldPreempt {
                task: "another tenant's task".into(),
                gpus: 2,
                priority: "low".into(),
                reason: "priority 900 outranks 100".into(),
            }]
        );
        assert!(
            d.reason.as_deref().is_some_and(|r| r.contains("preempt")),
            "{d:?}"
        );
        // Starts once the victim has had its stop grace.
        assert_eq!(d.estimated_start_ms, Some(1000 + c.config.stop_grace_ms));
        // Nothing was marked: the ledger is as it was.
        assert!(c.ledger().all().all(|e| !e.preempting));
        // At low priority it outranks nothing and just waits.
        let d = c.dry_run("t/meek", "t", &spec("meek", 2, "low", None), 1000);
        assert!(d.preempts.is_empty(), "{d:?}");
        assert!(d.node.is_none(), "{d:?}");
        // One's own task is named by its id.
        let mut c = core_with(&[("a", 1)]);
        running(&mut c, "a", keyed("t", "old", 1, "low"), &[0], false, 0);
        let d = c.dry_run("t/new", "t", &spec("new", 1, "high", None), 5);
        assert_eq!(d.preempts.len(), 1, "{d:?}");
        assert_eq!(d.preempts[0].task, "old");
    }

    #[test]
    fn a_tenant_past_its_limit_is_over_quota() {
        // Guarantee 1 GPU + borrowing 0: asking 2 is over (would be 2, may use 1).
        let mut c = core_with(&[("a", 4)]);
        let one = Quota {
            gpus: Some(1.0),
            ..Quota::default()
        };
        let none = Quota {
            gpus: Some(0.0),
            ..Quota::default()
        };
        c.set_limits(
            "t",
            TenantLimits {
                guaranteed: one,
                borrowing_limit: none,
            },
        );
        let d = c.dry_run("t/two", "t", &spec("two", 2, "medium", None), 0);
        assert_eq!(d.admission, Admission::OverQuota);
        assert!(
            d.reason
                .as_deref()
                .is_some_and(|r| r.contains("gpus would be 2.00")),
            "{d:?}"
        );
    }
}
