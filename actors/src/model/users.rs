//! The bookkeeping a hot swap or a release leaves: the replicas that moved
//! off a version are no longer listed as its users. Whether a retiring
//! version can go is decided by [`super::retire::users`], from the task
//! records themselves.
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::protocol::model::TasksLeft;
use actix::prelude::*;
use caldera_spec::EventKind;

impl Handler<TasksLeft> for ModelVersionActor {
    type Result = ();
    /// Drops `tasks` from the version's users, recorded with one event.
    fn handle(&mut self, m: TasksLeft, ctx: &mut Context<Self>) {
        self.users_may_have_left(ctx);
        let mut planned = self.rec.clone();
        let before = planned.tasks.len();
        planned.tasks.retain(|t| !m.tasks.contains(t));
        if planned.tasks.len() == before {
            return;
        }
        let names: Vec<&str> = m.tasks.iter().map(|t| caldera_spec::local_id(t)).collect();
        let msg = format!(
            "model {}: {} no longer use it ({})",
            self.key(),
            names.join(", "),
            m.why
        );
        let e = self.event(None, EventKind::ModelStateChanged, msg);
        // If this cannot be recorded the actor is rebuilt from sled; the list
        // is only bookkeeping (`retire::users` reads what the tasks serve).
        let _ = self.record(CommitSite::ModelState, planned, vec![e]);
    }
}
