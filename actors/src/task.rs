//! TaskActor: one per live task. It owns the task's lifecycle state machine —
//! Queued -> Scheduled -> Preparing -> Ready -> Running -> Finished, with Failed,
//! Cancelled, Released and requeue on node loss — persists every transition
//! before acting on it, and stops itself once the task is terminal (the record
//! stays in sled).
use crate::clock::now_ms;
use crate::durability::Ticket;
use crate::errors::{ActorError, Result};
use crate::protocol::lifecycle::{Observe, Rebuild};
use crate::protocol::node::{Dispatch, StopWorkload};
use crate::protocol::scheduler::{Checkpointed, Dequeue, Enqueue, Free};
use crate::protocol::task::{
    NodeLost, Pending, Placed, Preempt, Reclaim, Release, Remarked, TaskSnapshot, Workload,
    WorkloadMissing,
};
use crate::protocol::TaskHandle;
use crate::shared::Shared;
use crate::supervision::Supervision;
use actix::prelude::*;
use caldera_spec::wire::{ExitStatus, StartCommand, WorkloadEventKind};
use caldera_spec::{Allocation, Event, EventKind, TaskRecord, TaskState};
use std::sync::Arc;
use std::time::Duration;

/// Extra time past the stop grace before a release frees the room anyway.
const STOP_SLACK: Duration = Duration::from_secs(5);

pub struct TaskActor {
    pub(crate) rec: TaskRecord,
    pub(crate) sh: Arc<Shared>,
    /// The submission's ticket: the task is enqueued only once it is durable.
    boot: Option<Ticket>,
    /// Why the running workload is being stopped, when the control plane asked.
    stopping: Option<Stopping>,
    /// An inference service: the last known state of each replica.
    pub(crate) replicas: std::collections::BTreeMap<String, TaskState>,
    /// An inference service: replicas replaced since one last ran (backoff).
    pub(crate) replica_restarts: u32,
    sup: Supervision<TaskActor>,
    /// Rebuilt after its record became terminal (or vanished): it only waits
    /// for the last handles to drop.
    retired: bool,
}

/// A stop the control plane asked for, and what follows the exit.
#[derive(Debug, Clone)]
enum Stopping {
    /// Back to the queue, to resume from the latest checkpoint.
    Preempted { by: String, reason: String },
    /// Idle too long: the room goes back to the pool for good.
    Reclaimed { reason: String },
}

impl TaskActor {
    pub fn new(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> Self {
        TaskActor {
            rec,
            sh,
            boot,
            stopping: None,
            replicas: Default::default(),
            replica_restarts: 0,
            sup: Supervision::default(),
            retired: false,
        }
    }

    /// Starts a task actor under supervision and returns its handle.
    pub fn spawn(rec: TaskRecord, sh: Arc<Shared>, boot: Option<Ticket>) -> TaskHandle {
        TaskHandle::new(actix::Supervisor::start(move |_| {
            TaskActor::new(rec, sh, boot)
        }))
    }

    /// Whether `allocation_id` is this task's current allocation (news of an
    /// older attempt is ignored).
    fn holds(&self, allocation_id: &str) -> bool {
        self.rec
            .allocation
            .as_ref()
            .is_some_and(|a| a.allocation_id == allocation_id)
    }

    /// Asks the node to stop the workload (SIGTERM, grace, SIGKILL) and arms a
    /// deadline: if no exit is reported by then, the stop's outcome happens anyway.
    fn begin_stop(&mut self, ctx: &mut Context<Self>, why: Stopping, reason: &str) {
        self.stopping = Some(why);
        self.stop_workload(reason);
        let alloc = self
            .rec
            .allocation
            .as_ref()
            .map(|a| a.allocation_id.clone())
            .unwrap_or_default();
        let wait = Duration::from_millis(self.sh.config.stop_grace_ms) + STOP_SLACK;
        ctx.run_later(wait, move |act, ctx| {
            if act.holds(&alloc) {
                act.stop_overdue(ctx);
            }
        });
    }

    /// A requested stop was never confirmed: carry out its outcome.
    fn stop_overdue(&mut self, ctx: &mut Context<Self>) {
        match self.stopping.take() {
            Some(Stopping::Preempted { by, .. }) => {
                self.requeue_preempted(ctx, &by, "stop not confirmed in time")
            }
            Some(Stopping::Reclaimed { reason }) => {
                self.transition(
                    TaskState::Released,
                    Some(format!("{reason}; stop not confirmed in time")),
                );
                self.finish(ctx, "reclaimed");
            }
            None => {}
        }
    }

    /// Preempted -> Queued, keeping the checkpoint pointer for the next start.
    fn requeue_preempted(&mut self, ctx: &mut Context<Self>, by: &str, reason: &str) {
        let _ = ctx;
        self.free(&format!("preempted by {by}"));
        self.rec.preemptions += 1;
        self.rec.allocation = None;
        self.transition(
            TaskState::Preempted,
            Some(format!("preempted by {by}: {reason}")),
        );
        let resume = match &self.rec.checkpoint {
            Some(c) => format!("requeued; resumes from checkpoint {c}"),
            None => "requeued; no checkpoint was saved, it starts over".to_string(),
        };
        self.transition(TaskState::Queued, Some(resume));
        self.enqueue();
    }

    pub(crate) fn id(&self) -> &str {
        &self.rec.spec.task_id
    }

    fn event(&self, kind: EventKind, msg: String) -> Event {
        let mut e = Event::new(now_ms(), kind, msg)
            .task(self.id())
            .tenant(&self.rec.tenant);
        if let Some(a) = &self.rec.allocation {
            e = e.node(&a.node);
        }
        e
    }

    /// Records the task and an event atomically.
    pub(crate) fn persist(&mut self, kind: EventKind, msg: String) -> Option<Ticket> {
        let mut b = self.sh.batch();
        b.put_task(&self.rec);
        b.append_event(self.event(kind, msg));
        let t = self.sh.commit(b);
        if t.is_none() {
            self.sup.fail(format!(
                "task {}: a transition could not be recorded",
                self.id()
            ));
        }
        t
    }

    pub(crate) fn transition(
        &mut self,
        state: TaskState,
        reason: Option<String>,
    ) -> Option<Ticket> {
        let from = self.rec.state;
        if let Some(svc) = &self.rec.service {
            if let Some(parent) = self.sh.registry.task(svc) {
                parent.do_send(crate::protocol::task::ReplicaState {
                    replica: self.id().to_string(),
                    state,
                });
            }
        }
        self.rec.transition(state, now_ms(), reason.clone());
        let msg = match &reason {
            Some(r) => format!("{} -> {}: {r}", from.as_str(), state.as_str()),
            None => format!("{} -> {}", from.as_str(), state.as_str()),
        };
        self.persist(EventKind::TaskTransition, msg)
    }

    fn enqueue(&self) {
        self.sh.scheduler.do_send(Enqueue {
            task_id: self.id().to_string(),
            tenant: self.rec.tenant.clone(),
            spec: self.rec.spec.clone(),
            seq: self.rec.seq,
            attempt: self.rec.attempts + 1,
        });
    }

    fn free(&mut self, reason: &str) {
        if let Some(a) = &self.rec.allocation {
            self.sh.scheduler.do_send(Free {
                allocation_id: a.allocation_id.clone(),
                reason: reason.to_string(),
            });
        }
    }

    /// Terminal: free the room, leave the directory, stop.
    pub(crate) fn finish(&mut self, ctx: &mut Context<Self>, reason: &str) {
        self.free(reason);
        self.sh.registry.remove_task(self.id());
        ctx.stop();
    }

    fn start_command(&self, a: &Allocation) -> StartCommand {
        StartCommand {
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
            checkpoint_dir: self.rec.spec.checkpoint_dir.clone(),
            resume_from: self.rec.checkpoint.clone(),
        }
    }

    /// Sends the start command to the allocation's node once the Scheduled
    /// transition is durable; arms the preparing timeout.
    fn dispatch(&mut self, ctx: &mut Context<Self>, ticket: Option<Ticket>) {
        let Some(a) = self.rec.allocation.clone() else {
            return;
        };
        let cmd = self.start_command(&a);
        let sh = self.sh.clone();
        let attempt = self.rec.attempts;
        let node = a.node.clone();
        ctx.wait(
            async move {
                if let Some(t) = ticket {
                    sh.gate.durable(t).await;
                }
                match sh.registry.node(&a.node) {
                    Some(n) => n
                        .send(Dispatch(cmd))
                        .await
                        .unwrap_or_else(|e| Err(e.to_string())),
                    None => Err(format!("node {} is not known", a.node)),
                }
            }
            .into_actor(self)
            .map(move |res, act, ctx| match res {
                Ok(epoch) => {
                    if let Some(a) = act.rec.allocation.as_mut() {
                        a.epoch = epoch;
                    }
                }
                Err(why) => act.requeue(ctx, format!("could not dispatch to {node}: {why}"), false),
            }),
        );
        let timeout = Duration::from_millis(self.sh.config.preparing_timeout_ms);
        ctx.run_later(timeout, move |act, ctx| {
            act.preparing_timeout(ctx, attempt, timeout)
        });
    }

    fn preparing_timeout(&mut self, ctx: &mut Context<Self>, attempt: u32, after: Duration) {
        let stage = self.rec.state;
        if attempt != self.rec.attempts
            || !matches!(stage, TaskState::Scheduled | TaskState::Preparing)
        {
            return;
        }
        let node = self
            .rec
            .allocation
            .as_ref()
            .map(|a| a.node.clone())
            .unwrap_or_default();
        let why = format!(
            "stuck in {} for {}s on node {node} (preparing timeout)",
            stage.as_str(),
            after.as_secs()
        );
        self.stop_workload(&why);
        self.rec.failure = Some(why.clone());
        self.transition(TaskState::Failed, Some(why.clone()));
        self.finish(ctx, &why);
    }

    fn stop_workload(&self, reason: &str) {
        if let Some(a) = &self.rec.allocation {
            if let Some(n) = self.sh.registry.node(&a.node) {
                n.do_send(StopWorkload {
                    allocation_id: a.allocation_id.clone(),
                    grace_ms: self.sh.config.stop_grace_ms,
                    reason: reason.to_string(),
                });
            }
        }
    }

    /// Back to the queue (node lost, workload vanished, dispatch failed), or
    /// Failed once the retry budget is spent.
    fn requeue(&mut self, ctx: &mut Context<Self>, why: String, counts_as_loss: bool) {
        self.stopping = None;
        self.free(&why);
        if counts_as_loss {
            self.rec.node_losses += 1;
        }
        let budget = self.rec.spec.retry_budget();
        if self.rec.node_losses > budget {
            let why = format!("{why}; retry budget of {budget} spent");
            self.rec.failure = Some(why.clone());
            self.transition(TaskState::Failed, Some(why));
            self.sh.registry.remove_task(self.id());
            ctx.stop();
            return;
        }
        self.rec.allocation = None;
        self.transition(TaskState::Queued, Some(format!("{why}; requeued")));
        self.enqueue();
    }

    fn on_exit(&mut self, ctx: &mut Context<Self>, st: ExitStatus) {
        if self.rec.state == TaskState::Released {
            self.finish(ctx, "released");
            return;
        }
        match self.stopping.take() {
            Some(Stopping::Preempted { by, reason }) => {
                return self.requeue_preempted(ctx, &by, &reason)
            }
            Some(Stopping::Reclaimed { reason }) => {
                self.transition(TaskState::Released, Some(reason.clone()));
                return self.finish(ctx, &reason);
            }
            None => {}
        }
        self.rec.exit_code = st.code;
        let (state, why) = match (st.code, st.signal) {
            (Some(0), _) => (TaskState::Finished, "exited with code 0".to_string()),
            (Some(c), _) => (TaskState::Failed, format!("exited with code {c}")),
            (None, Some(s)) => (TaskState::Failed, format!("killed by signal {s}")),
            (None, None) => (
                TaskState::Failed,
                "ended without an exit status".to_string(),
            ),
        };
        if state == TaskState::Failed {
            self.rec.failure = Some(why.clone());
        }
        self.transition(state, Some(why.clone()));
        self.finish(ctx, &why);
    }
}

impl Actor for TaskActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.sup.started(ctx);
        if self.retired {
            return;
        }
        if self.is_service() {
            let boot = self.boot.take();
            return self.start_service(ctx, boot);
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
        self.sup.restarted();
        self.stopping = None;
        self.boot = None;
        self.replicas.clear();
        self.replica_restarts = 0;
        match self.sh.gate.store().task(self.id()) {
            Ok(Some(r)) => {
                self.retired = r.state.is_terminal();
                self.rec = r;
            }
            Ok(None) => self.retired = true,
            Err(e) => {
                // Storage itself is failing: keep the last known record; the
                // next failed commit stops the actor again.
                tracing::error!(task = %self.id(), error = %e, "task rebuilt from memory: storage unreadable");
            }
        }
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

impl Handler<Rebuild> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Rebuild, ctx: &mut Context<Self>) {
        self.sup.stopping(m.why);
        ctx.stop();
    }
}

impl Handler<Observe> for TaskActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.sup.observe("task", self.id(), self.rec.state.as_str()))
    }
}

impl Handler<Placed> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Placed, ctx: &mut Context<Self>) {
        if !matches!(self.rec.state, TaskState::Queued | TaskState::Preempted) {
            self.sh.scheduler.do_send(Free {
                allocation_id: m.allocation.allocation_id,
                reason: "task no longer waiting".into(),
            });
            return;
        }
        let node = m.allocation.node.clone();
        self.rec.allocation = Some(m.allocation);
        self.rec.attempts += 1;
        self.rec.pending_reason = None;
        self.rec.estimated_start_ms = None;
        // Tickets are ordered: waiting for the Scheduled record covers the allocation record too.
        let t = self.transition(TaskState::Scheduled, Some(format!("placed on {node}")));
        self.dispatch(ctx, t.or(Some(m.ticket)));
    }
}

impl Handler<Pending> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Pending, _: &mut Context<Self>) {
        if matches!(self.rec.state, TaskState::Queued | TaskState::Preempted) {
            self.rec.pending_reason = Some(m.reason);
            self.rec.estimated_start_ms = m.estimated_start_ms;
        }
    }
}

impl Handler<Workload> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Workload, ctx: &mut Context<Self>) {
        if !self.holds(&m.allocation_id) {
            return; // an older attempt's news
        }
        let releasing = self.rec.state == TaskState::Released;
        match m.kind {
            WorkloadEventKind::Preparing
                if !releasing && self.rec.state == TaskState::Scheduled =>
            {
                self.transition(TaskState::Preparing, None);
            }
            WorkloadEventKind::Ready { isolation }
                if !releasing
                    && matches!(self.rec.state, TaskState::Scheduled | TaskState::Preparing) =>
            {
                self.transition(TaskState::Ready, Some(format!("isolation: {isolation}")));
            }
            WorkloadEventKind::Started { pid }
                if !releasing && self.rec.state != TaskState::Running =>
            {
                let how = pid.map_or("reservation held (no command)".to_string(), |p| {
                    format!("pid {p}")
                });
                self.transition(TaskState::Running, Some(how));
            }
            WorkloadEventKind::Exited(st) => self.on_exit(ctx, st),
            WorkloadEventKind::StartFailed { reason } => {
                if releasing {
                    self.finish(ctx, "released");
                } else {
                    self.rec.failure = Some(reason.clone());
                    self.transition(TaskState::Failed, Some(reason.clone()));
                    self.finish(ctx, &reason);
                }
            }
            WorkloadEventKind::CheckpointSaved { path } => {
                let now = now_ms();
                self.rec.checkpoint = Some(path.clone());
                self.rec.checkpoint_ms = Some(now);
                self.persist(
                    EventKind::CheckpointSaved,
                    format!("checkpoint saved: {path}"),
                );
                self.sh.scheduler.do_send(Checkpointed {
                    allocation_id: m.allocation_id.clone(),
                    at_ms: now,
                });
            }
            _ => {}
        }
    }
}

impl Handler<Release> for TaskActor {
    type Result = ResponseFuture<Result<TaskRecord>>;
    fn handle(&mut self, m: Release, ctx: &mut Context<Self>) -> Self::Result {
        if self.is_service() {
            return self.release_service(ctx, m.by);
        }
        let ticket = match self.rec.state {
            TaskState::Queued | TaskState::Preempted => {
                self.sh.scheduler.do_send(Dequeue {
                    task_id: self.id().to_string(),
                });
                let t = self.transition(
                    TaskState::Cancelled,
                    Some(format!("released by {} before it was placed", m.by)),
                );
                self.sh.registry.remove_task(self.id());
                ctx.stop();
                t
            }
            s if s.holds_allocation() => {
                let t = self.transition(TaskState::Released, Some(format!("released by {}", m.by)));
                let reservation = self.rec.spec.command.is_empty();
                let connected_node = self
                    .rec
                    .allocation
                    .as_ref()
                    .and_then(|a| self.sh.registry.node(&a.node));
                self.stop_workload("released");
                if reservation || connected_node.is_none() || s == TaskState::Scheduled {
                    self.finish(ctx, "released");
                } else {
                    let wait = Duration::from_millis(self.sh.config.stop_grace_ms) + STOP_SLACK;
                    ctx.run_later(wait, |act, ctx| {
                        act.finish(ctx, "released; stop not confirmed in time")
                    });
                }
                t
            }
            _ => None,
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
        if !self.holds(&m.allocation_id) || self.stopping.is_some() {
            return;
        }
        let grace = self.sh.config.stop_grace_ms;
        let mut b = self.sh.batch();
        b.append_event(self.event(
            EventKind::Preempted,
            format!("task {} preempted by {}: {}", self.id(), m.by, m.reason),
        ));
        b.append_event(self.event(
            EventKind::CheckpointRequested,
            format!(
                "checkpoint requested from {}: SIGTERM, then {grace} ms to save before SIGKILL",
                self.id()
            ),
        ));
        self.sh.commit(b);
        if self.rec.state != TaskState::Running {
            // Nothing has run yet: nothing to save.
            self.stop_workload("preempted before it ran");
            return self.requeue_preempted(ctx, &m.by, &m.reason);
        }
        let reason = format!("preempted by {}", m.by);
        self.begin_stop(
            ctx,
            Stopping::Preempted {
                by: m.by,
                reason: m.reason,
            },
            &reason,
        );
    }
}

impl Handler<Reclaim> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Reclaim, ctx: &mut Context<Self>) {
        if !self.holds(&m.allocation_id)
            || self.stopping.is_some()
            || self.rec.spec.idle_exempt
            || !self.rec.state.holds_allocation()
        {
            return;
        }
        if let Some(svc) = self.rec.service.clone() {
            if let Some(parent) = self.sh.registry.task(&svc) {
                parent.do_send(crate::protocol::task::ScaleInIdle {
                    replica: self.id().to_string(),
                    reason: m.reason,
                });
            }
            return;
        }
        self.persist(
            EventKind::CheckpointRequested,
            format!("checkpoint requested from {}: {}", self.id(), m.reason),
        );
        self.begin_stop(
            ctx,
            Stopping::Reclaimed {
                reason: m.reason.clone(),
            },
            &m.reason,
        );
    }
}

impl Handler<Remarked> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Remarked, _: &mut Context<Self>) {
        let Some(a) = self.rec.allocation.as_mut() else {
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
            "allocation {} {what} after a quota change",
            m.allocation.allocation_id
        );
        self.persist(EventKind::QuotaChanged, msg);
    }
}

impl Handler<NodeLost> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: NodeLost, ctx: &mut Context<Self>) {
        if self.rec.allocation.as_ref().map(|a| a.node.as_str()) != Some(m.node.as_str()) {
            return;
        }
        if self.rec.state == TaskState::Released {
            self.finish(ctx, "released; node lost");
            return;
        }
        self.requeue(ctx, format!("node {} lost", m.node), true);
    }
}

impl Handler<WorkloadMissing> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: WorkloadMissing, ctx: &mut Context<Self>) {
        match self.rec.state {
            TaskState::Scheduled => self.dispatch(ctx, None),
            TaskState::Released => self.finish(ctx, "released"),
            s if s.holds_allocation() => {
                self.requeue(ctx, format!("workload vanished from node {}", m.node), true)
            }
            _ => {}
        }
    }
}

impl Handler<TaskSnapshot> for TaskActor {
    type Result = MessageResult<TaskSnapshot>;
    fn handle(&mut self, _: TaskSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

/// Convenience for callers that only have a directory entry.
pub async fn snapshot(addr: &TaskHandle) -> Result<TaskRecord> {
    addr.send(TaskSnapshot).await.map_err(ActorError::from)
}
