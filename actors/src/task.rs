//! TaskActor: one per live task. It owns the task's lifecycle state machine —
//! Queued -> Scheduled -> Preparing -> Ready -> Running -> Finished, with Failed,
//! Cancelled, Released and requeue on node loss — persists every transition
//! before acting on it, and stops itself once the task is terminal (the record
//! stays in sled). A replica of an inference service is a task like any
//! other; what it tells its ServiceActor is in `task/replica.rs`. The service
//! itself is a ServiceActor's (`service.rs`), never a TaskActor's.
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::Result;
use crate::lifecycle::{self, Input, Outcome, Step, Stopping};
use crate::node_trust::{self, Refusal};
use crate::protocol::lifecycle::Observe;
use crate::protocol::node::Dispatch;
use crate::protocol::scheduler::{Enqueue, RecordGrant};
use crate::protocol::task::{
    Pending, Placed, Preempt, Reclaim, Release, Remarked, TaskSnapshot, Workload, WorkloadMissing,
};
use crate::protocol::TaskHandle;
use crate::shared::Shared;
use crate::supervision::{reread, Reread, Supervision};
use actix::prelude::*;
use caldera_spec::wire::{StartCommand, WorkloadEventKind};
use caldera_spec::{Allocation, Event, EventKind, TaskRecord, TaskState};
use std::sync::Arc;
use std::time::Duration;

mod container_start;
mod moves;
mod preparing;
mod rebuilt;
mod replica;
mod warming;

/// Extra time past the stop grace before a release frees the room anyway.
const STOP_SLACK: Duration = Duration::from_secs(5);

pub struct TaskActor {
    pub(crate) rec: TaskRecord,
    pub(crate) sh: Arc<Shared>,
    /// The submission's ticket: the task is enqueued only once it is durable.
    boot: Option<Ticket>,
    /// Why the running workload is being stopped, when the control plane asked.
    stopping: Option<Stopping>,
    pub(crate) sup: Supervision<TaskActor>,
    /// Rebuilt after its record became terminal (or vanished): it only waits
    /// for the last handles to drop.
    retired: bool,
    /// Rebuilt by its supervisor while starting: send the start again.
    redispatch: bool,
    /// Start commands in a row that could not be handed to their node: the
    /// next request for room waits `lifecycle::dispatch_backoff` of it.
    dispatch_failures: u32,
    /// Rebuilt while its workload's end is still to be recorded: ask its
    /// node for an exit it already forwarded (`task/rebuilt.rs`).
    resend_exit: bool,
    /// Its terminal step was carried out (it left the directory): a restart
    /// after that only retires it.
    pub(crate) left: bool,
    /// Warming: what the node last reported of the copy (memory only).
    pub(crate) warming: Option<warming::WarmingNote>,
    /// Preparing: the pull's reports and the stage's timer (memory only).
    pub(crate) preparing: preparing::PreparingNote,
    /// A replica draining for its service's swap: the generation it runs
    /// now, off the endpoints list until its node answers the Swap (memory
    /// only).
    pub(crate) swap_draining: Option<u32>,
}

impl TaskActor {
    pub fn new(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> Self {
        TaskActor {
            rec,
            sh,
            boot,
            stopping: None,
            sup: Supervision::default(),
            retired: false,
            redispatch: false,
            dispatch_failures: 0,
            resend_exit: false,
            left: false,
            warming: None,
            preparing: Default::default(),
            swap_draining: None,
        }
    }

    /// Starts a task actor under supervision and returns its handle.
    pub fn spawn(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> TaskHandle {
        TaskHandle::new(actix::Supervisor::start(move |_| {
            TaskActor::new(rec, sh, boot)
        }))
    }

    /// Asks the lifecycle table what `input` means for this task and carries
    /// the answer out. Answers the ticket of what was recorded, or `ticket`
    /// when nothing was; a change that could not be recorded was not made
    /// (already logged, and the actor is being rebuilt).
    pub(crate) fn react(
        &mut self,
        ctx: &mut Context<Self>,
        input: Input<'_>,
        ticket: Option<Ticket>,
    ) -> Option<Ticket> {
        self.try_react(ctx, input, ticket).unwrap_or(None)
    }

    /// [`TaskActor::react`] that says when the change could not be recorded.
    fn try_react(
        &mut self,
        ctx: &mut Context<Self>,
        input: Input<'_>,
        ticket: Option<Ticket>,
    ) -> Result<Option<Ticket>> {
        match lifecycle::decide(&self.rec, self.stopping.as_ref(), input) {
            Outcome::Ignored(_) => Ok(ticket),
            Outcome::Steps(steps) => self.carry_out(ctx, steps, ticket),
        }
    }

    /// Arms the release's deadline: past it the room is freed anyway.
    pub(crate) fn await_release(&mut self, ctx: &mut Context<Self>) {
        let wait = Duration::from_millis(self.sh.config.nodes.stop_grace_ms) + STOP_SLACK;
        ctx.run_later(wait, |act, ctx| {
            act.react(ctx, Input::ReleaseOverdue, None);
        });
    }

    /// Remembers why a stop was asked for and arms its deadline: if no exit
    /// is reported by then, the stop's outcome happens anyway.
    pub(crate) fn await_stop(
        &mut self,
        ctx: &mut Context<Self>,
        a: Option<&Allocation>,
        why: Stopping,
    ) {
        self.stopping = Some(why);
        let alloc = a.map(|a| a.allocation_id.clone()).unwrap_or_default();
        let wait = Duration::from_millis(self.sh.config.nodes.stop_grace_ms) + STOP_SLACK;
        ctx.run_later(wait, move |act, ctx| {
            act.react(
                ctx,
                Input::StopOverdue {
                    allocation_id: &alloc,
                },
                None,
            );
        });
    }

    /// Arms the time limit of the current run: its declared `duration` plus
    /// `time-limit-grace-ms`, counted from when it entered Running (so a
    /// control plane rebuilt mid-run keeps the same deadline). Training and
    /// reservations only: an inference service runs until it is released.
    pub(crate) fn arm_time_limit(&mut self, ctx: &mut Context<Self>) {
        let (Some(limit_ms), Some(limit)) =
            (self.rec.spec.duration_ms(), self.rec.spec.duration.clone())
        else {
            return;
        };
        if self.rec.spec.task_type == caldera_spec::TaskType::Inference
            || self.rec.state != TaskState::Running
        {
            return;
        }
        let Some(alloc) = self.allocation_id() else {
            return;
        };
        let deadline = self
            .rec
            .since_ms()
            .saturating_add(limit_ms)
            .saturating_add(self.sh.config.scheduling.time_limit_grace_ms);
        let wait = Duration::from_millis(deadline.saturating_sub(self.sh.now_ms()));
        let stop_grace_ms = self.sh.config.nodes.stop_grace_ms;
        ctx.run_later(wait, move |act, ctx| {
            let input = Input::TimeLimit {
                allocation_id: &alloc,
                limit: &limit,
                stop_grace_ms,
            };
            act.react(ctx, input, None);
        });
    }

    pub(crate) fn id(&self) -> &str {
        &self.rec.spec.task_id
    }

    /// The current allocation's id, for a timer that must only act on this run.
    pub(crate) fn allocation_id(&self) -> Option<String> {
        self.rec
            .allocation
            .as_ref()
            .map(|a| a.allocation_id.clone())
    }

    /// Takes a grant: plans the record (the allocation bound, Scheduled) and
    /// has the Scheduler record it with the allocation in one batch.
    pub(crate) fn record_grant(
        &mut self,
        ctx: &mut Context<Self>,
        allocation: Allocation,
        reason: String,
        then: Vec<Step>,
    ) {
        let now = self.sh.now_ms();
        let mut planned = self.rec.clone();
        lifecycle::bind(&mut planned, &allocation);
        let msg = move_to(&mut planned, TaskState::Scheduled, now, Some(reason));
        let event = Event::new(now, EventKind::TaskTransition, msg)
            .task(self.id())
            .tenant(&self.rec.tenant)
            .node(&allocation.node);
        self.ask_to_record(ctx, planned, event, then);
    }

    /// A dispatch was answered under another epoch than the one recorded
    /// (the node said hello again since the grant): the Scheduler records
    /// the allocation under it, with the task's record, in one batch.
    fn record_epoch(&mut self, ctx: &mut Context<Self>, epoch: u64) {
        let mut planned = self.rec.clone();
        let Some(a) = planned.allocation.as_mut() else {
            return;
        };
        let msg = format!(
            "allocation {} on {} dispatched under epoch {epoch} (granted under {})",
            a.allocation_id, a.node, a.epoch
        );
        a.epoch = epoch;
        let event = self.event_of(&planned, EventKind::AllocationGranted, msg);
        self.ask_to_record(ctx, planned, event, Vec::new());
    }

    /// Asks the Scheduler to record `planned` (Scheduled, holding its
    /// allocation) with the allocation in one batch, handling nothing else
    /// meanwhile (no message sees a half-taken grant). Recorded, the plan is
    /// the record and `then` runs (a dispatch waits for the batch to be
    /// durable); refused, the record stays as it was (a task that waited
    /// stays queued: the Scheduler queues it again).
    fn ask_to_record(
        &mut self,
        ctx: &mut Context<Self>,
        planned: TaskRecord,
        event: Event,
        then: Vec<Step>,
    ) {
        let Some(allocation) = planned.allocation.clone() else {
            return;
        };
        let id = allocation.allocation_id.clone();
        let entered = planned.state != self.rec.state;
        let ask = self.sh.scheduler.send(RecordGrant {
            allocation,
            record: planned.clone(),
            event,
        });
        ctx.wait(ask.into_actor(self).map(move |res, act, ctx| match res {
            Ok(Ok(ticket)) => {
                act.rec = planned;
                if entered {
                    act.tell_service(act.rec.state);
                }
                // A failure here is logged and rebuilds the actor.
                let _ = act.carry_out(ctx, then, Some(ticket));
            }
            Ok(Err(why)) => {
                tracing::info!(task = %act.id(), allocation = %id, %why, "not recorded; the record stays as it was");
            }
            // Whether it was recorded is unknown: sled says.
            Err(e) => act.sup.fail(format!(
                "task {}: recording allocation {id} went unanswered: {e}",
                act.id()
            )),
        }));
    }

    pub(crate) fn enqueue(&self) {
        self.sh.scheduler.do_send(Enqueue {
            task_id: self.id().to_string(),
            tenant: self.rec.tenant.clone(),
            spec: self.rec.spec.clone(),
            seq: self.rec.seq,
            attempt: self.rec.attempts + 1,
            queued_ms: queued_since(&self.rec),
        });
    }

    /// [`TaskActor::enqueue`] after `delay`, if the task still waits for the
    /// same attempt then (not cancelled, released or granted meanwhile).
    pub(crate) fn enqueue_after(&mut self, ctx: &mut Context<Self>, delay: Duration) {
        let attempts = self.rec.attempts;
        ctx.run_later(delay, move |act, _| {
            if act.rec.state == TaskState::Queued && act.rec.attempts == attempts && !act.left {
                act.enqueue();
            }
        });
    }

    fn start_command(
        &self,
        a: &Allocation,
    ) -> std::result::Result<StartCommand, crate::container::start::NotBuilt> {
        Ok(StartCommand {
            container: self.container_start()?,
            allocation_id: a.allocation_id.clone(),
            task_id: a.task_id.clone(),
            epoch: a.epoch,
            command: self.rec.spec.command.clone(),
            env: self.rec.spec.env.clone(),
            gpu_indices: a.gpus.iter().map(|g| g.index).collect(),
            gpu_uuids: a.gpus.iter().map(|g| g.uuid.clone()).collect(),
            gpu_memory_mb: a.gpus.iter().map(|g| g.memory_mb).max().unwrap_or(0),
            cpu_milli: a.cpu_milli,
            memory_mb: a.memory_mb,
            disk_mb: a.disk_mb,
            checkpoint_dir: self.rec.spec.checkpoint_dir.clone(),
            resume_from: self.rec.checkpoint.clone(),
            model: self.model_mount(),
            readiness: self.rec.spec.readiness.clone(),
        })
    }

    /// Sends the start command to the allocation's node once the Scheduled
    /// transition is durable; arms the preparing timeout.
    pub(crate) fn dispatch(&mut self, ctx: &mut Context<Self>, ticket: Option<Ticket>) {
        let Some(a) = self.rec.allocation.clone() else {
            return;
        };
        let cmd = match self.start_command(&a) {
            Ok(cmd) => cmd,
            Err(why) => return self.start_not_built(ctx, &a, why),
        };
        let sh = self.sh.clone();
        let node = a.node.clone();
        ctx.wait(
            async move {
                if let Some(t) = ticket {
                    sh.gate.durable(t).await;
                }
                match sh.registry.node(&a.node) {
                    Some(n) => match n.send(Dispatch(cmd)).await {
                        Ok(answer) => answer.map_err(|refused| refused.to_string()),
                        Err(unanswered) => Err(unanswered.to_string()),
                    },
                    None => Err(format!("node {} is not known", a.node)),
                }
            }
            .into_actor(self)
            .map(move |res, act, ctx| match res {
                Ok(epoch) => {
                    act.dispatch_failures = 0;
                    act.tell_model_needed(&node);
                    let recorded = act.rec.allocation.as_ref().map(|a| a.epoch);
                    if recorded.is_some_and(|e| e != epoch) {
                        act.record_epoch(ctx, epoch);
                    }
                }
                Err(why) => {
                    act.dispatch_failures = act.dispatch_failures.saturating_add(1);
                    let retry = lifecycle::dispatch_backoff(act.dispatch_failures);
                    act.react(
                        ctx,
                        Input::DispatchFailed {
                            node: &node,
                            why: &why,
                            retry_in_ms: retry.as_millis() as u64,
                        },
                        None,
                    );
                }
            }),
        );
        self.reset_preparing();
        self.arm_preparing_timeout(ctx);
    }

    /// The stop that was awaited is over (or moot).
    pub(crate) fn forget_stop(&mut self) {
        self.stopping = None;
    }
}

impl Actor for TaskActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.sup.started(ctx);
        if self.retired {
            return;
        }
        if self.rec.state == TaskState::Running {
            // Rebuilt (boot or supervisor) mid-run: the deadline still holds.
            self.arm_time_limit(ctx);
        }
        if self.rec.state == TaskState::Warming {
            // Rebuilt mid-warmup: a fresh warming timeout.
            self.arm_warming_timeout(ctx);
        }
        // Rebuilt while fenced: the recorded deadline still holds.
        self.arm_fence(ctx);
        if std::mem::take(&mut self.redispatch) {
            // Rebuilt while starting, its timers gone and perhaps a step not
            // recorded: start again (an agent ignores a start it already
            // ran, and the resync this rebuild asks for reports a running
            // workload), with a fresh preparing timeout.
            self.dispatch(ctx, None);
        }
        if std::mem::take(&mut self.resend_exit) {
            self.after_rebuild(ctx);
        }
        if matches!(self.rec.state, TaskState::Queued | TaskState::Preempted) {
            match self.boot.take() {
                Some(t) => {
                    let gate = self.sh.gate.clone();
                    ctx.wait(
                        async move { gate.durable(t).await }
                            .into_actor(self)
                            .map(|_, act, _| act.enqueue()),
                    );
                }
                None => self.enqueue(),
            }
        }
    }
}

impl actix::Supervised for TaskActor {
    /// Reads the record back from sled: what was recorded is the truth, what
    /// only lived in memory (a stop in progress, replica states) is rebuilt by
    /// `started()` and by the next reports.
    fn restarting(&mut self, ctx: &mut Context<Self>) {
        self.sup.restarted("task");
        self.stopping = None;
        self.boot = None;
        self.swap_draining = None;
        let read = self.sh.gate.store().task(self.id());
        match reread("task", self.id(), read) {
            Reread::Found(r) => {
                let waits = self.waits_on_workload(&r);
                self.retired = r.state.is_terminal() && !waits;
                self.resend_exit = waits;
                self.rec = r;
                if !self.retired {
                    self.adopt_ledger_mark();
                }
            }
            Reread::Gone => {
                self.retired = true;
                self.resend_exit = false;
            }
            Reread::Unreadable => {}
        }
        self.redispatch = !self.retired
            && matches!(
                self.rec.state,
                TaskState::Scheduled | TaskState::Preparing | TaskState::Warming | TaskState::Ready
            );
        if self.retired {
            self.sh.registry.remove_task(self.id());
        } else {
            // A terminal step whose commit failed left the directory: the
            // record says the task lives on, so it is findable again.
            let me = TaskHandle::new(ctx.address());
            self.sh.registry.add_task(self.id(), me);
        }
    }
}

crate::supervision::rebuild_on_request!(TaskActor);

impl Handler<Observe> for TaskActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.sup.observe("task", self.id(), self.rec.state.as_str()))
    }
}

impl Handler<Placed> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Placed, ctx: &mut Context<Self>) {
        let input = Input::Placed {
            allocation: &m.allocation,
            note: m.note,
        };
        self.react(ctx, input, None);
    }
}

impl Handler<Pending> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Pending, ctx: &mut Context<Self>) {
        let input = Input::Pending {
            reason: &m.reason,
            estimated_start_ms: m.estimated_start_ms,
        };
        self.react(ctx, input, None);
        self.tell_service_pending(&m.reason);
    }
}

impl Handler<Workload> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Workload, ctx: &mut Context<Self>) {
        if let WorkloadEventKind::CheckpointSaved { path } = &m.kind {
            let spec_dir = self.rec.spec.checkpoint_dir.as_deref();
            if !node_trust::checkpoint_inside(
                path,
                &m.node_data_dir,
                &self.rec.spec.task_id,
                spec_dir,
            ) {
                let what = format!(
                    "checkpoint {path:?} for allocation {} is outside task {}'s checkpoint dir",
                    m.allocation_id, self.rec.spec.task_id
                );
                node_trust::refuse(&self.sh, &m.node, Refusal::CheckpointOutsideDir, &what);
                return;
            }
        }
        if self.swap_news(&m.kind) {
            return;
        }
        if !self.warming_due(&m.kind) || !self.pull_due(ctx, &m.kind) {
            return;
        }
        let input = Input::Workload {
            allocation_id: &m.allocation_id,
            kind: &m.kind,
            node_address: &m.node_address,
        };
        self.react(ctx, input, None);
    }
}

impl Handler<Release> for TaskActor {
    type Result = ResponseFuture<Result<TaskRecord>>;
    fn handle(&mut self, m: Release, ctx: &mut Context<Self>) -> Self::Result {
        let node_connected = self
            .rec
            .allocation
            .as_ref()
            .and_then(|a| self.sh.registry.node(&a.node))
            .is_some();
        let input = Input::ReleaseRequested {
            by: &m.by,
            node_connected,
        };
        // A release that could not be recorded was not made: 503, retry.
        let ticket = match self.try_react(ctx, input, None) {
            Ok(t) => t,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        // The answer is the record as released, once durable. It does not
        // depend on this actor living on: the workload may exit (and the actor
        // stop) before the flush completes.
        let rec = self.rec.clone();
        let gate = self.sh.gate.clone();
        Box::pin(async move {
            if let Some(t) = ticket {
                gate.durable(t).await;
            }
            Ok(rec)
        })
    }
}

impl Handler<Preempt> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Preempt, ctx: &mut Context<Self>) {
        let by = caldera_spec::as_seen_by(Some(&self.rec.tenant), &m.by);
        let input = Input::Preempt {
            allocation_id: &m.allocation_id,
            by: &by,
            reason: &m.reason,
            stop_grace_ms: self.sh.config.nodes.stop_grace_ms,
        };
        self.react(ctx, input, None);
    }
}

impl Handler<Reclaim> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Reclaim, ctx: &mut Context<Self>) {
        let input = Input::Reclaim {
            allocation_id: &m.allocation_id,
            reason: &m.reason,
        };
        self.react(ctx, input, None);
    }
}

impl Handler<Remarked> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Remarked, _: &mut Context<Self>) {
        let mut planned = self.rec.clone();
        let Some(a) = planned.allocation.as_mut() else {
            return;
        };
        if a.allocation_id != m.allocation.allocation_id {
            return;
        }
        a.borrowed = m.allocation.borrowed;
        let what = if a.borrowed {
            "now borrowed (preemptible)"
        } else {
            "back within the guarantee"
        };
        let msg = format!(
            "allocation {} {what} after {}",
            m.allocation.allocation_id, m.after
        );
        let e = self.event_of(&planned, EventKind::QuotaChanged, msg);
        // Not recorded: the mark stays as it was, and the rebuild reads sled.
        let _ = self.record(CommitSite::TaskRecord, planned, vec![e]);
    }
}

impl Handler<WorkloadMissing> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: WorkloadMissing, ctx: &mut Context<Self>) {
        self.react(ctx, Input::WorkloadMissing { node: &m.node }, None);
    }
}

impl Handler<TaskSnapshot> for TaskActor {
    type Result = MessageResult<TaskSnapshot>;
    fn handle(&mut self, _: TaskSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

/// Moves `rec` to `state` and answers the transition's event text.
/// Since when a waiting task waits: its latest move into the queue
/// (`queued`, or `preempted` on its way back), else its submission. What
/// the queue's oldest-age figure counts from, also after a restart.
pub fn queued_since(rec: &TaskRecord) -> u64 {
    rec.history
        .iter()
        .rev()
        .find(|t| matches!(t.state, TaskState::Queued | TaskState::Preempted))
        .map_or(rec.created_ms, |t| t.at_ms)
}

pub(crate) fn move_to(
    rec: &mut TaskRecord,
    state: TaskState,
    now: u64,
    reason: Option<String>,
) -> String {
    let from = rec.state;
    let msg = match &reason {
        Some(r) => format!("{} -> {}: {r}", from.as_str(), state.as_str()),
        None => format!("{} -> {}", from.as_str(), state.as_str()),
    };
    rec.transition(state, now, reason);
    msg
}

#[cfg(test)]
mod preemptor_tests {
    use caldera_spec::as_seen_by;

    #[test]
    fn a_preempted_task_learns_only_its_own_tenants_ids() {
        assert_eq!(as_seen_by(Some("alpha"), "alpha/svc.r0"), "svc.r0");
        assert_eq!(
            as_seen_by(Some("alpha"), "bravo/svc.r0"),
            "another tenant's task"
        );
    }
}
