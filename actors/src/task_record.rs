//! Recording a change of a task's record: plan, record, then act. The TaskActor
//! (one task) and the ServiceActor (a service's own record) both record this way,
//! so the rule lives once: the record and its events go into one batch, and only
//! once it is committed is the plan the record. A failed commit leaves the record
//! as it was, answers `not_recorded`, and stops the actor to be rebuilt from sled:
//! nobody hears of a change that was not recorded.
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::{ActorError, Result};
use crate::protocol::lifecycle::Rebuild;
use crate::shared::Shared;
use crate::supervision::Supervision;
use actix::prelude::*;
use caldera_spec::{Event, EventKind, TaskRecord};

/// Commits `planned` with `events` at `site` for task `id`. Ok: the caller
/// takes `planned` as its record. Err: `sup` has been told to rebuild the actor.
pub(crate) fn commit<A>(
    sh: &Shared,
    sup: &Supervision<A>,
    id: &str,
    site: CommitSite,
    planned: &TaskRecord,
    events: Vec<Event>,
) -> Result<Ticket>
where
    A: Actor<Context = Context<A>> + Handler<Rebuild>,
{
    let mut b = sh.batch();
    b.put_task(planned);
    for e in events {
        b.append_event(e);
    }
    sh.gate.commit(site, b).map_err(|e| {
        let what = format!("task {}'s {site}", caldera_spec::local_id(id));
        sup.fail(format!("{what} could not be recorded: {e}"));
        ActorError::not_recorded(&what, e)
    })
}

/// An event about task `id` as `rec` describes it (its node, if placed).
pub(crate) fn event(
    sh: &Shared,
    id: &str,
    rec: &TaskRecord,
    kind: EventKind,
    msg: String,
) -> Event {
    let mut e = Event::new(sh.now_ms(), kind, msg)
        .task(id)
        .tenant(&rec.tenant);
    if let Some(a) = &rec.allocation {
        e = e.node(&a.node);
    }
    e
}
