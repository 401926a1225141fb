//! The pool-wide families of a scrape: the control plane's counts, the
//! start-estimate accuracy, the pool by dimension and the queue by priority.
use super::{by_resource, gauges};
use caldera_actors::control_plane::estimates::EstimateAccuracy;
use caldera_actors::control_plane::scrape::Scrape;
use caldera_actors::views::PoolMetrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Resource {
    resource: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Refusal {
    node: String,
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Window {
    window: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Priority {
    priority: String,
}

/// The priorities every queue series exists for, even when none waits.
const NAMED_PRIORITIES: [caldera_spec::Priority; 3] = [
    caldera_spec::Priority::HIGH,
    caldera_spec::Priority::MEDIUM,
    caldera_spec::Priority::LOW,
];

/// A gauge of one integer value.
fn count(r: &mut Registry, name: &str, help: &str, v: usize) {
    let g = Gauge::<i64>::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    r.register(name, help, g);
}

/// The control plane's counts, refused node reports and actor rebuilds.
pub fn counts(r: &mut Registry, s: &Scrape) {
    let st = &s.stats;
    count(
        r,
        "caldera_queued_tasks",
        "Tasks waiting for room",
        st.queued,
    );
    count(
        r,
        "caldera_allocations",
        "Live allocations in the ledger",
        st.allocations,
    );
    count(
        r,
        "caldera_healthy_nodes",
        "Nodes with a live agent session",
        st.healthy_nodes,
    );
    count(
        r,
        "caldera_live_tasks",
        "Tasks with a live TaskActor",
        st.live_tasks,
    );
    let refused = Family::<Refusal, Counter>::default();
    for (node, reason, n) in &s.refusals {
        refused
            .get_or_create(&Refusal {
                node: node.clone(),
                reason,
            })
            .inc_by(*n);
    }
    r.register(
        "caldera_node_reports_refused",
        "Hellos, events and reports of nodes that were refused (not their allocation, stale epoch, wrong secret)",
        refused,
    );
    let rebuilds = Family::<Kind, Counter>::default();
    for (kind, n) in &s.rebuilds {
        rebuilds.get_or_create(&Kind { kind }).inc_by(*n);
    }
    r.register(
        "caldera_actor_rebuilds",
        "Actors stopped (a failed commit, a lost answer) and rebuilt from storage by their supervisor",
        rebuilds,
    );
}

/// Start-estimate accuracy (`GET /v1/stats/estimates`).
pub fn estimates(r: &mut Registry, a: &EstimateAccuracy) {
    let measured = Gauge::<i64>::default();
    measured.set(i64::try_from(a.tasks).unwrap_or(i64::MAX));
    r.register(
        "caldera_start_estimates_measured",
        "Tasks placed after waiting with a start estimate",
        measured,
    );
    let within = gauges::<Window>(
        r,
        "caldera_start_estimates_within_ratio",
        "Share of them placed within the window of their first estimate",
        None,
    );
    within
        .get_or_create(&Window { window: "1m" })
        .set(a.within_1m);
    within
        .get_or_create(&Window { window: "10m" })
        .set(a.within_10m);
    let median = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    median.set(a.median_abs_error_s);
    r.register_with_unit(
        "caldera_start_estimate_median_abs_error",
        "Median of |placed - first estimate|",
        Unit::Seconds,
        median,
    );
}

/// The pool by dimension: capacity, allocated and measured use of the
/// healthy nodes (as `GET /v1/utilization` totals them).
pub fn pool(r: &mut Registry, p: &PoolMetrics) {
    let total = &p.utilization.total;
    for (name, help, pick) in [
        (
            "caldera_pool_capacity",
            "What the healthy nodes offer, by resource (gpus, cpu cores, bytes)",
            (|d| d.capacity) as fn(&caldera_actors::views::Dim) -> f64,
        ),
        (
            "caldera_pool_allocated",
            "What the ledger holds on the healthy nodes, by resource (a GPU by the fraction of its memory held)",
            |d| d.allocated,
        ),
        (
            "caldera_pool_used",
            "What the healthy nodes measure in use, by resource",
            |d| d.used,
        ),
    ] {
        let f = gauges::<Resource>(r, name, help, None);
        for (resource, v) in by_resource(total, pick) {
            f.get_or_create(&Resource { resource }).set(v);
        }
    }
    count(
        r,
        "caldera_pool_simulated",
        "1 when any GPU of the pool is simulated (its figures are not a real device's)",
        usize::from(p.utilization.simulated_gpus),
    );
}

/// The queue by priority: how many wait and how long the oldest has.
pub fn queue(r: &mut Registry, p: &PoolMetrics) {
    let depth = gauges::<Priority>(
        r,
        "caldera_queue_depth",
        "Tasks waiting for room, by priority",
        None,
    );
    let age = gauges::<Priority>(
        r,
        "caldera_queue_oldest_age",
        "How long the task waiting longest at each priority has waited (0: none waits)",
        Some(Unit::Seconds),
    );
    for p in NAMED_PRIORITIES {
        let l = Priority {
            priority: p.label(),
        };
        depth.get_or_create(&l).set(0.0);
        age.get_or_create(&l).set(0.0);
    }
    for q in &p.queue {
        let l = Priority {
            priority: q.priority.label(),
        };
        depth.get_or_create(&l).set(q.tasks as f64);
        let waited_ms = p.now_ms.saturating_sub(q.oldest_queued_ms);
        age.get_or_create(&l).set(waited_ms as f64 / 1000.0);
    }
}
