//! How a ServiceActor records a change of its own record: plan, record,
//! then act. The record and its events go into one batch; only once it is
//! committed is the plan the record. A failed commit leaves the record as
//! it was, answers `not_recorded`, and stops the actor to be rebuilt from
//! sled: nobody hears of a change that was not recorded.
use super::ServiceActor;
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::Result;
use crate::task::move_to;
use crate::task_record;
use caldera_spec::{Event, EventKind, TaskRecord, TaskState};

impl ServiceActor {
    /// Records `planned` with `events` in one batch at `site`; only then is
    /// it the record.
    pub(crate) fn record(
        &mut self,
        site: CommitSite,
        planned: TaskRecord,
        events: Vec<Event>,
    ) -> Result<Ticket> {
        let t = task_record::commit(&self.sh, &self.sup, self.id(), site, &planned, events)?;
        self.rec = planned;
        Ok(t)
    }

    /// Records one event about the service, its record unchanged.
    pub(crate) fn note(
        &mut self,
        site: CommitSite,
        kind: EventKind,
        msg: String,
    ) -> Result<Ticket> {
        let e = self.event_of(&self.rec, kind, msg);
        self.record(site, self.rec.clone(), vec![e])
    }

    /// Moves to `state`, recorded first.
    pub(crate) fn transition(
        &mut self,
        state: TaskState,
        reason: Option<String>,
    ) -> Result<Ticket> {
        self.transition_with(state, reason, |_| None)
    }

    /// As [`Self::transition`], with one more change to the planned record
    /// made by `also` in the same commit; the event it answers (kind, text)
    /// is recorded after the transition's.
    pub(crate) fn transition_with(
        &mut self,
        state: TaskState,
        reason: Option<String>,
        also: impl FnOnce(&mut TaskRecord) -> Option<(EventKind, String)>,
    ) -> Result<Ticket> {
        let mut planned = self.rec.clone();
        let msg = move_to(&mut planned, state, self.sh.now_ms(), reason);
        let mut events = vec![self.event_of(&planned, EventKind::TaskTransition, msg)];
        if let Some((kind, text)) = also(&mut planned) {
            events.push(self.event_of(&planned, kind, text));
        }
        self.record(CommitSite::TaskTransition, planned, events)
    }

    /// An event about this service as `rec` describes it.
    pub(crate) fn event_of(&self, rec: &TaskRecord, kind: EventKind, msg: String) -> Event {
        task_record::event(&self.sh, self.id(), rec, kind, msg)
    }
}
