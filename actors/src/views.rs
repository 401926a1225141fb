//! What the API shows: read-only snapshots of tasks, nodes and the pool.
pub use caldera_scheduling::queue::ledger::NodeAllocated;
use caldera_spec::node::GpuLive;
use caldera_spec::time::rfc3339;
use caldera_spec::{Allocation, NodeMetrics, NodeRecord, NodeState, TaskRecord, TaskSpec};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransitionView {
    pub state: &'static str,
    pub at: String,
    pub at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskView {
    pub task_id: String,
    pub tenant: String,
    pub task_type: &'static str,
    pub priority: String,
    /// What runs it: `container` (the image) or `process` (on the host).
    pub runtime: &'static str,
    /// The image it names, if any (with `runtime: process`, only recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub state: &'static str,
    pub history: Vec<TransitionView>,
    pub allocation: Option<Allocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The failure's number in the error code table, where it has one (a
    /// start that failed: 10220 `image_not_found`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<u32>,
    /// Its image's pull: layers and bytes done (while Preparing, and what
    /// the pull came to after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull: Option<caldera_spec::container::PullProgress>,
    pub attempts: u32,
    /// Retries spent by failures (lost nodes), out of `max_retries`;
    /// planned stops (drain, preemption, shutdown) never count.
    pub retries_used: u32,
    /// Its node was lost and it waits for the node's lease to run out
    /// (`on_node_loss: fence`) until this time (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// While queued: the expected start (RFC 3339), from declared durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start_ms: Option<u64>,
    /// While queued: its place in line (1 = considered first), as the
    /// scheduler orders the queue now. Filled by the listing and task views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u32>,
    pub preemptions: u32,
    /// A replica: its service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// A service: the replicas it should run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Where its running process is reached (the node's address and the
    /// port its agent gave it, CALDERA_PORT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<caldera_spec::Endpoint>,
    /// Its running process passed its readiness probe (or has none and
    /// started): it is listed in its service's endpoints.
    pub ready: bool,
    /// Generation of the process now running (0: the first start; a swap's after one).
    pub generation: u32,
    /// The `name:version` its running process serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_model: Option<String>,
    pub created_at: String,
    /// A service: its latest hot swap (under way, or how it ended), step
    /// by step per replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<caldera_spec::SwapProgress>,
    pub spec: TaskSpec,
    /// What the submission succeeded despite, e.g. a deprecated model
    /// version (only in the answer to `POST /v1/tasks`; absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An allocation as the API shows it: its `task_id` and `allocation_id` in
/// the tenant's own terms (`train.2`, not `alpha/train.2`); its `tenant` field
/// says whose. The workload sees the same id (`CALDERA_ALLOCATION_ID`).
pub fn allocation_view(a: &Allocation) -> Allocation {
    let mut a = a.clone();
    a.task_id = caldera_spec::local_id(&a.task_id).to_string();
    a.allocation_id = caldera_spec::local_id(&a.allocation_id).to_string();
    a
}

/// A view shows the tenant's own ids: the record is keyed `tenant/id`
/// (`caldera_spec::task_key`), and the tenant is its own field.
impl From<&TaskRecord> for TaskView {
    fn from(r: &TaskRecord) -> Self {
        let local = |k: &str| caldera_spec::local_id(k).to_string();
        let mut spec = r.spec.clone();
        spec.task_id = local(&spec.task_id);
        TaskView {
            task_id: local(&r.spec.task_id),
            tenant: r.tenant.clone(),
            task_type: r.spec.task_type.as_str(),
            priority: r.spec.priority.label(),
            runtime: r.spec.runtime_kind().as_str(),
            image: r.spec.image.clone(),
            state: r.state.as_str(),
            history: r
                .history
                .iter()
                .map(|t| TransitionView {
                    state: t.state.as_str(),
                    at: rfc3339(t.at_ms),
                    at_ms: t.at_ms,
                    reason: t.reason.clone(),
                })
                .collect(),
            allocation: r.allocation.as_ref().map(allocation_view),
            pending_reason: r.pending_reason.clone(),
            exit_code: r.exit_code,
            failure: r.failure.clone(),
            failure_code: r.failure_code,
            pull: r.pull.clone(),
            attempts: r.attempts,
            retries_used: r.node_losses,
            fenced_until: r.fenced_until_ms.map(rfc3339),
            checkpoint: r.checkpoint.clone(),
            estimated_start: r.estimated_start_ms.map(rfc3339),
            estimated_start_ms: r.estimated_start_ms,
            queue_position: None,
            preemptions: r.preemptions,
            service: r.service.as_deref().map(local),
            replicas: if r.spec.task_type == caldera_spec::TaskType::Inference
                && r.service.is_none()
            {
                Some(r.desired_replicas.or(r.spec.replicas).unwrap_or(1))
            } else {
                None
            },
            endpoint: r.endpoint.clone(),
            ready: r.ready,
            generation: r.generation,
            serving_model: r.serving_model.clone(),
            created_at: rfc3339(r.created_ms),
            swap: r.swap.clone(),
            spec,
            warnings: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuView {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_total_mb: u64,
    /// Not allocated to any task.
    pub memory_free_mb: u64,
    /// Measured by the agent (NVML, or the simulation).
    pub memory_used_mb: u64,
    pub utilization_pct: u32,
    pub simulated: bool,
    /// The agent's last heartbeat said this GPU did not answer its probe.
    pub faulted: bool,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeView {
    pub name: String,
    pub state: &'static str,
    /// "cordoned", "drained" or "drained (agent stopping)": no new
    /// placements there; null when it takes work.
    pub cordon: Option<&'static str>,
    pub connected: bool,
    pub epoch: u64,
    pub simulated: bool,
    pub gpu_source: String,
    pub isolation: String,
    /// What runs workloads there: `podman 4.3.1` where its container
    /// runtime is up, else `process` (host processes only).
    pub runtime: String,
    /// Each runtime the node reported, up or not, with what is missing
    /// where one is down (an agent that reports none runs processes).
    pub runtimes: Vec<caldera_spec::container::RuntimeInfo>,
    pub gpus: Vec<GpuView>,
    pub cpu_cores: u32,
    pub cpu_free_milli: u64,
    pub cpu_used_pct: f32,
    pub memory_total_mb: u64,
    pub memory_free_mb: u64,
    pub memory_used_mb: u64,
    pub disk_offered_mb: u64,
    pub disk_free_mb: u64,
    pub labels: BTreeMap<String, String>,
    pub last_seen: String,
    pub allocations: usize,
    /// The node's weight cache as last reported (`GET /v1/nodes/{name}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<caldera_spec::weights::CacheReport>,
    /// The images the node holds as last reported (the operator's views
    /// only: an image's name can tell one tenant's work to another).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<caldera_spec::images::ImageReport>,
}

/// `podman 4.3.1` for an up container runtime, else `process`.
pub fn runtime_label(runtimes: &[caldera_spec::container::RuntimeInfo]) -> String {
    use caldera_spec::container::RuntimeKind;
    match runtimes
        .iter()
        .find(|r| r.kind == RuntimeKind::Container && r.up)
    {
        Some(r) if r.version.is_empty() => r.engine.clone(),
        Some(r) => format!("{} {}", r.engine, r.version),
        None => RuntimeKind::Process.as_str().into(),
    }
}

/// The node's runtimes; an agent that reports none (older ones) runs
/// host processes only.
pub fn runtimes_or_process(
    runtimes: &[caldera_spec::container::RuntimeInfo],
) -> Vec<caldera_spec::container::RuntimeInfo> {
    use caldera_spec::container::{RuntimeInfo, RuntimeKind};
    if runtimes.is_empty() {
        return vec![RuntimeInfo {
            kind: RuntimeKind::Process,
            engine: "caldera-shim".into(),
            version: String::new(),
            up: true,
            detail: String::new(),
        }];
    }
    runtimes.to_vec()
}

impl NodeView {
    /// Joins the stored record, live metrics and the ledger's allocated totals.
    pub fn build(
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
            },
            cordon: rec.cordon.as_ref().map(|c| c.label()),
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
                        memory_free_mb: g.memory_total_mb.saturating_sub(
                            alloc.gpu_memory_mb.get(&g.index).copied().unwrap_or(0),
                        ),
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
}

/// Capacity, allocation and measured use of one dimension.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dim {
    pub capacity: f64,
    pub allocated: f64,
    pub used: f64,
}

/// The five dimensions of the pool.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dims {
    pub gpus: Dim,
    pub gpu_memory_mb: Dim,
    pub cpu_cores: Dim,
    pub memory_mb: Dim,
    pub disk_mb: Dim,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Keyed<T: Serialize> {
    pub key: String,
    #[serde(flatten)]
    pub dims: T,
}

#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Utilization {
    pub total: Dims,
    pub by_node: Vec<Keyed<Dims>>,
    pub by_tenant: Vec<Keyed<Dims>>,
    pub by_gpu_model: Vec<Keyed<Dims>>,
    /// True when any GPU in the pool is simulated.
    pub simulated_gpus: bool,
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
    /// (measured below `idle-threshold-pct`) hold: the `allocated` figures.
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

/// One point of a tenant's usage report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UsageSample {
    pub at_ms: u64,
    pub allocated: caldera_spec::Usage,
    pub used: caldera_spec::Usage,
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
