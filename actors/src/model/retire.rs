//! Retire by control message. `POST .../retire` records
//! `retiring` with its [`RetireOrder`] before anything else happens; from
//! then the version takes no new tasks (`check_task_model` refuses it,
//! 422 `model_not_accepting`). While retiring, the actor looks at who still
//! uses it (every task of any tenant, not ended, naming it: services and
//! their replicas): after [`RECHECK`], then less often while the users stay
//! the same (doubling up to [`RECHECK_MAX`]: each look reads every task
//! record), and again at once when told tasks left it (a swap moved them,
//! their service was released). When nobody does, it records
//! `retired` (the event names who asked) and tells every node holding a
//! copy to evict it; a node that is offline then is told when it says hello
//! again (its copy stays `verified` in the record until its cache report
//! no longer lists it). A control plane killed while retiring finds the
//! state in sled, and the rebuilt actor carries on checking.
//!
//! The check is a periodic scan rather than a reaction to each task's end,
//! so it cannot miss an end (a task released, failed, cancelled, or moved
//! to another version) however it happened, including during a restart.
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::errors::Result;
use crate::protocol::model::Retire;
use crate::protocol::node::SendWeights;
use crate::protocol::service::SwapModel;
use actix::prelude::*;
use caldera_spec::weights::EvictCommand;
use caldera_spec::wire::ServerMessage;
use caldera_spec::{CopyState, EventKind, ModelState, ModelVersionRecord, RetireOrder, TaskRecord};
use std::time::Duration;

/// How soon a retiring version looks for its remaining users (first, and
/// after they changed or were told to have left).
pub const RECHECK: Duration = Duration::from_millis(500);
/// The longest wait between two looks while the users stay the same.
pub const RECHECK_MAX: Duration = Duration::from_secs(5);

/// The tasks of any tenant that still use the version `key`: not ended, and
/// submitted with it or (a replica) running a process that serves it — a
/// replica mid-swap counts for both versions. A scan of the task records
/// (twice a second while a version retires).
pub fn users(store: &caldera_storage::Store, key: &str) -> Vec<TaskRecord> {
    store
        .tasks()
        .filter_map(|t| t.ok())
        .filter(|t| !t.state.is_terminal() && names(t, key))
        .collect()
}

/// Whether `task` names the version `key` (as `name:version`), as its spec
/// or as what its process serves.
fn names(task: &TaskRecord, key: &str) -> bool {
    let is =
        |m: &str| caldera_spec::ModelRef::parse(m, "model").is_ok_and(|r| r.to_string() == key);
    task.spec.model.as_deref().is_some_and(is) || task.serving_model.as_deref().is_some_and(is)
}

/// The services (keys) among `users`: a replica's service, or an inference
/// service's own record; sorted, each once.
pub fn services_of(users: &[TaskRecord]) -> std::collections::BTreeSet<String> {
    users
        .iter()
        .filter(|t| t.spec.task_type == caldera_spec::TaskType::Inference)
        .map(|t| t.service.clone().unwrap_or_else(|| t.spec.task_id.clone()))
        .collect()
}

/// The wait before the next look: twice the last (at most [`RECHECK_MAX`])
/// when the users stayed the same, else [`RECHECK`].
fn next_look(last: Duration, same_users: bool) -> Duration {
    if same_users {
        (last * 2).min(RECHECK_MAX)
    } else {
        RECHECK
    }
}

impl ModelVersionActor {
    /// Starts the periodic check of a retiring version (at start, after a
    /// rebuild, and when the retire is recorded).
    pub(super) fn watch_retiring(&mut self, ctx: &mut Context<Self>) {
        if self.rec.state != ModelState::Retiring {
            return;
        }
        if let Some(h) = self.retire_check.take() {
            ctx.cancel_future(h);
        }
        let h = ctx.run_later(self.retire_every, |act, ctx| {
            act.retire_check = None;
            act.recheck_retiring(ctx)
        });
        self.retire_check = Some(h);
    }

    /// One check: retired (and evicted everywhere) once nobody uses it,
    /// else look again later.
    fn recheck_retiring(&mut self, ctx: &mut Context<Self>) {
        if self.rec.state != ModelState::Retiring {
            return;
        }
        let users = users(self.sh.gate.store(), &self.key());
        if !users.is_empty() {
            // A record's task id is its key already (`tenant/id`).
            let seen: Vec<String> = users.iter().map(|t| t.spec.task_id.clone()).collect();
            self.retire_every = next_look(self.retire_every, seen == self.retire_seen);
            self.retire_seen = seen;
            self.ask_swaps(ctx, &users);
            self.watch_retiring(ctx);
            return;
        }
        let mut planned = self.rec.clone();
        planned.state = ModelState::Retired;
        let by = planned
            .retire
            .as_ref()
            .map_or("the operator".to_string(), |o| o.by.clone());
        let msg = format!(
            "model {} retired (asked by {by}): no task uses it; every node evicts its copy",
            self.key()
        );
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        if self
            .record(CommitSite::ModelState, planned, vec![e])
            .is_err()
        {
            // The actor is rebuilt from sled (still retiring) and checks again.
            return;
        }
        for node in self.holders() {
            self.evict_on(&node);
        }
    }

    /// Tasks left the version (a swap moved them, their service was
    /// released): a retiring one looks again soon, not at its backed-off pace.
    pub(super) fn users_may_have_left(&mut self, ctx: &mut Context<Self>) {
        if self.rec.state == ModelState::Retiring {
            self.retire_every = RECHECK;
            self.watch_retiring(ctx);
        }
    }

    /// Nodes the record says hold (or are fetching) a copy.
    pub(super) fn holders(&self) -> Vec<String> {
        self.rec
            .nodes
            .iter()
            .filter(|(_, c)| {
                matches!(
                    c.copy,
                    CopyState::Verified | CopyState::Warming | CopyState::Waiting
                )
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Tells `node` to delete its copy (the agent keeps a copy in use until
    /// its last user ends). A node without a session hears it at its hello.
    pub(super) fn evict_on(&self, node: &str) {
        if let Some(n) = self.sh.registry.node(node) {
            n.do_send(SendWeights(ServerMessage::Evict(EvictCommand {
                epoch: 0,
                sha256: self.rec.spec.weights.sha256.clone(),
                reason: format!("model {} is retired", self.key()),
            })));
        }
    }
}

impl Handler<Retire> for ModelVersionActor {
    type Result = ResponseFuture<Result<ModelVersionRecord>>;
    /// Records `retiring` with the order, then starts checking. Asked again
    /// while retiring (or once retired) it answers the record as it is.
    fn handle(&mut self, m: Retire, ctx: &mut Context<Self>) -> Self::Result {
        let from = self.rec.state;
        if matches!(from, ModelState::Retiring | ModelState::Retired) {
            return self.durable_answer(self.rec.clone());
        }
        let mut planned = self.rec.clone();
        planned.state = ModelState::Retiring;
        planned.pinned = false;
        planned.retire = Some(RetireOrder {
            by: m.by.clone(),
            at_ms: self.sh.now_ms(),
            replace_with: m.replace_with.clone(),
            swaps_asked: Default::default(),
        });
        let then = m
            .replace_with
            .as_ref()
            .map_or(String::new(), |r| format!("; its services move to {r}"));
        let msg = format!(
            "model {} is retiring (asked by {}): it takes no new tasks{then}",
            self.key(),
            m.by
        );
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        if let Err(e) = self.record(CommitSite::ModelState, planned, vec![e]) {
            return Box::pin(async move { Err(e) });
        }
        self.pin_holders();
        self.watch_retiring(ctx);
        self.durable_answer(self.rec.clone())
    }
}

impl ModelVersionActor {
    /// With `replace_with`: every service still on this version that was
    /// not asked yet is asked to swap to it (all services at once; each swap
    /// rolls replica by replica, the swap's own guarantee). The services
    /// asked are recorded first, so a restart does not ask twice; a refusal
    /// (or a swap rolled back later) leaves the service on this version, and
    /// the version `retiring`, listing it: an event says why.
    fn ask_swaps(&mut self, ctx: &mut Context<Self>, users: &[TaskRecord]) {
        let Some(order) = self.rec.retire.clone() else {
            return;
        };
        let Some(to) = order.replace_with.as_deref() else {
            return;
        };
        let Ok(to) = caldera_spec::ModelRef::parse(to, "replace_with") else {
            return;
        };
        let fresh: Vec<String> = services_of(users)
            .into_iter()
            .filter(|s| !order.swaps_asked.contains(s))
            .collect();
        if fresh.is_empty() {
            return;
        }
        let mut planned = self.rec.clone();
        if let Some(o) = planned.retire.as_mut() {
            o.swaps_asked.extend(fresh.iter().cloned());
        }
        let names: Vec<&str> = fresh.iter().map(|s| caldera_spec::local_id(s)).collect();
        let msg = format!(
            "model {} is retiring: services {} asked to swap to {to}",
            self.key(),
            names.join(", ")
        );
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        if self
            .record(CommitSite::ModelState, planned, vec![e])
            .is_err()
        {
            return;
        }
        for service in fresh {
            let Some(h) = self.sh.registry.service(&service) else {
                continue;
            };
            let swap = SwapModel {
                to: to.clone(),
                requested_by: format!("retire:{}", order.by),
                allow_downtime: false,
                max_surge: 1,
            };
            let asked = h.send(swap);
            ctx.spawn(asked.into_actor(self).map(move |res, act, _| {
                let why = match res {
                    Ok(Ok(_)) => return,
                    Ok(Err(e)) => e.to_string(),
                    Err(e) => format!("the service did not answer: {e}"),
                };
                let msg = format!(
                    "model {}: service {} was not swapped ({why}); the version stays retiring while it is used",
                    act.key(),
                    caldera_spec::local_id(&service)
                );
                let e = act.event(None, EventKind::ModelStateChanged, msg);
                let _ = act.record(CommitSite::ModelState, act.rec.clone(), vec![e]);
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_back_off_while_the_users_stay_and_come_back_when_they_change() {
        let mut every = RECHECK;
        let mut waits = Vec::new();
        for _ in 0..6 {
            every = next_look(every, true);
            waits.push(every.as_millis());
        }
        assert_eq!(waits, [1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(next_look(RECHECK_MAX, false), RECHECK);
    }
}
