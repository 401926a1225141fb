//! A service accepting a hot swap (`SwapModel`): the checks, then the swap
//! recorded in the service's record before anything is acted on. The swap
//! itself runs in `swap_drive.rs`, one replica at a time.
//!
//! The rule this enforces (`docs/concepts/models-and-swaps.md`, the API's description): with
//! 2 or more replicas a swap never leaves the service without a ready
//! replica; 1 replica is refused (409 `swap_needs_replicas`) unless the
//! request allows downtime or asks for one surge replica that free capacity
//! holds right now.
use super::ServiceActor;
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::model::register::check_task_model;
use crate::protocol::service::{ReplicaSwapFailed, SwapModel, SwapTick};
use actix::prelude::*;
use caldera_spec::{
    local_id, EventKind, ModelRef, SpecError, SpecErrorKind, SwapAnswer, SwapPhase, SwapProgress,
    SwapReplica, SwapStep, TaskRecord, TaskState,
};

/// The most surge replicas a swap may ask for: one, for a 1-replica service.
pub const MAX_SURGE: u32 = 1;

impl ServiceActor {
    /// Checks `m` against the service as it is now and plans the swap it
    /// asks for; `Ok(None)`: the service already serves `m.to`.
    fn plan_swap(&self, m: &SwapModel) -> Result<Option<SwapProgress>> {
        if self.rec.state.is_terminal() {
            return Err(ActorError::Conflict(format!(
                "service {} has ended",
                local_id(self.id())
            )));
        }
        if m.max_surge > MAX_SURGE {
            return Err(SpecError::new(
                SpecErrorKind::OutOfRange,
                "max_surge",
                format!("max_surge is 0 or {MAX_SURGE}, not {}", m.max_surge),
            )
            .into());
        }
        if let Some(s) = self.rec.swap.as_ref().filter(|s| !s.phase.is_over()) {
            return Err(ActorError::SwapInProgress(format!(
                "service {} is being swapped {} -> {} ({}); wait until it is done or rolled back",
                local_id(self.id()),
                s.from,
                s.to,
                s.phase.as_str()
            )));
        }
        let from = self.serving_model()?;
        if from == m.to {
            return Ok(None);
        }
        check_task_model(self.sh.gate.store(), &self.rec.tenant, &m.to.to_string())?;
        let replicas = self.swap_replicas()?;
        if replicas.len() < 2 && !m.allow_downtime && m.max_surge == 0 {
            return Err(ActorError::SwapNeedsReplicas(format!(
                "service {} has 1 replica: swapping it in place leaves no replica ready meanwhile. Scale it to 2 replicas first (PUT /v1/tasks/{}/replicas), or ask for \"max_surge\": 1 (one extra replica on {} starts first, if free capacity holds it now) or \"allow_downtime\": true",
                local_id(self.id()),
                local_id(self.id()),
                m.to
            )));
        }
        Ok(Some(SwapProgress {
            from,
            to: m.to.clone(),
            requested_by: m.requested_by.clone(),
            allow_downtime: m.allow_downtime,
            max_surge: m.max_surge,
            phase: SwapPhase::Swapping,
            replicas,
            reason: None,
            started_ms: self.sh.now_ms(),
            finished_ms: None,
        }))
    }

    /// The version the service serves now: the model its spec names.
    fn serving_model(&self) -> Result<ModelRef> {
        let Some(model) = &self.rec.spec.model else {
            return Err(ActorError::Conflict(format!(
                "service {} names no model version; a swap changes the version a service serves",
                local_id(self.id())
            )));
        };
        Ok(ModelRef::parse(model, "model")?)
    }

    /// Each slot's replica with its allocation, in slot order: every one
    /// must be running on an allocation (a swap keeps it, so it needs one).
    fn swap_replicas(&self) -> Result<Vec<SwapReplica>> {
        if !self.rec.replica_slots.moves.is_empty() {
            return Err(ActorError::SwapNotReady(format!(
                "service {} is moving a replica off a drained node; swap once the move is done",
                local_id(self.id())
            )));
        }
        let now = self.sh.now_ms();
        let mut out = Vec::new();
        for slot in 0..self.desired() {
            let id = self.replica_id(self.rec.replica_slots.index_of(slot));
            let rec: Option<TaskRecord> = self.sh.gate.store().task(&id)?;
            let running = rec
                .as_ref()
                .filter(|r| r.state == TaskState::Running)
                .and_then(|r| r.allocation.as_ref());
            let Some(a) = running else {
                let state = rec.map_or("not created", |r| r.state.as_str());
                return Err(ActorError::SwapNotReady(format!(
                    "replica {} is {state}, not running on an allocation; swap once every replica runs",
                    local_id(&id)
                )));
            };
            out.push(SwapReplica {
                replica: id,
                allocation_id: a.allocation_id.clone(),
                node: a.node.clone(),
                step: SwapStep::Pending,
                generation: 0,
                since_ms: now,
                surge: false,
                image: None,
                image_digest: None,
            });
        }
        Ok(out)
    }

    /// Records `swap` as the service's, with its "started" event.
    fn record_swap_start(&mut self, swap: SwapProgress) -> Result<crate::durability::Ticket> {
        let order: Vec<&str> = swap.replicas.iter().map(|r| local_id(&r.replica)).collect();
        let msg = format!(
            "swap {} -> {} started by {}: replica by replica ({}), same allocations",
            swap.from,
            swap.to,
            swap.requested_by,
            order.join(", ")
        );
        let mut planned = self.rec.clone();
        planned.swap = Some(swap);
        let e = self.event_of(&planned, EventKind::ModelSwap, msg);
        self.record(CommitSite::ServiceSwap, planned, vec![e])
    }
}

impl Handler<SwapModel> for ServiceActor {
    type Result = ResponseActFuture<Self, Result<SwapAnswer>>;
    /// Answers once the swap is durable; it then runs on by itself. A
    /// 1-replica surge swap asks the Scheduler for room first.
    fn handle(&mut self, m: SwapModel, ctx: &mut Context<Self>) -> Self::Result {
        let planned = match self.plan_swap(&m) {
            Ok(p) => p,
            Err(e) => return answer(Err(e)),
        };
        let Some(swap) = planned else {
            let message = format!(
                "service {} serves {} already: nothing to swap",
                local_id(self.id()),
                m.to
            );
            return answer(Ok(SwapAnswer::AlreadyServing {
                model: m.to,
                message,
            }));
        };
        if swap.replicas.len() < 2 && swap.max_surge > 0 && !swap.allow_downtime {
            let ask = self.sh.scheduler.send(self.surge_question(&swap.to));
            return Box::pin(ask.into_actor(self).then(move |room, act, ctx| {
                // Asked again: the service may have changed while waiting.
                let started = match (room, act.plan_swap(&m)) {
                    (Err(e), _) => Err(e.into()),
                    (_, Err(e)) => Err(e),
                    (_, Ok(None)) => Err(ActorError::Conflict(format!(
                        "service {} serves {} already",
                        local_id(act.id()),
                        m.to
                    ))),
                    (Ok(room), Ok(Some(swap))) => act.start_surge_swap(swap, room),
                };
                act.answer_started(ctx, started)
            }));
        }
        let started = self
            .record_swap_start(swap.clone())
            .map(|ticket| (swap, ticket));
        self.answer_started(ctx, started)
    }
}

impl ServiceActor {
    /// The answer to a swap recorded under `ticket` (once durable), which
    /// then runs on by itself.
    fn answer_started(
        &mut self,
        ctx: &mut Context<Self>,
        started: Result<(SwapProgress, crate::durability::Ticket)>,
    ) -> ResponseActFuture<Self, Result<SwapAnswer>> {
        let (swap, ticket) = match started {
            Ok(s) => s,
            Err(e) => return answer(Err(e)),
        };
        ctx.notify(SwapTick);
        let gate = self.sh.gate.clone();
        Box::pin(actix::fut::wrap_future(async move {
            gate.durable(ticket).await;
            Ok(SwapAnswer::Started { swap })
        }))
    }
}

/// An answer known now.
fn answer(a: Result<SwapAnswer>) -> ResponseActFuture<ServiceActor, Result<SwapAnswer>> {
    Box::pin(actix::fut::ready(a))
}

impl Handler<SwapTick> for ServiceActor {
    type Result = ();
    /// Looks at the swap under way again (`swap_drive.rs`).
    fn handle(&mut self, _: SwapTick, ctx: &mut Context<Self>) {
        self.drive_swap(ctx);
    }
}

impl Handler<ReplicaSwapFailed> for ServiceActor {
    type Result = ();
    fn handle(&mut self, m: ReplicaSwapFailed, ctx: &mut Context<Self>) {
        self.swap_live
            .failed
            .insert(m.replica, (m.generation, m.reason));
        self.drive_swap(ctx);
    }
}
