//! Model versions: one supervised [`ModelVersionActor`] per registered
//! version. It owns the version's record (sled `v/`): its life state, its
//! pin, the tasks that use it, and every node's copy — and so the staggered,
//! peer-to-peer warmup of that version (`sources.rs` is the pure rule,
//! `warmup.rs` carries it out). Every change is recorded, with its event,
//! before any node hears of it; a failed commit changes nothing and the
//! actor is rebuilt from sled, like every entity actor.
pub mod backoff;
pub mod budget;
pub mod fleet;
pub mod mount;
mod news;
mod operations;
pub mod origins;
pub mod register;
pub mod retire;
mod retry;
pub mod sources;
#[cfg(test)]
mod tests;
pub mod users;
pub mod view;
mod warmup;

use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::{ActorError, Result};
use crate::protocol::lifecycle::Observe;
use crate::protocol::model::{OriginFreed, VersionSnapshot};
use crate::protocol::ModelHandle;
use crate::shared::Shared;
use crate::supervision::{reread, Reread, Supervision};
use actix::prelude::*;
use caldera_spec::{Event, EventKind, ModelVersionRecord};
use std::sync::Arc;

pub struct ModelVersionActor {
    rec: ModelVersionRecord,
    sh: Arc<Shared>,
    sup: Supervision<ModelVersionActor>,
    /// The pending check of a retiring version (one at a time).
    retire_check: Option<SpawnHandle>,
    /// How long until that check: [`retire::RECHECK`], doubled up to
    /// [`retire::RECHECK_MAX`] while the users stay the same.
    retire_every: std::time::Duration,
    /// The users the last check found (task keys), to see them change.
    retire_seen: Vec<String>,
    /// The timer of the next due retry of a failed read (`retry.rs`).
    retry_timer: Option<SpawnHandle>,
    /// Bytes each node's current read began at, to tell a failure after
    /// progress from one without (memory only: after a rebuild a failure
    /// counts as one without).
    read_began: std::collections::HashMap<String, u64>,
}

impl ModelVersionActor {
    pub fn new(rec: ModelVersionRecord, sh: Arc<Shared>) -> Self {
        ModelVersionActor {
            rec,
            sh,
            sup: Supervision::default(),
            retire_check: None,
            retire_every: retire::RECHECK,
            retire_seen: Vec::new(),
            retry_timer: None,
            read_began: Default::default(),
        }
    }

    /// Starts a version's actor under supervision and returns its handle.
    pub fn spawn(rec: ModelVersionRecord, sh: Arc<Shared>) -> ModelHandle {
        ModelHandle::new(actix::Supervisor::start(move |_| {
            ModelVersionActor::new(rec, sh)
        }))
    }

    /// `name:version`.
    fn key(&self) -> String {
        self.rec.key()
    }

    /// An event about this version (and `node`, when it is about one).
    /// A tenant's own version: the event is that tenant's (its `/v1/events`
    /// and webhooks), as its registration's is.
    fn event(&self, node: Option<&str>, kind: EventKind, msg: String) -> Event {
        let mut e = Event::new(self.sh.now_ms(), kind, msg);
        if let Some(t) = &self.rec.owner {
            e = e.tenant(t);
        }
        match node {
            Some(n) => e.node(n),
            None => e,
        }
    }

    /// Records `planned` with `events` in one batch at `site`; only then is
    /// it the record. The registry-wide origin budget follows the record;
    /// a slot it frees is offered to the other versions. A failed commit
    /// leaves the record (and the budget) as they were and rebuilds the actor.
    fn record(
        &mut self,
        site: CommitSite,
        planned: ModelVersionRecord,
        events: Vec<Event>,
    ) -> Result<Ticket> {
        let mut b = self.sh.batch();
        b.put_model_version(&planned);
        for e in events {
            b.append_event(e);
        }
        match self.sh.gate.commit(site, b) {
            Ok(t) => {
                self.rec = planned;
                self.sync_budget();
                Ok(t)
            }
            Err(e) => {
                self.sync_budget();
                let what = format!("model {}'s {site}", self.key());
                self.sup.fail(format!("{what} could not be recorded: {e}"));
                Err(ActorError::not_recorded(&what, e))
            }
        }
    }

    /// Tells the budget how many origin reads this version runs as recorded;
    /// when that frees a slot, the other versions may use it.
    fn sync_budget(&self) {
        let key = self.key();
        let reads = sources::origin_reads(&self.rec.nodes);
        if self.sh.origin_budget.set(&key, reads) {
            for (k, m) in self.sh.registry.models() {
                if k != key {
                    m.do_send(OriginFreed);
                }
            }
        }
    }
}

impl Actor for ModelVersionActor {
    type Context = Context<Self>;

    fn started(&mut self, _ctx: &mut Context<Self>) {
        self.sup.started(_ctx);
        // Origin reads recorded before a restart still count.
        self.sync_budget();
        // A retire recorded before a restart carries on.
        self.retire_check = None;
        self.watch_retiring(_ctx);
        // Backoffs recorded before a restart run out as recorded.
        self.retry_timer = None;
        self.arm_retries(_ctx);
    }
}

impl actix::Supervised for ModelVersionActor {
    /// The record is read back from sled: a change whose commit failed is
    /// gone from memory too (progress bytes, never recorded, come back with
    /// the next reports).
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.sup.restarted("model");
        let key = self.key();
        let read = self.sh.gate.store().model_version(&key);
        if let Reread::Found(r) = reread("model", &key, read) {
            self.rec = r;
        }
    }
}

crate::supervision::rebuild_on_request!(ModelVersionActor);

impl Handler<Observe> for ModelVersionActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.sup
                .observe("model", &self.key(), self.rec.state.as_str()),
        )
    }
}

impl Handler<VersionSnapshot> for ModelVersionActor {
    type Result = MessageResult<VersionSnapshot>;
    fn handle(&mut self, _: VersionSnapshot, _: &mut Context<Self>) -> Self::Result {
        let reads = sources::origin_reads(&self.rec.nodes);
        MessageResult((self.rec.clone(), reads))
    }
}
