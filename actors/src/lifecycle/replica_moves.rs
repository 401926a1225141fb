//! The rules of moving a service replica off a drained node, make-before-
//! break, so a planned stop never leaves the service a replica short. Pure: the service's recorded slots, the
//! replica's state and a few counts in; what to do out. The
//! ServiceActor carries the answer out (`service/moves.rs`).
//!
//! A running replica on a drained node is not stopped: the service starts a
//! surge replica with a fresh index (`ReplicaSlots::take_surge`), records
//! the move, and releases the old replica only once the replacement runs.
//! When the replacement finds no room, the old one is stopped early only
//! when the service keeps `min_replicas` running without it — Kubernetes'
//! PodDisruptionBudget semantics: a voluntary disruption never takes a
//! service below its minimum. Otherwise the old replica keeps serving, the
//! drain waits, and the service's pending reason says why, until room
//! appears (an uncordon, a node joining, work ending) and the move completes.
use caldera_spec::{ReplicaMove, ReplicaSlots, TaskState};

/// What a drain of replica `index` means for its service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDrained {
    /// Start the replacement `mv.to` with the service's slots `planned`
    /// (recorded with the replacement's record, in one batch, first).
    Start {
        planned: ReplicaSlots,
        mv: ReplicaMove,
    },
    /// A move of this replica is under way already: it keeps running.
    Moving,
    /// Not a move: the replica drains as any task does (stopped, then
    /// placed again), because there is nothing running to keep answering.
    AsTask(&'static str),
}

/// The replica `index` of a service with `desired` slots runs on the
/// drained `node`.
pub fn on_drained(
    slots: &ReplicaSlots,
    desired: u32,
    index: u32,
    state: TaskState,
    node: &str,
    now_ms: u64,
) -> OnDrained {
    if slots.move_from(index).is_some() {
        return OnDrained::Moving;
    }
    if slots.move_to(index).is_some() {
        return OnDrained::AsTask("a replacement not serving yet: it is placed again");
    }
    let Some(slot) = slots.slot_of(index, desired) else {
        return OnDrained::AsTask("not one of the service's replicas");
    };
    if state != TaskState::Running {
        return OnDrained::AsTask("not running yet: nothing to keep answering");
    }
    let mut planned = slots.clone();
    let mv = ReplicaMove {
        slot,
        from: index,
        to: planned.take_surge(),
        node: node.to_string(),
        since_ms: now_ms,
    };
    planned.moves.push(mv.clone());
    OnDrained::Start { planned, mv }
}

/// What a replica's new state means for the move it is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The replacement `to` runs: once it has run `scheduling.replica-min-ready-ms`,
    /// the move finishes and the old replica is released.
    Runs { to: u32 },
    /// The old replica serves no more (ended, or stopped and queued again:
    /// its agent's drain timed out, its node was lost): the replacement
    /// `to` takes the slot now, and the old one is released, not placed.
    OldGone { to: u32 },
    /// Nothing for a move.
    None,
}

/// Replica `index` of a service with `slots` is now in `state`.
pub fn on_state(slots: &ReplicaSlots, index: u32, state: TaskState) -> Progress {
    if state == TaskState::Running {
        if let Some(m) = slots.move_to(index) {
            return Progress::Runs { to: m.to };
        }
    }
    if state.is_terminal() || state == TaskState::Queued {
        if let Some(m) = slots.move_from(index) {
            return Progress::OldGone { to: m.to };
        }
    }
    Progress::None
}

/// The replacement of a move waits for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRoom {
    /// Without the old replica the service would run fewer than its
    /// minimum: the old one keeps serving until the replacement runs.
    KeepOld,
    /// The service keeps its minimum without the old replica: it is
    /// stopped now, so the drain completes; the replacement stays queued.
    StopOld,
}

/// `others_running`: the service's running replicas besides the one moving.
pub fn without_room(others_running: usize, min_replicas: u32) -> NoRoom {
    if others_running >= min_replicas.max(1) as usize {
        NoRoom::StopOld
    } else {
        NoRoom::KeepOld
    }
}

/// What the service's pending reason says while a replacement waits.
pub fn waiting_reason(old: &str, node: &str, new: &str, why: &str, decided: NoRoom) -> String {
    match decided {
        NoRoom::KeepOld => format!(
            "replica {old} on drained node {node} keeps serving until its replacement {new} runs (never below min_replicas); {new} waits for room: {why}"
        ),
        NoRoom::StopOld => format!(
            "replica {old} on drained node {node} stopped (the service keeps min_replicas without it); its replacement {new} waits for room: {why}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::validate::MAX_REPLICAS;

    fn started(o: OnDrained) -> (ReplicaSlots, ReplicaMove) {
        match o {
            OnDrained::Start { planned, mv } => (planned, mv),
            other => panic!("expected a start, got {other:?}"),
        }
    }

    #[test]
    fn a_running_replica_on_a_drained_node_gets_a_surge_replacement_first() {
        let s = ReplicaSlots::default();
        let (planned, mv) = started(on_drained(&s, 2, 1, TaskState::Running, "n1", 7));
        assert_eq!((mv.slot, mv.from, mv.to), (1, 1, MAX_REPLICAS));
        assert_eq!((mv.node.as_str(), mv.since_ms), ("n1", 7));
        assert_eq!(planned.moves, vec![mv.clone()]);
        // The old one still serves its slot until the replacement runs.
        assert_eq!(planned.index_of(1), 1);
        // Drained again (a second drain, an agent's after an operator's): nothing new.
        assert_eq!(
            on_drained(&planned, 2, 1, TaskState::Running, "n1", 9),
            OnDrained::Moving
        );
        // The next move takes the next index: ids never collide.
        let (_, second) = started(on_drained(&planned, 2, 0, TaskState::Running, "n1", 9));
        assert_eq!(second.to, MAX_REPLICAS + 1);
    }

    #[test]
    fn what_is_not_a_running_member_drains_as_a_task() {
        let s = ReplicaSlots::default();
        let (planned, mv) = started(on_drained(&s, 1, 0, TaskState::Running, "n1", 0));
        let rows: &[(&ReplicaSlots, u32, u32, TaskState)] = &[
            // The replacement itself landed on a node drained since.
            (&planned, 1, mv.to, TaskState::Running),
            // Scaled in meanwhile: index 3 serves no slot of a 2-replica service.
            (&s, 2, 3, TaskState::Running),
            // Not running yet: nothing answers, so nothing to keep up.
            (&s, 2, 1, TaskState::Scheduled),
            (&s, 2, 1, TaskState::Queued),
        ];
        for (slots, desired, index, state) in rows {
            let o = on_drained(slots, *desired, *index, *state, "n1", 0);
            assert!(
                matches!(o, OnDrained::AsTask(_)),
                "{index} {state:?}: {o:?}"
            );
        }
    }

    #[test]
    fn a_move_finishes_when_its_replacement_runs_or_its_old_replica_stops_serving() {
        let (slots, mv) = started(on_drained(
            &ReplicaSlots::default(),
            1,
            0,
            TaskState::Running,
            "n1",
            0,
        ));
        let to = mv.to;
        let rows = [
            (to, TaskState::Running, Progress::Runs { to }),
            (to, TaskState::Scheduled, Progress::None),
            // A replacement that failed is replaced; the old one keeps serving.
            (to, TaskState::Failed, Progress::None),
            (0, TaskState::Queued, Progress::OldGone { to }),
            (0, TaskState::Failed, Progress::OldGone { to }),
            (0, TaskState::Released, Progress::OldGone { to }),
            (0, TaskState::Running, Progress::None),
            (7, TaskState::Running, Progress::None),
        ];
        for (index, state, want) in rows {
            assert_eq!(on_state(&slots, index, state), want, "{index} {state:?}");
        }
    }

    #[test]
    fn without_room_the_old_replica_stops_only_if_the_minimum_still_runs() {
        // (others running, min_replicas, decision)
        let rows = [
            (0, 1, NoRoom::KeepOld), // a 1-replica service never goes dark
            (0, 0, NoRoom::KeepOld), // a minimum of 0 still keeps one answering
            (1, 1, NoRoom::StopOld),
            (1, 2, NoRoom::KeepOld),
            (2, 2, NoRoom::StopOld),
        ];
        for (others, min, want) in rows {
            assert_eq!(
                without_room(others, min),
                want,
                "{others} others, min {min}"
            );
        }
        let r = waiting_reason(
            "svc.r0",
            "n1",
            "svc.r1000",
            "1 node cordoned",
            NoRoom::KeepOld,
        );
        assert!(
            r.contains("keeps serving") && r.contains("1 node cordoned"),
            "{r}"
        );
    }
}
