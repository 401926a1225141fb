//! The control plane's event measures for `/metrics`: how long commits,
//! flushes and scheduling passes take, how long tasks wait to run, what the
//! passes decide, preemptions and node losses. One [`Metrics`] is made at
//! boot and handed to every actor that records (through [`crate::shared::Shared`],
//! the flush gate and the Scheduler); its handles are `Arc`s, so a clone is
//! cheap and every clone counts into the same series. No globals: a test
//! that boots two control planes in one process gets two sets.
//!
//! What is a state rather than an event (the pool, nodes, tenants, the
//! queue) is not kept here: the gateway reads it afresh on every scrape.
//!
//! Recording is cheap: a histogram observation is one short lock inside
//! prometheus-client, a counter one atomic add; label sets are `&'static str`
//! (no allocation per observation), except a node's name, counted once per
//! node loss.
use crate::commit_site::CommitSite;
use caldera_scheduling::queue::outcomes::Outcomes;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::time::Duration;

/// Storage commits (a sled batch applied): tens of µs to a few ms.
pub const COMMIT_BUCKETS: [f64; 13] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// Flushes (sled's flush, then fdatasync): sub-ms on tmpfs to seconds on a
/// busy disk.
pub const FLUSH_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
/// Scheduling passes: µs for a few waiting tasks, up to seconds for a
/// long queue on a large pool.
pub const CYCLE_BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 1.0, 5.0,
];
/// Submission to running: seconds on an idle pool, hours behind a queue.
pub const WAIT_BUCKETS: [f64; 16] = [
    0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
    28800.0, 86400.0,
];

/// A commit path ([`CommitSite::as_str`]).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SiteLabel {
    pub site: &'static str,
}

/// `training` or `inference`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskTypeLabel {
    pub task_type: &'static str,
}

/// What a pass decided for one task: `placed`, `rejected`, `preempting`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: &'static str,
}

/// Why a task was turned down (`caldera_scheduling::queue::outcomes`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: &'static str,
}

/// A node by name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabel {
    pub node: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The handles every recording actor shares (see the module doc).
#[derive(Debug, Clone)]
pub struct Metrics {
    commit: Histograms<SiteLabel>,
    flush: Histogram,
    cycle: Histogram,
    submit_to_running: Histograms<TaskTypeLabel>,
    decisions: Family<OutcomeLabel, Counter>,
    rejections: Family<ReasonLabel, Counter>,
    preemptions: Counter,
    node_losses: Family<NodeLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            commit: Family::new_with_constructor(|| Histogram::new(COMMIT_BUCKETS)),
            flush: Histogram::new(FLUSH_BUCKETS),
            cycle: Histogram::new(CYCLE_BUCKETS),
            submit_to_running: Family::new_with_constructor(|| Histogram::new(WAIT_BUCKETS)),
            decisions: Family::default(),
            rejections: Family::default(),
            preemptions: Counter::default(),
            node_losses: Family::default(),
        };
        // Every bounded series exists from the start, at zero: a dashboard
        // shows "none yet" rather than "no data", and `rate()` sees the
        // first increment.
        for outcome in ["placed", "rejected", "preempting"] {
            let _ = m.decisions.get_or_create(&OutcomeLabel { outcome });
        }
        for reason in Outcomes::reasons() {
            let _ = m.rejections.get_or_create(&ReasonLabel { reason });
        }
        for task_type in ["training", "inference"] {
            let _ = m
                .submit_to_running
                .get_or_create(&TaskTypeLabel { task_type });
        }
        m
    }
}

impl Metrics {
    /// One batch applied at `site`.
    pub fn commit_took(&self, site: CommitSite, took: Duration) {
        self.commit
            .get_or_create(&SiteLabel {
                site: site.as_str(),
            })
            .observe(took.as_secs_f64());
    }

    /// One group flush (sled's flush and the fdatasync) made durable.
    pub fn flush_took(&self, took: Duration) {
        self.flush.observe(took.as_secs_f64());
    }

    /// One scheduling pass and the carrying out of its decisions.
    pub fn cycle_took(&self, took: Duration) {
        self.cycle.observe(took.as_secs_f64());
    }

    /// A task runs for the first time, `waited` after its submission.
    pub fn first_run(&self, task_type: caldera_spec::TaskType, waited: Duration) {
        self.submit_to_running
            .get_or_create(&TaskTypeLabel {
                task_type: task_type.as_str(),
            })
            .observe(waited.as_secs_f64());
    }

    /// What one pass decided.
    pub fn pass_decided(&self, o: &Outcomes) {
        let add = |outcome, n| {
            if n > 0 {
                self.decisions
                    .get_or_create(&OutcomeLabel { outcome })
                    .inc_by(n);
            }
        };
        add("placed", o.placed);
        add("preempting", o.preempting);
        add("rejected", o.rejected_total());
        for (reason, n) in o.rejections() {
            self.rejections
                .get_or_create(&ReasonLabel { reason })
                .inc_by(n);
        }
    }

    /// A running allocation told to stop for a task that outranks it.
    pub fn preempted(&self) {
        self.preemptions.inc();
    }

    /// A node is known (its series starts at zero losses).
    pub fn node_known(&self, node: &str) {
        let _ = self.node_losses.get_or_create(&NodeLabel {
            node: node.to_string(),
        });
    }

    /// A node was declared lost.
    pub fn node_lost(&self, node: &str) {
        self.node_losses
            .get_or_create(&NodeLabel {
                node: node.to_string(),
            })
            .inc();
    }

    /// Registers every family under its exposition name.
    pub fn register(&self, r: &mut Registry) {
        r.register_with_unit(
            "caldera_storage_commit",
            "Time to apply one atomic batch to sled, by commit path",
            Unit::Seconds,
            self.commit.clone(),
        );
        r.register_with_unit(
            "caldera_storage_flush",
            "Time of one group flush: sled's flush and the fdatasync that make every batch committed before it durable",
            Unit::Seconds,
            self.flush.clone(),
        );
        r.register_with_unit(
            "caldera_scheduling_cycle",
            "Time of one scheduling pass over the queue, its decisions carried out",
            Unit::Seconds,
            self.cycle.clone(),
        );
        r.register_with_unit(
            "caldera_task_submit_to_running",
            "Time from a task's submission to its first start",
            Unit::Seconds,
            self.submit_to_running.clone(),
        );
        r.register(
            "caldera_placement_decisions",
            "Tasks a scheduling pass considered: placed, rejected (no room or over quota) or preempting",
            self.decisions.clone(),
        );
        r.register(
            "caldera_placement_rejections",
            "Tasks a scheduling pass turned down, by reason (admission, or the filter that turned down most nodes)",
            self.rejections.clone(),
        );
        r.register(
            "caldera_preemptions",
            "Running allocations told to checkpoint and stop for a task that outranks them",
            self.preemptions.clone(),
        );
        r.register(
            "caldera_node_losses",
            "Nodes declared lost (silent past nodes.timeout-ms)",
            self.node_losses.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_scheduling::queue::outcomes::OVER_QUOTA;

    fn text(m: &Metrics) -> String {
        let mut r = Registry::default();
        m.register(&mut r);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        out
    }

    #[test]
    fn clones_count_into_the_same_series() {
        let m = Metrics::default();
        let c = m.clone();
        c.preempted();
        m.preempted();
        c.node_lost("n1");
        let mut o = Outcomes::default();
        o.placed = 2;
        o.rejected(OVER_QUOTA);
        m.pass_decided(&o);
        c.commit_took(CommitSite::Grant, Duration::from_micros(300));
        let t = text(&m);
        assert!(t.contains("caldera_preemptions_total 2\n"), "{t}");
        assert!(
            t.contains("caldera_node_losses_total{node=\"n1\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("caldera_placement_decisions_total{outcome=\"placed\"} 2\n"),
            "{t}"
        );
        assert!(
            t.contains("caldera_placement_decisions_total{outcome=\"rejected\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("caldera_placement_rejections_total{reason=\"over_quota\"} 1\n"),
            "{t}"
        );
        // 300 µs: above the 250 µs bucket, within 500 µs.
        assert!(
            t.contains("caldera_storage_commit_seconds_bucket{le=\"0.00025\",site=\"grant\"} 0\n")
                && t.contains(
                    "caldera_storage_commit_seconds_bucket{le=\"0.0005\",site=\"grant\"} 1\n"
                ),
            "{t}"
        );
    }

    #[test]
    fn bounded_series_exist_before_anything_happened() {
        let t = text(&Metrics::default());
        assert!(t.contains("caldera_placement_rejections_total{reason=\"gpu_room\"} 0\n"));
        assert!(t.contains("caldera_preemptions_total 0\n"));
        assert!(
            t.contains("caldera_task_submit_to_running_seconds_count{task_type=\"inference\"} 0\n")
        );
    }
}
