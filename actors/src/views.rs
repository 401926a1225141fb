//! Snapshots of the control plane: the API's views (declared in
//! `caldera_spec::views`, re-exported here) and how a node's is built from
//! its record, metrics and ledger totals; and what `/metrics` and the
//! portal read of the Scheduler.
pub use caldera_scheduling::queue::ledger::NodeAllocated;
use caldera_spec::node::GpuLive;
use caldera_spec::time::rfc3339;
pub use caldera_spec::views::{
    allocation_view, runtime_label, runtimes_or_process, Dim, Dims, GpuView, Keyed, NodeView,
    TaskView, TransitionView, Utilization,
};
use caldera_spec::{NodeMetrics, NodeRecord, NodeState};

/// A node's view: the stored record, live metrics and the ledger's
/// allocated totals joined.
pub fn node_view(
    rec: &NodeRecord,
    connected: bool,
    metrics: &NodeMetrics,
    alloc: &NodeAllocated,
) -> NodeView {
    let inv = &rec.inventory;
    let live = |i: u32| {
        metrics
            .gpus
            .iter()
            .find(|g| g.index == i)
            .cloned()
            .unwrap_or(GpuLive {
                index: i,
                ..Default::default()
            })
    };
    NodeView {
        name: rec.name.clone(),
        state: match rec.state {
            _ if rec.revoked => "revoked",
            NodeState::Ready => "ready",
            NodeState::Lost => "lost",
        }
        .into(),
        cordon: rec.cordon.as_ref().map(|c| c.label().into()),
        connected,
        epoch: rec.epoch,
        simulated: inv.any_simulated(),
        gpu_source: inv.gpu_source.clone(),
        isolation: inv.isolation.clone(),
        runtime: runtime_label(&inv.runtimes),
        runtimes: runtimes_or_process(&inv.runtimes),
        gpus: inv
            .gpus
            .iter()
            .map(|g| {
                let l = live(g.index);
                GpuView {
                    index: g.index,
                    uuid: g.uuid.clone(),
                    model: g.model.clone(),
                    memory_total_mb: g.memory_total_mb,
                    memory_free_mb: g
                        .memory_total_mb
                        .saturating_sub(alloc.gpu_memory_mb.get(&g.index).copied().unwrap_or(0)),
                    memory_used_mb: l.memory_used_mb,
                    utilization_pct: l.utilization_pct,
                    simulated: g.simulated,
                    faulted: l.faulted,
                }
            })
            .collect(),
        cpu_cores: inv.cpu_cores,
        cpu_free_milli: (inv.cpu_cores as u64 * 1000).saturating_sub(alloc.cpu_milli),
        cpu_used_pct: metrics.cpu_used_pct,
        memory_total_mb: inv.memory_total_mb,
        memory_free_mb: inv.memory_total_mb.saturating_sub(alloc.memory_mb),
        memory_used_mb: metrics.memory_used_mb,
        disk_offered_mb: inv.disk_offered_mb,
        disk_free_mb: inv.disk_offered_mb.saturating_sub(alloc.disk_mb),
        labels: inv.labels.clone(),
        last_seen: rfc3339(rec.last_seen_ms),
        allocations: alloc.count,
        cache: None,
        images: None,
    }
}

/// The pool as `/metrics` shows it, read in one Scheduler turn so the
/// figures agree with each other.
#[derive(Debug, Clone, Default)]
pub struct PoolMetrics {
    pub utilization: Utilization,
    /// Per tenant, what its borrowed (preemptible) allocations hold: the
    /// `allocated` figure of each dimension.
    pub borrowed: Vec<Keyed<Dims>>,
    /// Per tenant, what its allocations the idle inspector's rule finds idle
    /// (measured below `scheduling.idle-threshold-pct`) hold: the `allocated` figures.
    pub idle: Vec<Keyed<Dims>>,
    /// Waiting tasks by priority, highest first.
    pub queue: Vec<caldera_scheduling::queue::core::QueueDepth>,
    /// The Scheduler's clock when read (Unix ms): queue ages count to it.
    pub now_ms: u64,
}

/// One point of an allocation's use trail: what it was granted and what
/// its node measured, in GPUs where it holds any, else CPU cores (the
/// dimension its idle rule judges). Compact: the Scheduler keeps a few
/// dozen per live allocation.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct UsePoint {
    pub at_ms: u64,
    pub allocated: f32,
    pub used: f32,
}

impl UsePoint {
    pub fn of(at_ms: u64, allocated: &caldera_spec::Usage, used: &caldera_spec::Usage) -> UsePoint {
        let on_gpus = allocated.gpus > 0.0;
        let pick = |u: &caldera_spec::Usage| if on_gpus { u.gpus } else { u.cpu_cores } as f32;
        UsePoint {
            at_ms,
            allocated: pick(allocated),
            used: pick(used),
        }
    }
}

/// Counters for /metrics and tests.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SchedulerStats {
    pub queued: usize,
    pub allocations: usize,
    pub healthy_nodes: usize,
}

#[cfg(test)]
mod use_point_tests {
    use super::UsePoint;
    use caldera_spec::Usage;

    #[test]
    fn a_use_point_is_in_gpus_where_the_allocation_holds_any_else_cpu_cores() {
        let granted = Usage {
            gpus: 2.0,
            cpu_cores: 8.0,
            ..Usage::default()
        };
        let used = Usage {
            gpus: 0.5,
            cpu_cores: 3.0,
            ..Usage::default()
        };
        let p = UsePoint::of(7, &granted, &used);
        assert_eq!((p.at_ms, p.allocated, p.used), (7, 2.0, 0.5));
        let cpu_only = Usage {
            cpu_cores: 4.0,
            ..Usage::default()
        };
        let busy = Usage {
            cpu_cores: 1.5,
            ..Usage::default()
        };
        let p = UsePoint::of(9, &cpu_only, &busy);
        assert_eq!((p.allocated, p.used), (4.0, 1.5));
    }
}
