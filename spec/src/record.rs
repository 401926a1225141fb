//! Records the control plane keeps: tasks, their states and allocations.
use crate::task::TaskSpec;
use serde::{Deserialize, Serialize};

/// The task lifecycle of DESIGN.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Queued,
    Scheduled,
    Preparing,
    Warming,
    Ready,
    Running,
    Finished,
    Failed,
    Preempted,
    Cancelled,
    Released,
}

impl TaskState {
    /// No further transition happens from a terminal state.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Finished | TaskState::Failed | TaskState::Cancelled | TaskState::Released
        )
    }

    /// States in which the task holds an allocation.
    pub fn holds_allocation(self) -> bool {
        matches!(
            self,
            TaskState::Scheduled
                | TaskState::Preparing
                | TaskState::Warming
                | TaskState::Ready
                | TaskState::Running
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Scheduled => "scheduled",
            TaskState::Preparing => "preparing",
            TaskState::Warming => "warming",
            TaskState::Ready => "ready",
            TaskState::Running => "running",
            TaskState::Finished => "finished",
            TaskState::Failed => "failed",
            TaskState::Preempted => "preempted",
            TaskState::Cancelled => "cancelled",
            TaskState::Released => "released",
        }
    }

    pub fn parse(s: &str) -> Option<TaskState> {
        serde_json::from_value(serde_json::Value::String(s.to_ascii_lowercase())).ok()
    }
}

/// One entry of a task's state history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub state: TaskState,
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A slice of one GPU granted to an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuGrant {
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_mb: u64,
    pub simulated: bool,
}

/// What the scheduler granted a task on one node. The ledger of these is
/// written by the Scheduler alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Allocation {
    pub allocation_id: String,
    pub task_id: String,
    pub tenant: String,
    pub node: String,
    pub gpus: Vec<GpuGrant>,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
    pub exclusive: bool,
    /// The node's lease epoch when this allocation was dispatched.
    pub epoch: u64,
    pub created_ms: u64,
    /// Granted on idle capacity beyond the tenant's guarantee: preempted first
    /// when a tenant within its guarantee needs the room.
    #[serde(default)]
    pub borrowed: bool,
    /// The task's priority, kept here so victims can be chosen from the ledger alone.
    #[serde(default)]
    pub priority: u16,
    /// The digest of the image its container runs (`sha256:...`), as the
    /// node reported it when the workload started: the image a moving tag
    /// named at that moment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
}

/// A task and everything known about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub spec: TaskSpec,
    pub tenant: String,
    pub state: TaskState,
    pub history: Vec<Transition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// Why the task is not placed yet ("3 nodes: 2 no single GPU with 20 GB free, ...").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the task failed or was stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The failure's number in `caldera_spec::codes`, where it has one (a
    /// start that failed with a stable code: the image not found, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<u32>,
    /// The latest pull progress of its image while Preparing (the current
    /// attempt's; kept after, saying what the pull came to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<crate::container::PullProgress>,
    /// Times it was started (1 on a first run; each requeue adds one).
    pub attempts: u32,
    /// Requeues caused by lost nodes.
    pub node_losses: u32,
    pub created_ms: u64,
    /// Submission order, for FIFO within a priority.
    pub seq: u64,
    /// Latest checkpoint reported by the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// When the latest checkpoint was reported (work since then is lost on preemption).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_ms: Option<u64>,
    /// While queued: when the task is expected to start (Slurm `squeue --start`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start_ms: Option<u64>,
    /// The first start estimate it was given (before its first placement):
    /// what start-estimate accuracy is measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_estimate_ms: Option<u64>,
    /// At its first placement: when it was placed minus `first_estimate_ms`
    /// (negative: earlier than estimated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_error_ms: Option<i64>,
    /// An inference replica: the service task it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// An inference service: how many replicas it should run now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<u32>,
    /// Times this task was preempted.
    #[serde(default)]
    pub preemptions: u32,
    /// Its node was lost and it is fenced (`on_node_loss: fence`): it is
    /// requeued at this wall-clock time, once the node's lease plus the stop
    /// grace has run out. Persisted so a control plane restarted meanwhile
    /// does not requeue it early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fenced_until_ms: Option<u64>,
    /// An inference service: which replica serves each slot, and the moves
    /// off drained nodes under way (make-before-break).
    #[serde(default, skip_serializing_if = "crate::ReplicaSlots::is_empty")]
    pub replica_slots: crate::ReplicaSlots,
    /// An inference service: its latest hot swap (under way, or how the
    /// last one ended), written before each of its steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<crate::SwapProgress>,
    /// Where the running process of this allocation is reached (an inference
    /// replica: the node's address and the port the agent gave it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
    /// The running process passed its readiness probe (or has none and
    /// started): only ready replicas are listed as a service's endpoints.
    #[serde(default)]
    pub ready: bool,
    /// Generation of the process now running: 0 for the first start, a
    /// swap's generation once the node reports it swapped.
    #[serde(default)]
    pub generation: u32,
    /// The `name:version` the running process serves; starts as `spec.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_model: Option<String>,
}

/// Where a replica's process is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Endpoint {
    /// The host the node is reached at (its advertised host, else the
    /// address the control plane saw it connect from).
    pub address: String,
    pub port: u16,
}

impl TaskRecord {
    /// A freshly submitted task.
    pub fn new(spec: TaskSpec, tenant: String, now_ms: u64, seq: u64) -> Self {
        let spec_model = spec.model.clone();
        TaskRecord {
            spec,
            tenant,
            state: TaskState::Queued,
            history: vec![Transition {
                state: TaskState::Queued,
                at_ms: now_ms,
                reason: None,
            }],
            allocation: None,
            pending_reason: None,
            exit_code: None,
            failure: None,
            failure_code: None,
            pull: None,
            attempts: 0,
            node_losses: 0,
            created_ms: now_ms,
            seq,
            checkpoint: None,
            checkpoint_ms: None,
            estimated_start_ms: None,
            first_estimate_ms: None,
            estimate_error_ms: None,
            service: None,
            desired_replicas: None,
            preemptions: 0,
            fenced_until_ms: None,
            replica_slots: Default::default(),
            swap: None,
            endpoint: None,
            ready: false,
            generation: 0,
            serving_model: spec_model,
        }
    }

    /// Moves to `state`, appending to the history.
    pub fn transition(&mut self, state: TaskState, at_ms: u64, reason: Option<String>) {
        self.state = state;
        self.history.push(Transition {
            state,
            at_ms,
            reason,
        });
    }

    /// When the task entered its current state.
    pub fn since_ms(&self) -> u64 {
        self.history.last().map_or(self.created_ms, |t| t.at_ms)
    }
}
