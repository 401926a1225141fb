//! What a task rebuilt from sled does about its workload's end. The exit
//! that reached it before may be the very input whose commit failed (the
//! rebuild is the failure's consequence), and its node session forwards an
//! exit to a task once; so a rebuilt task that still holds an allocation
//! asks its node for any exit it already has ([`ResendExit`]), and keeps
//! asking on every rebuild until the exit is recorded. A task rebuilt while
//! released, its stop not yet confirmed, waits for that stop again instead
//! of retiring with its room still granted (nothing else would free it
//! before the Scheduler's next reconciliation).
use super::TaskActor;
use crate::protocol::node::ResendExit;
use actix::prelude::*;
use caldera_spec::{TaskRecord, TaskState};
use std::time::Duration;

impl TaskActor {
    /// Whether the rebuilt record still waits on its workload: a live
    /// state holding an allocation, or released with its allocation still
    /// in the ledger (its stop was never confirmed: only a confirmed stop
    /// or the release's deadline frees it). A task that left on its own
    /// (its terminal step was carried out) never waits again.
    pub(crate) fn waits_on_workload(&self, r: &TaskRecord) -> bool {
        let Some(a) = &r.allocation else {
            return false;
        };
        if r.state == TaskState::Released {
            let granted = self.sh.gate.store().allocation(&a.allocation_id);
            return !self.left && matches!(granted, Ok(Some(_)));
        }
        r.state.holds_allocation()
    }

    /// Called from `started()` after a rebuild that left the task waiting
    /// on its workload (see the module doc). The exit is asked for one
    /// heartbeat later: a time limit already past reacts first (so an exit
    /// answering its stop fails the task for its limit), and a commit that
    /// keeps failing is retried once per heartbeat, not in a loop.
    pub(crate) fn after_rebuild(&mut self, ctx: &mut Context<Self>) {
        let Some(a) = self.rec.allocation.clone() else {
            return;
        };
        if self.rec.state == TaskState::Released {
            // Its stop went out with the release; the deadline past which
            // the room is freed anyway went with the rebuild: armed again.
            self.await_release(ctx);
        }
        let wait = Duration::from_millis(self.sh.config.nodes.heartbeat_interval_ms.max(50));
        ctx.run_later(wait, move |act, _| {
            if act.allocation_id().as_deref() != Some(a.allocation_id.as_str()) {
                return;
            }
            if let Some(n) = act.sh.registry.node(&a.node) {
                n.do_send(ResendExit {
                    allocation_id: a.allocation_id.clone(),
                    task_id: act.id().to_string(),
                });
            }
        });
    }
}
