//! A service moving a replica off a drained node, make-before-break. The
//! rules are `lifecycle/replica_moves.rs`; this file
//! carries them out, persist before act:
//!
//! 1. a running replica on a drained node asks its service (`ReplicaDrained`);
//!    the service records the move (slot, old index, surge index) with the
//!    replacement's record in one batch at `replica_move`, then starts it;
//! 2. once the replacement reports `running`, the service records the slot
//!    as the replacement's (the old index retiring) and only then releases
//!    the old replica: a planned stop, no retry spent;
//! 3. while the replacement finds no room, the service's pending reason and
//!    one event say so, and the old replica keeps serving unless the service
//!    keeps `min_replicas` running without it.
//!
//! A control plane restarted mid-move reads the move from the service's
//! record: the replacement exists (its record was in the move's batch), a
//! replacement already running finishes the move, and a retired replica
//! whose release was not recorded is released again (`resume_moves`).
use super::ServiceActor;
use crate::commit_site::CommitSite;
use crate::lifecycle::replica_moves::{
    on_drained, on_state, waiting_reason, without_room, NoRoom, OnDrained, Progress,
};
use crate::protocol::service::{ReplicaDrained, ReplicaPending, ReplicaState};
use crate::protocol::task::Release;
use actix::prelude::*;
use caldera_spec::{local_id, replica_index, EventKind, ReplicaMove, ReplicaSlots, TaskState};
use std::time::Duration;

impl ServiceActor {
    /// Records the move with its replacement's record, in one batch, then
    /// starts the replacement. Not recorded: nothing moved, the service is
    /// rebuilt, and the replica drains as a task (answers false).
    fn start_move(&mut self, planned: ReplicaSlots, mv: &ReplicaMove) -> bool {
        let (from, to) = (self.replica_id(mv.from), self.replica_id(mv.to));
        let replacement = self.replica_record(&to, 0);
        let mut service = self.rec.clone();
        service.replica_slots = planned;
        let msg = format!(
            "replica {} on drained node {} moves make-before-break: its replacement {} starts first, and {} keeps serving until it runs",
            local_id(&from),
            mv.node,
            local_id(&to),
            local_id(&from)
        );
        let e = self
            .event_of(&service, EventKind::ReplicaMoved, msg)
            .node(&mv.node);
        self.start_replacement(service, replacement, e).is_some()
    }

    /// Records `service` (a move in its slots) with the move's
    /// `replacement` and `event`, in one batch, then starts the replacement.
    /// Shared by a drain's move and a swap's surge replica. `None`: nothing
    /// was recorded, the service is rebuilt.
    pub(super) fn start_replacement(
        &mut self,
        service: caldera_spec::TaskRecord,
        replacement: caldera_spec::TaskRecord,
        event: caldera_spec::Event,
    ) -> Option<crate::durability::Ticket> {
        let mut b = self.sh.batch();
        b.put_task(&service);
        b.put_task(&replacement);
        b.append_event(event);
        b.append_event(self.replica_submitted(&replacement));
        let Some(ticket) = self.sh.commit(CommitSite::ReplicaMove, b) else {
            self.sup.fail(format!(
                "service {}: the replacement {} could not be recorded",
                local_id(self.id()),
                local_id(&replacement.spec.task_id)
            ));
            return None;
        };
        self.rec = service;
        self.spawn_replica(replacement, ticket);
        Some(ticket)
    }

    /// Records the end of the move to `to` (its slot is `to`'s, the old
    /// index retiring), then releases the old replica. Not recorded: nothing
    /// changes, the service is rebuilt and `resume_moves` tries again.
    fn finish_move(&mut self, to: u32, message: String) -> bool {
        let Some(mv) = self.rec.replica_slots.move_to(to).cloned() else {
            return false;
        };
        let by = format!(
            "moved off drained node {}: replacement {} runs (planned, no retry spent)",
            mv.node,
            local_id(&self.replica_id(to))
        );
        let e = self
            .event_of(&self.rec, EventKind::ReplicaMoved, message)
            .node(&mv.node);
        self.finish_move_with(to, self.rec.clone(), e, by)
    }

    /// Records `planned` (the service as it is to be) with the move to `to`
    /// finished in it, and `event`, then releases the old replica `by`.
    /// Shared by a drain's move and a swap's surge replica; a move already
    /// finished (its old replica stopped serving first) only records.
    pub(super) fn finish_move_with(
        &mut self,
        to: u32,
        mut planned: caldera_spec::TaskRecord,
        event: caldera_spec::Event,
        by: String,
    ) -> bool {
        let finished = planned.replica_slots.finish(to);
        let store = self.sh.gate.store();
        let from = finished.as_ref().map(|m| m.from);
        planned.replica_slots.retiring.retain(|i| {
            Some(*i) == from
                || !matches!(store.task(&caldera_spec::replica_id(&planned.spec.task_id, *i)),
                    Ok(Some(r)) if r.state.is_terminal())
        });
        planned.pending_reason = None;
        if self
            .record(CommitSite::ReplicaMove, planned, vec![event])
            .is_err()
        {
            return false;
        }
        self.moves_noted.remove(&to);
        if let Some(from) = from {
            self.retire(from, by);
        }
        true
    }

    /// Releases replica `index`, which no slot wants any more.
    pub(super) fn retire(&mut self, index: u32, by: String) {
        let id = self.replica_id(index);
        self.replicas.remove(&id);
        if let Some(r) = self.sh.registry.task(&id) {
            r.do_send(Release { by });
        }
    }

    /// After a boot or a rebuild: releases retired replicas still alive and
    /// finishes the moves whose replacement runs, or whose old replica ended.
    pub(crate) fn resume_moves(&mut self, ctx: &mut Context<Self>) {
        let slots = self.rec.replica_slots.clone();
        let sh = self.sh.clone();
        let state = |id: &str| match sh.gate.store().task(id) {
            Ok(Some(r)) => Some(r.state),
            Ok(None) => None,
            // Unreadable: taken as still serving, so nothing changes on it.
            Err(_) => Some(TaskState::Running),
        };
        let live = |id: &str| state(id).is_some_and(|s| !s.is_terminal());
        // A queued or ended old replica serves no more.
        let serving = |id: &str| live(id) && state(id) != Some(TaskState::Queued);
        for index in &slots.retiring {
            let id = self.replica_id(*index);
            if live(&id) {
                self.retire(*index, "retired by a finished move".to_string());
            }
        }
        for mv in &slots.moves {
            let (from, to) = (self.replica_id(mv.from), self.replica_id(mv.to));
            if self.replicas.get(&to) == Some(&TaskState::Running) {
                // Running since before the restart, perhaps not for long:
                // it gets the whole `replica_min_ready_ms` again.
                let wait = Duration::from_millis(self.sh.config.scheduling.replica_min_ready_ms);
                self.finish_when_ready(ctx, mv.to, wait);
            } else if !serving(&from) {
                let msg = format!(
                    "replica {} on drained node {} stopped serving meanwhile; {} takes its slot",
                    local_id(&from),
                    mv.node,
                    local_id(&to)
                );
                self.finish_move(mv.to, msg);
            }
        }
    }

    /// Finishes the move to `to` once its replacement has run for `wait`
    /// (`replica_min_ready_ms`), if it still runs and the move is still
    /// recorded: a replacement that ended meanwhile is replaced, and the old
    /// replica keeps serving.
    fn finish_when_ready(&mut self, ctx: &mut Context<Self>, to: u32, wait: Duration) {
        if self.is_swap_surge(to) {
            return; // a swap's surge replica: the swap finishes it once ready
        }
        ctx.run_later(wait, move |act, _| {
            let id = act.replica_id(to);
            let Some(mv) = act.rec.replica_slots.move_to(to).cloned() else {
                return;
            };
            if act.replicas.get(&id) != Some(&TaskState::Running) {
                return;
            }
            let msg = format!(
                "replica {} runs (for {} ms); {} on drained node {} is stopped now (planned, no retry spent): make-before-break done",
                local_id(&id),
                wait.as_millis(),
                local_id(&act.replica_id(mv.from)),
                mv.node
            );
            act.finish_move(to, msg);
            act.settle();
        });
    }

    /// A replica's new state that moves a move on: its replacement runs
    /// (finish: the old one stops), or its old replica stopped serving by
    /// itself (finish: the replacement takes the slot). True when it did.
    pub(crate) fn move_progressed(&mut self, ctx: &mut Context<Self>, m: &ReplicaState) -> bool {
        let Some(index) = replica_index(self.id(), &m.replica) else {
            return false;
        };
        match on_state(&self.rec.replica_slots, index, m.state) {
            Progress::None => false,
            Progress::Runs { to } => {
                self.replicas.insert(m.replica.clone(), m.state);
                let wait = Duration::from_millis(self.sh.config.scheduling.replica_min_ready_ms);
                self.finish_when_ready(ctx, to, wait);
                true
            }
            Progress::OldGone { to } => {
                self.replicas.remove(&m.replica);
                let msg = format!(
                    "replica {} on a drained node stopped serving ({}) before its replacement ran; {} takes its slot",
                    local_id(&m.replica),
                    m.state.as_str(),
                    local_id(&self.replica_id(to))
                );
                self.finish_move(to, msg)
            }
        }
    }
}

impl Handler<ReplicaDrained> for ServiceActor {
    type Result = bool;
    /// True: the service moves the replica make-before-break (or is doing
    /// so already); false: the replica drains as any task.
    fn handle(&mut self, m: ReplicaDrained, _: &mut Context<Self>) -> bool {
        if self.rec.state.is_terminal() {
            return false;
        }
        let Some(index) = replica_index(self.id(), &m.replica) else {
            return false;
        };
        let state = self
            .replicas
            .get(&m.replica)
            .copied()
            .unwrap_or(TaskState::Queued);
        let now = self.sh.now_ms();
        let slots = &self.rec.replica_slots;
        match on_drained(slots, self.desired(), index, state, &m.node, now) {
            OnDrained::Moving => true,
            OnDrained::AsTask(why) => {
                tracing::info!(replica = %m.replica, why, "drained as a task");
                false
            }
            OnDrained::Start { planned, mv } => self.start_move(planned, &mv),
        }
    }
}

impl Handler<ReplicaPending> for ServiceActor {
    type Result = ();
    /// A move's replacement finds no room: say so, once as an event and in
    /// the pending reason, and stop the old replica early only when the
    /// service keeps its minimum without it.
    fn handle(&mut self, m: ReplicaPending, _: &mut Context<Self>) {
        let Some(index) = replica_index(self.id(), &m.replica) else {
            return;
        };
        let Some(mv) = self.rec.replica_slots.move_to(index).cloned() else {
            return;
        };
        if self.is_swap_surge(index) {
            let why = format!(
                "surge replica {} cannot be placed: {}",
                local_id(&m.replica),
                m.reason
            );
            self.roll_back_surge(why);
            return;
        }
        let from = self.replica_id(mv.from);
        let others = self
            .replicas
            .iter()
            .filter(|(id, s)| **s == TaskState::Running && **id != from)
            .count();
        let decided = without_room(others, self.rec.spec.min_replicas.unwrap_or(1));
        let reason = waiting_reason(
            local_id(&from),
            &mv.node,
            local_id(&m.replica),
            &m.reason,
            decided,
        );
        if decided == NoRoom::StopOld {
            if self.finish_move(mv.to, reason.clone()) {
                self.rec.pending_reason = Some(reason);
            }
            return;
        }
        self.rec.pending_reason = Some(reason.clone());
        if self.moves_noted.insert(mv.to) {
            // An event on its own: lost if not recorded, nothing else is.
            let e = self.event_of(&self.rec, EventKind::ReplicaMoved, reason);
            self.sh.record(e.node(&mv.node));
        }
    }
}
