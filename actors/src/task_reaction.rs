//! How a TaskActor carries out one reaction — the lifecycle table's steps for
//! one input: plan, record, then act. Every change the steps make to the
//! record and every event they append go into ONE batch, and only once it is
//! committed does anything leave the actor (a free, a stop, a dispatch, a
//! word to the service or the Scheduler). A failed commit leaves the record
//! as it was, acts on nothing, answers `not_recorded`, and stops the actor to
//! be rebuilt from sled: nobody hears of a change that was not recorded.
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::Result;
use crate::lifecycle::{self, Step};
use crate::protocol::node::StopWorkload;
use crate::protocol::scheduler::{Checkpointed, Dequeue, Free, ServedModel};
use crate::task::{move_to, TaskActor};
use actix::prelude::*;
use caldera_spec::{Allocation, Event, EventKind, TaskRecord, TaskState};

/// A step that acts outside the record, with the allocation it acts on as of
/// its place in the reaction (a `Free` listed before an `Unbind` frees the
/// allocation the record held then).
struct Act {
    step: Step,
    allocation: Option<Allocation>,
}

/// What the steps before a grant record, in one batch.
#[derive(Default)]
struct Plan {
    site: Option<CommitSite>,
    events: Vec<Event>,
}

impl Plan {
    /// Keeps the most telling site: a transition, then a record change, then events.
    fn at(&mut self, site: CommitSite) {
        let rank = |s: CommitSite| match s {
            CommitSite::TaskTransition => 3,
            CommitSite::TaskRecord => 2,
            _ => 1,
        };
        if self.site.is_none_or(|s| rank(site) > rank(s)) {
            self.site = Some(site);
        }
    }
}

impl TaskActor {
    /// Carries out `steps` (see the module doc). A grant is recorded by the
    /// Scheduler: the steps after it run once it answers. Answers the ticket
    /// of what was recorded (or `ticket` when nothing was).
    pub(crate) fn carry_out(
        &mut self,
        ctx: &mut Context<Self>,
        steps: Vec<Step>,
        ticket: Option<Ticket>,
    ) -> Result<Option<Ticket>> {
        let mut planned = self.rec.clone();
        let mut plan = Plan::default();
        let mut acts = Vec::new();
        let mut grant = None;
        let mut steps = steps.into_iter();
        let now = self.sh.now_ms();
        for step in steps.by_ref() {
            if lifecycle::apply_to_record(&mut planned, &step) {
                if step.is_serving_news() {
                    plan.at(CommitSite::TaskRecord);
                }
                if matches!(step, Step::RecordSwap { .. }) {
                    // Once recorded, its billing record learns the version.
                    let allocation = planned.allocation.clone();
                    acts.push(Act { step, allocation });
                }
                continue;
            }
            match step {
                Step::Grant { allocation, reason } => {
                    grant = Some((allocation, reason));
                    break;
                }
                Step::Enter { state, reason } => {
                    let msg = move_to(&mut planned, state, now, reason);
                    let e = self.event_of(&planned, EventKind::TaskTransition, msg);
                    plan.events.push(e);
                    plan.at(CommitSite::TaskTransition);
                    let step = Step::Enter {
                        state,
                        reason: None,
                    };
                    acts.push(Act {
                        step,
                        allocation: None,
                    });
                }
                Step::Record { kind, message } => {
                    plan.events.push(self.event_of(&planned, kind, message));
                    plan.at(CommitSite::TaskRecord);
                }
                Step::Announce(events) => {
                    for (kind, msg) in events {
                        plan.events.push(self.event_of(&planned, kind, msg));
                    }
                    plan.at(CommitSite::TaskEvents);
                }
                Step::SaveCheckpoint { path } => {
                    let msg = format!("checkpoint saved: {path}");
                    planned.checkpoint = Some(path.clone());
                    planned.checkpoint_ms = Some(now);
                    plan.events
                        .push(self.event_of(&planned, EventKind::CheckpointSaved, msg));
                    plan.at(CommitSite::TaskRecord);
                    let allocation = planned.allocation.clone();
                    let step = Step::SaveCheckpoint { path };
                    acts.push(Act { step, allocation });
                }
                Step::Fence { until_ms } => {
                    // Recorded with the reaction, so a control plane restarted
                    // meanwhile still waits it out; the timer is armed after.
                    planned.fenced_until_ms = Some(until_ms);
                    plan.at(CommitSite::TaskRecord);
                    let allocation = planned.allocation.clone();
                    let step = Step::Fence { until_ms };
                    acts.push(Act { step, allocation });
                }
                step => {
                    let allocation = planned.allocation.clone();
                    acts.push(Act { step, allocation });
                }
            }
        }
        let ticket = match plan.site {
            Some(site) => Some(self.record(site, planned, plan.events)?),
            None => {
                // Nothing to record (a pending note lives in memory only).
                self.rec = planned;
                ticket
            }
        };
        for act in acts {
            self.act(ctx, act, ticket);
        }
        if let Some((allocation, reason)) = grant {
            self.record_grant(ctx, allocation, reason, steps.collect());
        }
        Ok(ticket)
    }

    /// Records `planned` with `events` in one batch at `site`; only then is
    /// it the record. A failed commit leaves the record as it was and stops
    /// the actor to be rebuilt from sled.
    pub(crate) fn record(
        &mut self,
        site: CommitSite,
        planned: TaskRecord,
        events: Vec<Event>,
    ) -> Result<Ticket> {
        let t = crate::task_record::commit(&self.sh, &self.sup, self.id(), site, &planned, events)?;
        self.rec = planned;
        Ok(t)
    }

    /// The borrowed mark is the ledger's: the Scheduler records it in `a/`
    /// first and then tells the task, so a mark the task could not record
    /// (it was rebuilt since) is taken from `a/` when the task is rebuilt.
    pub(crate) fn adopt_ledger_mark(&mut self) {
        let Some(a) = &self.rec.allocation else {
            return;
        };
        let Ok(Some(stored)) = self.sh.gate.store().allocation(&a.allocation_id) else {
            return;
        };
        if stored.borrowed == a.borrowed {
            return;
        }
        let mut planned = self.rec.clone();
        if let Some(p) = planned.allocation.as_mut() {
            p.borrowed = stored.borrowed;
        }
        let what = if stored.borrowed {
            "borrowed (preemptible)"
        } else {
            "within the guarantee"
        };
        let msg = format!(
            "allocation {} is {what}, as the ledger records it",
            stored.allocation_id
        );
        let e = self.event_of(&planned, EventKind::QuotaChanged, msg);
        // Not recorded: the next rebuild tries again.
        let _ = self.record(CommitSite::TaskRecord, planned, vec![e]);
    }

    /// An event about this task as `rec` describes it (its node, if placed).
    pub(crate) fn event_of(&self, rec: &TaskRecord, kind: EventKind, msg: String) -> Event {
        crate::task_record::event(&self.sh, self.id(), rec, kind, msg)
    }

    /// Carries out a step that acts outside the record, once it is recorded.
    fn act(&mut self, ctx: &mut Context<Self>, act: Act, ticket: Option<Ticket>) {
        let a = act.allocation.as_ref();
        match act.step {
            Step::Enter { state, .. } => {
                self.tell_service(state);
                if state == TaskState::Running {
                    self.arm_time_limit(ctx);
                    if self.rec.allocation.is_some() {
                        self.count_first_run();
                    }
                }
                if state == TaskState::Warming {
                    self.arm_warming_timeout(ctx);
                }
            }
            Step::Decline {
                allocation_id,
                reason,
            } => self.sh.scheduler.do_send(Free {
                allocation_id,
                reason,
            }),
            Step::Dispatch => self.dispatch(ctx, ticket),
            Step::Enqueue => self.enqueue(),
            Step::EnqueueAfter { delay_ms } => {
                self.enqueue_after(ctx, std::time::Duration::from_millis(delay_ms))
            }
            Step::Dequeue => self.sh.scheduler.do_send(Dequeue {
                task_id: self.id().to_string(),
            }),
            Step::Free { reason } => self.free(a, &reason),
            Step::StopWorkload { reason } => self.stop_workload(a, &reason),
            Step::AwaitStop(why) => self.await_stop(ctx, a, why),
            Step::ForgetStop => self.forget_stop(),
            Step::SaveCheckpoint { .. } => {
                if let (Some(a), Some(at_ms)) = (a, self.rec.checkpoint_ms) {
                    self.sh.scheduler.do_send(Checkpointed {
                        allocation_id: a.allocation_id.clone(),
                        at_ms,
                    });
                }
            }
            Step::AskServiceToScaleIn { reason } => self.ask_service_to_scale_in(reason),
            Step::AwaitRelease => self.await_release(ctx),
            Step::Fence { .. } => self.arm_fence(ctx),
            Step::Finish { reason } => {
                self.free(a, &reason);
                self.leave(ctx);
            }
            Step::Leave => self.leave(ctx),
            // Recorded in the plan.
            Step::Grant { .. }
            | Step::Record { .. }
            | Step::Announce(_)
            | Step::Unbind
            | Step::CountNodeLoss
            | Step::Unfence
            | Step::CountPreemption
            | Step::RecordFailure(_)
            | Step::RecordFailureCode(_)
            | Step::NotePull(_)
            | Step::RecordImageDigest(_)
            | Step::RecordExitCode(_)
            | Step::NotePending { .. }
            | Step::Serve { .. }
            | Step::SetReady(_) => {}
            Step::RecordSwap { model, .. } => {
                if let Some(a) = a {
                    self.sh.scheduler.do_send(ServedModel {
                        allocation_id: a.allocation_id.clone(),
                        model,
                        at_ms: self.sh.now_ms(),
                    });
                }
            }
        }
    }

    /// Its first start (not a restart after a preemption or a lost node):
    /// the wait since submission goes into `caldera_task_submit_to_running_seconds`.
    fn count_first_run(&self) {
        let runs = self.rec.history.iter();
        if runs.filter(|t| t.state == TaskState::Running).count() == 1 {
            let waited = self.sh.now_ms().saturating_sub(self.rec.created_ms);
            self.sh.metrics().first_run(
                self.rec.spec.task_type,
                std::time::Duration::from_millis(waited),
            );
        }
    }

    /// Hands `a` back to the Scheduler.
    pub(crate) fn free(&self, a: Option<&Allocation>, reason: &str) {
        if let Some(a) = a {
            self.sh.scheduler.do_send(Free {
                allocation_id: a.allocation_id.clone(),
                reason: reason.to_string(),
            });
        }
    }

    /// Asks `a`'s node to stop its workload.
    fn stop_workload(&self, a: Option<&Allocation>, reason: &str) {
        if let Some(a) = a {
            if let Some(n) = self.sh.registry.node(&a.node) {
                n.do_send(StopWorkload {
                    allocation_id: a.allocation_id.clone(),
                    grace_ms: self.sh.config.nodes.stop_grace_ms,
                    reason: reason.to_string(),
                });
            }
        }
    }

    /// Terminal: leave the directory, stop.
    fn leave(&mut self, ctx: &mut Context<Self>) {
        self.left = true;
        self.sh.registry.remove_task(self.id());
        ctx.stop();
    }
}
