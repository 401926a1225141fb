//! A service's replicas: the slots it wants filled, each replica's record
//! and actor created once recorded, the count changed by a request or by
//! the idle inspector, and a replica that ended on its own replaced with
//! backoff. Each replica is an ordinary task with its own TaskActor; the
//! service hears of it only by its messages.
use super::ServiceActor;
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::{ActorError, Result};
use crate::protocol::service::{ReplicaState, Scale, ScaleInIdle};
use crate::protocol::task::Release;
use crate::task::TaskActor;
use actix::prelude::*;
use caldera_spec::{Event, EventKind, TaskRecord, TaskState};
use std::time::Duration;

impl ServiceActor {
    pub(crate) fn desired(&self) -> u32 {
        self.rec
            .desired_replicas
            .or(self.rec.spec.replicas)
            .unwrap_or(1)
    }

    pub(crate) fn replica_id(&self, i: u32) -> String {
        caldera_spec::replica_id(self.id(), i)
    }

    /// Creates the replicas that should exist and do not: each slot's and
    /// each move's replacement (`ReplicaSlots::wanted`).
    pub(crate) fn ensure_replicas(&mut self) {
        for i in self.rec.replica_slots.wanted(self.desired()) {
            let id = self.replica_id(i);
            if self.sh.registry.task(&id).is_some() {
                // A live replica: a service rebuilt from sled learns its
                // state from the replica's record (it may never move again).
                let known = match self.sh.gate.store().task(&id) {
                    Ok(Some(r)) => r.state,
                    _ => TaskState::Queued,
                };
                self.replicas.entry(id).or_insert(known);
                continue;
            }
            // A replica that ran before keeps counting its attempts, so the
            // replacement's allocation id is new (agents ignore a repeated one).
            let earlier_attempts = match self.sh.gate.store().task(&id) {
                Ok(Some(r)) if !r.state.is_terminal() => {
                    self.replicas.insert(id, r.state);
                    continue;
                }
                Err(e) => {
                    tracing::error!(replica = %id, error = %e, "cannot read replica record");
                    continue;
                }
                Ok(Some(r)) => r.attempts,
                Ok(None) => 0,
            };
            let rec = self.replica_record(&id, earlier_attempts);
            let mut b = self.sh.batch();
            b.put_task(&rec);
            b.append_event(self.replica_submitted(&rec));
            let Some(ticket) = self.sh.commit(CommitSite::ReplicaCreate, b) else {
                // No record, no replica: the service is rebuilt from sled and
                // creates the replicas it still lacks then.
                self.sup.fail(format!(
                    "service {}: replica {id} could not be recorded",
                    caldera_spec::local_id(self.id())
                ));
                return;
            };
            self.spawn_replica(rec, ticket);
        }
    }

    /// A new replica's record (not yet recorded).
    pub(crate) fn replica_record(&self, id: &str, earlier_attempts: u32) -> TaskRecord {
        let mut spec = self.rec.spec.clone();
        spec.task_id = id.to_string();
        spec.replicas = None;
        let mut rec = TaskRecord::new(
            spec,
            self.rec.tenant.clone(),
            self.sh.now_ms(),
            self.rec.seq,
        );
        rec.service = Some(self.id().to_string());
        rec.attempts = earlier_attempts;
        rec
    }

    /// The "submitted" event of the new replica `rec`.
    pub(crate) fn replica_submitted(&self, rec: &TaskRecord) -> Event {
        let id = &rec.spec.task_id;
        Event::new(
            self.sh.now_ms(),
            EventKind::TaskSubmitted,
            format!(
                "replica {} of service {}",
                caldera_spec::local_id(id),
                caldera_spec::local_id(self.id())
            ),
        )
        .task(id)
        .tenant(&rec.tenant)
    }

    /// Starts the actor of a replica whose record `ticket` carries.
    pub(crate) fn spawn_replica(&mut self, rec: TaskRecord, ticket: Ticket) {
        let id = rec.spec.task_id.clone();
        let actor = TaskActor::spawn(rec, self.sh.clone(), Some(ticket));
        self.sh.registry.add_task(&id, actor);
        self.replicas.insert(id, TaskState::Queued);
    }

    /// The service is Running while any replica runs.
    pub(crate) fn settle(&mut self) {
        let running = self
            .replicas
            .values()
            .filter(|s| **s == TaskState::Running)
            .count();
        let want = if running > 0 {
            TaskState::Running
        } else {
            TaskState::Queued
        };
        if self.rec.state != want && !self.rec.state.is_terminal() {
            let why = format!("{running} of {} replicas running", self.desired());
            // Not recorded: the rebuild reads sled and settles again.
            let _ = self.transition(want, Some(why));
        }
    }

    /// Sets the replica count, recorded first; then releases the surplus
    /// replicas or creates the missing ones. Not recorded: nothing changes.
    fn scale(&mut self, n: u32, why: &str) -> Result<TaskRecord> {
        let before = self.desired();
        let slots = self.rec.replica_slots.clone();
        let mut planned = self.rec.clone();
        planned.desired_replicas = Some(n);
        // The removed slots' moves go with them: their replacements too.
        let dropped = planned.replica_slots.shrink(n);
        let msg = format!("replicas {before} -> {n}: {why}");
        let e = self.event_of(&planned, EventKind::TaskTransition, msg);
        self.record(CommitSite::ServiceScale, planned, vec![e])?;
        let removed = (n..before).map(|i| slots.index_of(i));
        for index in removed.chain(dropped) {
            let id = self.replica_id(index);
            if let Some(r) = self.sh.registry.task(&id) {
                r.do_send(Release {
                    by: format!("scale-in of {}", caldera_spec::local_id(self.id())),
                });
            }
            self.replicas.remove(&id);
        }
        self.ensure_replicas();
        self.settle();
        Ok(self.rec.clone())
    }
}

impl Handler<ReplicaState> for ServiceActor {
    type Result = ();
    fn handle(&mut self, m: ReplicaState, ctx: &mut Context<Self>) {
        let expected = self.replicas.contains_key(&m.replica);
        if !expected && m.state.is_terminal() {
            return; // released by a scale-in or a move: not to be replaced
        }
        if self.move_progressed(ctx, &m) {
            return self.settle();
        }
        if m.state.is_terminal() {
            // A replica the service still wants ended on its own: replace it,
            // backing off (1 s, 2 s, 4 s ... 60 s) so a crashing image does not spin.
            self.replicas.remove(&m.replica);
            let delay = Duration::from_secs((1u64 << self.replica_restarts.min(6)).min(60));
            self.replica_restarts += 1;
            let _ = self.note(
                CommitSite::TaskEvents,
                EventKind::TaskTransition,
                format!(
                    "replica {} ended ({}); replaced in {}s",
                    caldera_spec::local_id(&m.replica),
                    m.state.as_str(),
                    delay.as_secs()
                ),
            );
            ctx.run_later(delay, |act, _| {
                if !act.rec.state.is_terminal() {
                    act.ensure_replicas();
                    act.settle();
                }
            });
        } else {
            if m.state == TaskState::Running && self.rec.replica_slots.moves.is_empty() {
                // No replacement waits any more: nothing is pending.
                self.rec.pending_reason = None;
            }
            self.replicas.insert(m.replica, m.state);
        }
        self.settle();
    }
}

impl Handler<Scale> for ServiceActor {
    type Result = Result<TaskRecord>;
    fn handle(&mut self, m: Scale, _: &mut Context<Self>) -> Result<TaskRecord> {
        if self.rec.state.is_terminal() {
            return Err(ActorError::Conflict(format!(
                "service {} has ended",
                self.id()
            )));
        }
        self.scale(m.replicas, "scaled by request")
    }
}

impl Handler<ScaleInIdle> for ServiceActor {
    type Result = ();
    fn handle(&mut self, m: ScaleInIdle, _: &mut Context<Self>) {
        let min = self.rec.spec.min_replicas.unwrap_or(1);
        let n = self.desired();
        if n <= min {
            let _ = self.note(
                CommitSite::TaskEvents,
                EventKind::IdleWarning,
                format!(
                    "replica {} idle, but service stays at its minimum of {min} replicas",
                    m.replica
                ),
            );
            return;
        }
        // Scale in by releasing the idle replica itself, then renumber nothing:
        // the highest index is what `scale` removes, so release that one.
        // Not recorded: it stays as it is (logged; the actor is rebuilt).
        let _ = self.scale(
            n - 1,
            &format!(
                "scale-in: {} ({})",
                caldera_spec::local_id(&m.replica),
                m.reason
            ),
        );
    }
}

/// Parses a replicas body `{"replicas": N}`.
pub fn parse_replicas(body: &[u8]) -> Result<u32> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        replicas: u32,
    }
    let b: Body = caldera_spec::validate::parse_json(body)?;
    if b.replicas == 0 || b.replicas > caldera_spec::validate::MAX_REPLICAS {
        return Err(ActorError::Invalid(caldera_spec::SpecError::new(
            caldera_spec::SpecErrorKind::OutOfRange,
            "replicas",
            format!(
                "replicas must be 1..={}",
                caldera_spec::validate::MAX_REPLICAS
            ),
        )));
    }
    Ok(b.replicas)
}

#[cfg(test)]
mod tests {
    use super::parse_replicas;

    #[test]
    fn a_replicas_body_is_a_whole_number_from_1_to_the_maximum() {
        let max = caldera_spec::validate::MAX_REPLICAS;
        assert_eq!(parse_replicas(br#"{"replicas":3}"#).unwrap(), 3);
        assert_eq!(
            parse_replicas(format!(r#"{{"replicas":{max}}}"#).as_bytes()).unwrap(),
            max
        );
        let rows: &[(&str, &str)] = &[
            (r#"{"replicas":0}"#, "replicas"),
            (r#"{"replicas":100000}"#, "replicas"),
            (r#"{"replicas":-1}"#, "replicas"),
            (r#"{"replicas":2,"extra":1}"#, "extra"),
            (r#"{}"#, "replicas"),
        ];
        for (body, field) in rows {
            let e = parse_replicas(body.as_bytes()).unwrap_err();
            assert_eq!(e.field(), Some(*field), "{body}: {e}");
        }
        assert!(parse_replicas(b"not json").is_err());
    }
}
