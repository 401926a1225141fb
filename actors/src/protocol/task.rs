//! Messages a TaskActor answers, and [`TaskHandle`], what others hold of a
//! task. A replica is a task; what its service answers is in `service.rs`.
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::wire::WorkloadEventKind;
use caldera_spec::{Allocation, TaskRecord};

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

handle! {
    /// A live task (a replica is one), as the directory, the Scheduler, its
    /// node and its service hold it.
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
            runs_model: RunsModel,
            // A service releases its replicas without waiting for the answer.
            release_unanswered: Release,
        }
        ask {
            observe: Observe,
            release: Release,
            snapshot: TaskSnapshot,
        }
    }
}
