//! Messages a TaskActor answers (a service's TaskActor also answers the
//! replica ones), and [`TaskHandle`], what others hold of a task.
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::{Allocation, ModelRef, SwapAnswer, TaskRecord, TaskState};

/// The scheduler granted an allocation, decided in memory only: the task,
/// if it still waits, asks the Scheduler to record it (`RecordGrant`).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Placed {
    pub allocation: Allocation,
    /// What else explains the placement (`weights cached`), for its event.
    pub note: Option<&'static str>,
}

/// Why the task is still waiting (placement rejections or quota).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Pending {
    pub reason: String,
    pub estimated_start_ms: Option<u64>,
}

/// Something the node agent reported about this task's workload.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Workload {
    pub allocation_id: String,
    pub kind: WorkloadEventKind,
    /// The node that said it, and its data dir (from its hello): a checkpoint
    /// path is accepted only inside the task's checkpoint dir there.
    pub node: String,
    pub node_data_dir: String,
    /// Where the node is reached: its replicas' endpoint address.
    pub node_address: String,
}

/// Release resources (the data platform's "release"): stop the workload if it
/// runs, free everything, state Released; a queued task is cancelled.
#[derive(Message)]
#[rtype(result = "Result<TaskRecord>")]
pub struct Release {
    pub by: String,
}

/// The scheduler chose this task's allocation as a victim: SIGTERM (the
/// workload saves a checkpoint), a grace period, then SIGKILL; back to the queue.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Preempt {
    pub allocation_id: String,
    pub by: String,
    pub reason: String,
}

/// The idle inspector reclaims this task's allocation.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reclaim {
    pub allocation_id: String,
    pub reason: String,
}

/// This task's allocation was re-marked as borrowed (or back within the
/// guarantee), recorded already; `after` says what changed, e.g. "a quota
/// change".
#[derive(Message)]
#[rtype(result = "()")]
pub struct Remarked {
    pub allocation: Allocation,
    pub after: &'static str,
}

/// The task's node was declared lost. `fence_until_ms` (wall clock): when
/// the lease the control plane last renewed there, plus the stop grace, has
/// run out — a `fence` task is requeued only then.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeLost {
    pub node: String,
    pub fence_until_ms: u64,
}

/// The task's node is being drained: move the work away as a planned stop.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Drain {
    pub allocation_id: String,
    pub node: String,
    /// The whole cluster stops with the node: a replica is stopped and
    /// requeued like any task, not replaced elsewhere first.
    pub cluster_stopping: bool,
}

/// The node said hello again but no longer runs this task's workload.
#[derive(Message)]
#[rtype(result = "()")]
pub struct WorkloadMissing {
    pub node: String,
}

/// A copy of the record, for the API.
#[derive(Message)]
#[rtype(result = "TaskRecord")]
pub struct TaskSnapshot;

/// A replica's state changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReplicaState {
    pub replica: String,
    pub state: TaskState,
}

/// A replica runs on a drained node: its service answers whether it moves
/// it make-before-break (true: the replica keeps running until its
/// replacement runs) or the replica drains as a task (false).
#[derive(Message)]
#[rtype(result = "bool")]
pub struct ReplicaDrained {
    pub replica: String,
    pub node: String,
}

/// A replica is waiting for room: the Scheduler's reason, for its service
/// (a replacement that finds no room is what a drain's pending reason says).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ReplicaPending {
    pub replica: String,
    pub reason: String,
}

/// `PUT /v1/tasks/{id}/replicas`.
#[derive(Message)]
#[rtype(result = "Result<TaskRecord>")]
pub struct Scale {
    pub replicas: u32,
}

/// The idle inspector found a replica idle past its grace.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ScaleInIdle {
    pub replica: String,
    pub reason: String,
}

/// `POST /v1/tasks/{service}/model`, and a retirement moving a service off a
/// retiring version: swap the service's replicas to `to` in place, replica
/// by replica (same allocations, same GPUs), with rollback. Answered once the
/// swap is validated and recorded (`SwapAnswer::Started`), or with
/// `AlreadyServing` when the service serves `to` already; the swap itself
/// runs on. Refusals: not an inference service or ended (409 conflict), a
/// swap already running (409 swap_in_progress), 1 replica without
/// `allow_downtime` or room for `max_surge: 1` (409 swap_needs_replicas),
/// `to` unknown or invisible to the tenant (422 unknown_model), retiring or
/// retired (422 model_not_accepting).
#[derive(Message, Debug, Clone)]
#[rtype(result = "Result<SwapAnswer>")]
pub struct SwapModel {
    pub to: ModelRef,
    /// Who asked: the tenant, or `retire:<operator>`; recorded and in events.
    pub requested_by: String,
    /// A 1-replica service may be swapped with a gap in service.
    pub allow_downtime: bool,
    /// 0 or 1: a 1-replica service is swapped by starting one extra replica
    /// on `to` first (make-before-break), when free capacity holds it now.
    pub max_surge: u32,
}

/// A timer of a swap under way fired (a step's timeout, or a wait for
/// another replica to be ready): the service looks at its swap again.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct SwapTick;

/// A replica is about to be restarted in place on `model` (`name:version`)
/// by its service: it records that as its spec's model (a restart of it, a
/// lost node's requeue, starts the version it serves) and itself as not
/// ready, so its endpoint leaves the list before its process is stopped.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct RunsModel {
    pub model: String,
    /// The image its container runs on it (None: a process, or unchanged).
    pub image: Option<String>,
}

/// A replica's node refused or failed the Swap of `generation`: for its service.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReplicaSwapFailed {
    pub replica: String,
    pub generation: u32,
    pub reason: String,
}

handle! {
    /// A live task, as the directory, the Scheduler, its node and its service hold it.
    TaskHandle: TaskPort {
        tell {
            rebuild: Rebuild,
            placed: Placed,
            pending: Pending,
            workload: Workload,
            preempt: Preempt,
            reclaim: Reclaim,
            remarked: Remarked,
            node_lost: NodeLost,
            drain: Drain,
            workload_missing: WorkloadMissing,
            replica_state: ReplicaState,
            replica_pending: ReplicaPending,
            scale_in_idle: ScaleInIdle,
            swap_tick: SwapTick,
            runs_model: RunsModel,
            replica_swap_failed: ReplicaSwapFailed,
            // A service releases its replicas without waiting for the answer.
            release_unanswered: Release,
        }
        ask {
            observe: Observe,
            release: Release,
            scale: Scale,
            swap_model: SwapModel,
            replica_drained: ReplicaDrained,
            snapshot: TaskSnapshot,
        }
    }
}
