//! The idle inspector: compares each allocation with its measured use. An
//! allocation idle for a whole window gets an `idle_warning` event (which
//! the `idle.warning` webhooks deliver); still idle after the grace period, it is
//! reclaimed (training: checkpoint and stop; inference: scale in) unless its
//! task is exempt. It also samples allocated-vs-used per tenant over time — the
//! report that ends quota hoarding.
use super::utilization::{allocated_use, measured_use};
use super::Scheduler;
use crate::config::ServerConfig;
use crate::protocol::task::Reclaim;
use actix::{Context, Handler, MessageResult};
use caldera_spec::{Allocation, Event, EventKind, Usage};
use std::collections::HashMap;
use std::time::Duration;

/// One allocation's idle watch: since when it is idle, whether it was warned.
#[derive(Debug, Clone, Default, PartialEq)]
struct Watch {
    idle_since: Option<u64>,
    warned_at: Option<u64>,
    reclaimed: bool,
}

/// What one inspection decides for one allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Nothing,
    /// Idle for the whole window: warn (the value is how long, ms).
    Warn(u64),
    /// Still idle a grace period after the warning: reclaim (idle for, ms).
    Reclaim(u64),
}

impl Watch {
    /// Advances the watch by one inspection at `now`. Busy resets it; idle
    /// for `window` warns once; idle `grace` past the warning reclaims once.
    /// Differences saturate, so a `now` earlier than a stamp (a clock that
    /// stepped back) reads as "no time passed", never as an underflow.
    fn step(&mut self, busy: bool, now: u64, window: u64, grace: u64) -> Verdict {
        if busy {
            *self = Watch::default();
            return Verdict::Nothing;
        }
        let since = *self.idle_since.get_or_insert(now);
        let idle_for = now.saturating_sub(since);
        match self.warned_at {
            None if idle_for >= window => {
                self.warned_at = Some(now);
                Verdict::Warn(idle_for)
            }
            Some(warned) if !self.reclaimed && now.saturating_sub(warned) >= grace => {
                self.reclaimed = true;
                Verdict::Reclaim(idle_for)
            }
            _ => Verdict::Nothing,
        }
    }
}

/// One inspection's findings, carried out by the Scheduler afterwards.
#[derive(Default)]
pub(super) struct Survey {
    pub(super) allocated: HashMap<String, Usage>,
    pub(super) used: HashMap<String, Usage>,
    /// What allocations measured idle in this pass hold, and their ids.
    pub(super) idle: Usage,
    pub(super) idle_ids: Vec<String>,
    /// What borrowed allocations hold.
    pub(super) borrowed: Usage,
    warn: Vec<(Allocation, u64, String)>,
    reclaim: Vec<(Allocation, u64)>,
}

pub struct Inspector {
    threshold_pct: f32,
    window_ms: u64,
    grace_ms: u64,
    sample_ms: u64,
    watches: HashMap<String, Watch>,
    /// Billing's measured-idle time per allocation and what is persisted.
    pub(super) billing: super::idle_clock::IdleClock,
    /// Each live allocation's latest samples of granted vs measured use.
    pub(super) trails: HashMap<String, std::collections::VecDeque<crate::views::UsePoint>>,
}

/// Samples a use trail keeps (10 minutes at the default 10 s sampling):
/// the task page's curve. A point is 16 bytes, so even 100,000 live
/// allocations hold under 100 MB of trails, inside the control plane's
/// memory target.
pub const TRAIL_SAMPLES: usize = 60;

impl Inspector {
    pub fn new(c: &ServerConfig, store: &caldera_storage::Store) -> Inspector {
        Inspector {
            threshold_pct: c.scheduling.idle_threshold_pct,
            window_ms: c.scheduling.idle_window_ms,
            grace_ms: c.scheduling.idle_grace_ms,
            sample_ms: c.scheduling.usage_sample_ms,
            watches: HashMap::new(),
            billing: super::idle_clock::IdleClock::load(store),
            trails: HashMap::new(),
        }
    }

    pub fn sample_every(&self) -> Duration {
        Duration::from_millis(self.sample_ms.max(100))
    }

    /// Whether `a` measured `m` counts as busy: its GPUs' utilisation (or,
    /// holding no GPU, its CPU) at or above `scheduling.idle-threshold-pct`. The one
    /// rule for idle, for the warnings and for `/metrics`.
    pub fn is_busy(&self, a: &Allocation, m: &caldera_spec::wire::AllocationUse) -> bool {
        let measured = if a.gpus.is_empty() {
            m.cpu_pct
        } else {
            m.gpu_utilization_pct
        };
        measured >= self.threshold_pct
    }

    pub fn forget(&mut self, allocation_id: &str) {
        self.watches.remove(allocation_id);
        self.trails.remove(allocation_id);
        self.billing.forget(allocation_id);
    }
}

impl Handler<crate::protocol::scheduler::QueryUseTrail> for Scheduler {
    type Result = MessageResult<crate::protocol::scheduler::QueryUseTrail>;
    fn handle(
        &mut self,
        q: crate::protocol::scheduler::QueryUseTrail,
        _: &mut Context<Self>,
    ) -> Self::Result {
        let trail = self.idle.trails.get(&q.allocation_id);
        MessageResult(
            trail
                .map(|t| t.iter().cloned().collect())
                .unwrap_or_default(),
        )
    }
}

impl Scheduler {
    /// One pass of the inspector: survey the ledger against measured use,
    /// then warn, reclaim and sample.
    pub(crate) fn inspect_idle(&mut self) {
        let now = self.clock.now_ms();
        let survey = self.survey_idle(now);
        self.warn_idle(&survey.warn, now);
        self.reclaim_idle(&survey.reclaim);
        self.record_usage(&survey, now);
    }

    /// Walks the ledger: per-tenant allocated and used totals, and each
    /// allocation's watch stepped once.
    fn survey_idle(&mut self, now: u64) -> Survey {
        let mut out = Survey::default();
        let (window, grace) = (self.idle.window_ms, self.idle.grace_ms);
        for e in self.core.ledger().all() {
            let a = &e.allocation;
            // The views' rule (a GPU by its memory fraction), not the
            // quota's count of whole GPUs: these samples are a view.
            let u = allocated_use(a, self.core.inventory(&a.node));
            *out.allocated.entry(a.tenant.clone()).or_default() += u;
            if a.borrowed {
                out.borrowed += u;
            }
            let Some(m) = self.usage.get(&a.allocation_id) else {
                continue;
            };
            let used = measured_use(&u, m);
            *out.used.entry(a.tenant.clone()).or_default() += used;
            let trail = self.idle.trails.entry(a.allocation_id.clone()).or_default();
            if trail.len() >= TRAIL_SAMPLES {
                trail.pop_front();
            }
            trail.push_back(crate::views::UsePoint::of(now, &u, &used));
            let busy = self.idle.is_busy(a, m);
            // Billing counts idle time whatever the warning policy says.
            if !busy {
                out.idle += u;
                out.idle_ids.push(a.allocation_id.clone());
            }
            if window == 0 || e.idle_exempt {
                continue;
            }
            let w = self
                .idle
                .watches
                .entry(a.allocation_id.clone())
                .or_default();
            match w.step(busy, now, window, grace) {
                Verdict::Nothing => {}
                Verdict::Warn(idle_for) => {
                    out.warn.push((a.clone(), idle_for, m.gpu_source.clone()))
                }
                Verdict::Reclaim(idle_for) => out.reclaim.push((a.clone(), idle_for)),
            }
        }
        out
    }

    /// An `idle_warning` event per allocation (webhook subscriptions to
    /// `idle.warning`, the `webhooks.idle-url` one included, deliver it).
    fn warn_idle(&self, warn: &[(Allocation, u64, String)], now: u64) {
        for (a, idle_for, source) in warn {
            // The message and the webhook speak to the tenant: its own ids
            // (the keys are `tenant/id`; the tenant is its own field).
            let (task, allocation) = (
                caldera_spec::local_id(&a.task_id),
                caldera_spec::local_id(&a.allocation_id),
            );
            let msg = format!(
                "allocation {allocation} of task {task} idle for {}s (measured {} below {}%); reclaimed in {}s unless it gets busy",
                idle_for / 1000,
                source,
                self.idle.threshold_pct,
                self.idle.grace_ms / 1000
            );
            // `detail` is the body the direct idle POST sent before webhooks
            // existed: the `idle.warning` webhook carries it as `data.detail`.
            let detail = serde_json::json!({"event": "idle_warning", "tenant": a.tenant, "task": task,
                "allocation": allocation, "node": a.node, "idle_for_s": idle_for / 1000, "message": msg});
            self.gate.record(
                Event::new(now, EventKind::IdleWarning, msg)
                    .task(&a.task_id)
                    .tenant(&a.tenant)
                    .node(&a.node)
                    .detail(detail),
            );
        }
    }

    /// Tells each task whose allocation stayed idle past the grace.
    fn reclaim_idle(&self, reclaim: &[(Allocation, u64)]) {
        for (a, idle_for) in reclaim {
            if let Some(t) = self.registry.task(&a.task_id) {
                t.do_send(Reclaim {
                    allocation_id: a.allocation_id.clone(),
                    reason: format!(
                        "{} for {}s",
                        caldera_spec::webhook::RECLAIM_REASON,
                        idle_for / 1000
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::wire::AllocationUse;

    /// Window 60 s, grace 30 s. Each row is one inspection of one allocation,
    /// in order; the watch carries over from row to row.
    #[test]
    fn the_idle_watch_warns_once_then_reclaims_once() {
        let (window, grace) = (60_000, 30_000);
        let mut w = Watch::default();
        let rows: &[(u64, bool, Verdict, &str)] = &[
            (
                1_000,
                false,
                Verdict::Nothing,
                "idle since 1 s; 0 s idle < 60 s",
            ),
            (50_000, false, Verdict::Nothing, "49 s idle < 60 s"),
            (
                61_000,
                false,
                Verdict::Warn(60_000),
                "61 - 1 = 60 s >= 60 s: warn",
            ),
            (
                70_000,
                false,
                Verdict::Nothing,
                "9 s since the warning < 30 s grace",
            ),
            (
                91_000,
                false,
                Verdict::Reclaim(90_000),
                "91 - 61 = 30 s >= grace: reclaim (idle 90 s)",
            ),
            (200_000, false, Verdict::Nothing, "reclaimed once only"),
            (201_000, true, Verdict::Nothing, "busy: the watch resets"),
            (202_000, false, Verdict::Nothing, "idle again since 202 s"),
            (
                262_000,
                false,
                Verdict::Warn(60_000),
                "262 - 202 = 60 s: a new warning",
            ),
        ];
        for (now, busy, want, why) in rows {
            assert_eq!(w.step(*busy, *now, window, grace), *want, "at {now}: {why}");
        }
    }

    /// A clock that steps back must not underflow (a debug-build panic, a
    /// release-build wrap that reclaims at once).
    #[test]
    fn a_clock_stepping_back_reads_as_no_time_passed() {
        let mut w = Watch::default();
        assert_eq!(w.step(false, 100_000, 60_000, 30_000), Verdict::Nothing);
        // now 40 s is before idle_since 100 s: 0 s idle, nothing.
        assert_eq!(w.step(false, 40_000, 60_000, 30_000), Verdict::Nothing);
        assert_eq!(
            w.step(false, 160_000, 60_000, 30_000),
            Verdict::Warn(60_000)
        );
        // Before the warning stamp: no grace has passed.
        assert_eq!(w.step(false, 10_000, 60_000, 30_000), Verdict::Nothing);
    }

    /// 0.5 GPU at 40% utilisation measures 0.2 GPU; memory in GB from MiB.
    #[test]
    fn measured_use_scales_the_grant_by_utilisation() {
        let granted = Usage {
            gpus: 0.5,
            ..Default::default()
        };
        let m = AllocationUse {
            gpu_utilization_pct: 40.0,
            gpu_memory_used_mb: 2048,
            cpu_pct: 150.0,
            memory_mb: 512,
            ..Default::default()
        };
        let u = measured_use(&granted, &m);
        assert!((u.gpus - 0.2).abs() < 1e-9, "0.5 x 40% = 0.2: {}", u.gpus);
        assert_eq!((u.gpu_memory_gb, u.cpu_cores, u.memory_gb), (2.0, 1.5, 0.5));
        // Over 100% utilisation is capped at the grant: 0.5 x min(1, 1.3) = 0.5.
        let hot = AllocationUse {
            gpu_utilization_pct: 130.0,
            ..Default::default()
        };
        assert_eq!(measured_use(&granted, &hot).gpus, 0.5);
    }
}
