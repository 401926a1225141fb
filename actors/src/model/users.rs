//! Who uses a version now, and the bookkeeping a hot swap leaves: the
//! replicas that moved off a version are no longer its users. The retire
//! control message asks [`users_of`] whether a retiring version can go.
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::errors::Result;
use crate::protocol::model::TasksLeft;
use actix::prelude::*;
use caldera_spec::{EventKind, TaskRecord};
use caldera_storage::Store;

/// One live replica (or task) serving a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUser {
    /// Its key (`tenant/svc.r0`).
    pub task: String,
    /// Its service's key, for a replica.
    pub service: Option<String>,
    pub tenant: String,
}

/// Every live task whose running process serves `model` (`name:version`):
/// what it serves (`serving_model`, as its node last reported), not what
/// it was submitted with, so a swapped service counts for its new version.
pub fn users_of(store: &Store, model: &str) -> Result<Vec<ModelUser>> {
    let mut out = Vec::new();
    for rec in store.tasks() {
        let rec: TaskRecord = rec?;
        if rec.state.is_terminal() || rec.serving_model.as_deref() != Some(model) {
            continue;
        }
        out.push(ModelUser {
            task: rec.spec.task_id.clone(),
            service: rec.service.clone(),
            tenant: rec.tenant.clone(),
        });
    }
    Ok(out)
}

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
        // Not recorded: the actor is rebuilt from sled, and the list is
        // only bookkeeping (`users_of` reads what replicas serve).
        let _ = self.record(CommitSite::ModelState, planned, vec![e]);
    }
}
