//! ServiceActor: one per live inference service (a service parent, not a
//! replica). A service owns no allocation itself: it keeps `replicas`
//! slots, each served by a replica task (`<id>.r0`, `<id>.r1`, ... by
//! default) with its own TaskActor and allocation, and is Running while at
//! least one replica runs. It owns what is the service's — its record, the
//! replica count, scaling (`replicas.rs`), the moves off drained nodes
//! (`moves.rs`) and hot swaps (`swap*.rs`) — and talks to its replicas
//! only by messages: they report their state ([`ReplicaState`] and the other
//! messages of `protocol/service.rs`), it releases them or tells them what
//! model they run (`protocol/task.rs`). Like every entity actor it is
//! supervised and reads its record back from sled when rebuilt.
//!
//! [`ReplicaState`]: crate::protocol::service::ReplicaState
use crate::durability::Ticket;
use crate::errors::Result;
use crate::protocol::lifecycle::Observe;
use crate::protocol::task::{Release, TaskSnapshot};
use crate::protocol::ServiceHandle;
use crate::shared::Shared;
use crate::supervision::{reread, Reread, Supervision};
use actix::prelude::*;
use caldera_spec::{EventKind, SwapPhase, TaskRecord, TaskState, TaskType};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod moves;
mod record;
mod replicas;
mod swap;
mod swap_drive;
mod swap_image;
mod swap_surge;
#[cfg(test)]
mod tests;

pub use replicas::parse_replicas;

/// Whether `rec` is an inference service's own record (its ServiceActor's),
/// not a replica's or another task's (each a TaskActor's).
pub fn is_service(rec: &TaskRecord) -> bool {
    rec.spec.task_type == TaskType::Inference && rec.service.is_none()
}

pub struct ServiceActor {
    pub(crate) rec: TaskRecord,
    pub(crate) sh: Arc<Shared>,
    /// The submission's ticket: replicas are created once it is durable.
    boot: Option<Ticket>,
    /// The last known state of each replica.
    pub(crate) replicas: BTreeMap<String, TaskState>,
    /// Replicas replaced since one last ran (backoff).
    pub(crate) replica_restarts: u32,
    /// Moves whose waiting for room was announced.
    pub(crate) moves_noted: BTreeSet<u32>,
    pub(crate) sup: Supervision<ServiceActor>,
    /// Rebuilt after its record became terminal (or vanished): it only waits
    /// for the last handles to drop.
    retired: bool,
    /// Its swap's memory-only bookkeeping.
    pub(crate) swap_live: swap_drive::SwapLive,
}

impl ServiceActor {
    pub fn new(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> Self {
        ServiceActor {
            rec,
            sh,
            boot,
            replicas: Default::default(),
            replica_restarts: 0,
            moves_noted: Default::default(),
            sup: Supervision::default(),
            retired: false,
            swap_live: Default::default(),
        }
    }

    /// Starts a service actor under supervision and returns its handle.
    pub fn spawn(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> ServiceHandle {
        ServiceHandle::new(actix::Supervisor::start(move |_| {
            ServiceActor::new(rec, sh, boot)
        }))
    }

    pub(crate) fn id(&self) -> &str {
        &self.rec.spec.task_id
    }

    /// Once the submission is durable: creates the replicas it lacks,
    /// resumes the moves and the swap its record holds.
    fn start_service(&mut self, ctx: &mut Context<Self>, boot: Option<Ticket>) {
        if self.rec.state.is_terminal() {
            return;
        }
        let gate = self.sh.gate.clone();
        ctx.wait(
            async move {
                if let Some(t) = boot {
                    gate.durable(t).await;
                }
            }
            .into_actor(self)
            .map(|_, act, ctx| {
                act.ensure_replicas();
                act.resume_moves(ctx);
                act.settle();
                // Rebuilt mid-swap: carry on from the recorded step.
                act.drive_swap(ctx);
            }),
        );
    }

    fn release(
        &mut self,
        ctx: &mut Context<Self>,
        by: String,
    ) -> ResponseFuture<Result<TaskRecord>> {
        // Recorded first: a release that could not be recorded releases no
        // replica (503, retry).
        let t = if self.rec.state.is_terminal() {
            None
        } else {
            let now = self.sh.now_ms();
            let reason = Some(format!("released by {by}"));
            match self.transition_with(TaskState::Released, reason, |planned| {
                cancel_swap(planned, &by, now)
            }) {
                Ok(t) => Some(t),
                Err(e) => return Box::pin(async move { Err(e) }),
            }
        };
        for id in self.replicas.keys() {
            if let Some(r) = self.sh.registry.task(id) {
                r.do_send(Release {
                    by: format!("service {} released", caldera_spec::local_id(self.id())),
                });
            }
        }
        self.tell_versions_released();
        self.sh.registry.remove_service(self.id());
        ctx.stop();
        let rec = self.rec.clone();
        let gate = self.sh.gate.clone();
        Box::pin(async move {
            if let Some(t) = t {
                gate.durable(t).await;
            }
            Ok(rec)
        })
    }

    /// Tells the versions the service named and served that its replicas
    /// left them (a retiring one then looks at its users again at once).
    fn tell_versions_released(&self) {
        let named = [self.rec.spec.model.clone(), self.rec.serving_model.clone()];
        let versions: BTreeSet<String> = named
            .iter()
            .flatten()
            .filter_map(|m| caldera_spec::ModelRef::parse(m, "model").ok())
            .map(|r| r.to_string())
            .collect();
        let tasks: Vec<String> = self.replicas.keys().cloned().collect();
        let why = format!("service {} released", caldera_spec::local_id(self.id()));
        for key in versions {
            self.tell_tasks_left(&key, tasks.clone(), why.clone());
        }
    }
}

impl Actor for ServiceActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.sup.started(ctx);
        if self.retired {
            return;
        }
        let boot = self.boot.take();
        self.start_service(ctx, boot);
    }
}

impl actix::Supervised for ServiceActor {
    /// Reads the record back from sled: what was recorded is the truth; the
    /// replicas' states and the swap's bookkeeping lived in memory only and
    /// are learnt again from the replicas' records (`started()`).
    fn restarting(&mut self, ctx: &mut Context<Self>) {
        // Counted as a task's rebuild: a service is a task to its tenant,
        // and `caldera_actor_rebuilds_total` keeps its kinds.
        self.sup.restarted("task");
        self.boot = None;
        self.replicas.clear();
        self.replica_restarts = 0;
        self.moves_noted.clear();
        self.swap_live = Default::default();
        let read = self.sh.gate.store().task(self.id());
        match reread("task", self.id(), read) {
            Reread::Found(r) => {
                self.retired = r.state.is_terminal();
                self.rec = r;
            }
            Reread::Gone => self.retired = true,
            Reread::Unreadable => {}
        }
        if self.retired {
            self.sh.registry.remove_service(self.id());
        } else {
            // A release whose commit failed left the directory: the record
            // says the service lives on, so it is findable again.
            let me = ServiceHandle::new(ctx.address());
            self.sh.registry.add_service(self.id(), me);
        }
    }
}

crate::supervision::rebuild_on_request!(ServiceActor);

impl Handler<Observe> for ServiceActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.sup.observe("task", self.id(), self.rec.state.as_str()))
    }
}

impl Handler<TaskSnapshot> for ServiceActor {
    type Result = MessageResult<TaskSnapshot>;
    fn handle(&mut self, _: TaskSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

impl Handler<Release> for ServiceActor {
    type Result = ResponseFuture<Result<TaskRecord>>;
    fn handle(&mut self, m: Release, ctx: &mut Context<Self>) -> Self::Result {
        self.release(ctx, m.by)
    }
}

/// A swap still under way when its service is released is recorded
/// `cancelled` with the release (no swap is shown in progress on a service
/// that is gone); answers its `model_swap` event.
fn cancel_swap(planned: &mut TaskRecord, by: &str, now: u64) -> Option<(EventKind, String)> {
    let swap = planned.swap.as_mut().filter(|s| !s.phase.is_over())?;
    let why = format!("the service was released by {by} during the swap");
    let text = format!("swap {} -> {} cancelled: {why}", swap.from, swap.to);
    swap.phase = SwapPhase::Cancelled;
    swap.reason = Some(why);
    swap.finished_ms = Some(now);
    Some((EventKind::ModelSwap, text))
}
