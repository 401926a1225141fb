//! Messages a ServiceActor answers — from its replicas' TaskActors, the
//! gateway (scale, swap, release), the idle inspector (through a replica)
//! and a retiring model version — and [`ServiceHandle`], what others hold
//! of a service. A service talks to its replicas only through these and
//! the task messages (`task.rs`): it never reaches into a replica's actor.
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use super::task::{Release, TaskSnapshot};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::{ModelRef, SwapAnswer, TaskRecord, TaskState};

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

/// A replica's node refused or failed the Swap of `generation`: for its service.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReplicaSwapFailed {
    pub replica: String,
    pub generation: u32,
    pub reason: String,
}

handle! {
    /// A live inference service (a service parent, not a replica), as the
    /// directory, its replicas, the gateway and a retiring version hold it.
    ServiceHandle: ServicePort {
        tell {
            rebuild: Rebuild,
            replica_state: ReplicaState,
            replica_pending: ReplicaPending,
            scale_in_idle: ScaleInIdle,
            replica_swap_failed: ReplicaSwapFailed,
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
