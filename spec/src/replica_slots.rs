//! Which replica serves each slot of an inference service, and the moves
//! under way (a drain moves a replica make-before-break).
//!
//! A service has `desired` slots `0..desired`. Slot `i` is served by replica
//! index `i` (`"{service}.r{i}"`) until a move gives it another. A move off a
//! drained node starts a *surge* replica with a fresh index, counted from
//! [`MAX_REPLICAS`] upward, so it can never meet a slot's own index (a slot
//! is always below `MAX_REPLICAS`) nor an earlier surge replica (the counter
//! only grows and is recorded with the move). Once the surge replica runs,
//! the slot is its and the old replica is released.
use crate::limits::MAX_REPLICAS;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A service's slots that are not served by their own index, its moves
/// under way and the replicas those moves retired. Recorded in the
/// service's task record, so a control plane restarted mid-move knows which
/// replica is being replaced by which.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSlots {
    /// Slot -> the index of the replica serving it, where not the slot's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub serving: BTreeMap<u32, u32>,
    /// Moves started and not yet done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<ReplicaMove>,
    /// The index the next surge replica takes (`MAX_REPLICAS` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_surge: Option<u32>,
    /// Replicas a finished move released; released again by a service
    /// rebuilt before their release was recorded, dropped once ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retiring: Vec<u32>,
}

/// One replica being replaced: `from` keeps serving `slot` until `to` runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaMove {
    pub slot: u32,
    pub from: u32,
    pub to: u32,
    /// The drained node `from` leaves.
    pub node: String,
    pub since_ms: u64,
}

impl ReplicaSlots {
    pub fn is_empty(&self) -> bool {
        self.serving.is_empty()
            && self.moves.is_empty()
            && self.next_surge.is_none()
            && self.retiring.is_empty()
    }

    /// The index of the replica serving `slot`.
    pub fn index_of(&self, slot: u32) -> u32 {
        self.serving.get(&slot).copied().unwrap_or(slot)
    }

    /// The slot `index` serves among `0..desired`, if it serves one.
    pub fn slot_of(&self, index: u32, desired: u32) -> Option<u32> {
        (0..desired).find(|s| self.index_of(*s) == index)
    }

    /// The move whose replacement is `index`.
    pub fn move_to(&self, index: u32) -> Option<&ReplicaMove> {
        self.moves.iter().find(|m| m.to == index)
    }

    /// The move that replaces `index`.
    pub fn move_from(&self, index: u32) -> Option<&ReplicaMove> {
        self.moves.iter().find(|m| m.from == index)
    }

    /// Every index the service wants live among `0..desired`: each slot's
    /// replica and each move's replacement.
    pub fn wanted(&self, desired: u32) -> Vec<u32> {
        let mut v: Vec<u32> = (0..desired).map(|s| self.index_of(s)).collect();
        v.extend(self.moves.iter().filter(|m| m.slot < desired).map(|m| m.to));
        v
    }

    /// Takes the next surge index.
    pub fn take_surge(&mut self) -> u32 {
        let i = self.next_surge.unwrap_or(MAX_REPLICAS).max(MAX_REPLICAS);
        self.next_surge = Some(i.saturating_add(1));
        i
    }

    /// Ends the move to `to`: its slot is served by `to`, and `from` retires.
    /// Answers the move, `None` when there is none.
    pub fn finish(&mut self, to: u32) -> Option<ReplicaMove> {
        let at = self.moves.iter().position(|m| m.to == to)?;
        let m = self.moves.remove(at);
        if m.to == m.slot {
            self.serving.remove(&m.slot);
        } else {
            self.serving.insert(m.slot, m.to);
        }
        if !self.retiring.contains(&m.from) {
            self.retiring.push(m.from);
        }
        Some(m)
    }

    /// Forgets slots `n..` (a scale-in): their serving entries and moves.
    /// Answers the replacements dropped, to be released.
    pub fn shrink(&mut self, n: u32) -> Vec<u32> {
        self.serving.retain(|s, _| *s < n);
        let dropped = self
            .moves
            .iter()
            .filter(|m| m.slot >= n)
            .map(|m| m.to)
            .collect();
        self.moves.retain(|m| m.slot < n);
        dropped
    }
}

/// The index in a replica id of `service` (`"{service}.r{i}"`), `None` for
/// an id of another form or service.
pub fn replica_index(service: &str, replica: &str) -> Option<u32> {
    replica
        .strip_prefix(service)?
        .strip_prefix(".r")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moving(slot: u32, from: u32, to: u32) -> ReplicaMove {
        ReplicaMove {
            slot,
            from,
            to,
            node: "n".into(),
            since_ms: 0,
        }
    }

    #[test]
    fn surge_indexes_never_meet_a_slot_nor_each_other() {
        let mut s = ReplicaSlots::default();
        let a = s.take_surge();
        let b = s.take_surge();
        assert_eq!((a, b), (MAX_REPLICAS, MAX_REPLICAS + 1));
        // The counter survives a round trip through the record.
        let back: ReplicaSlots = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.clone().take_surge(), MAX_REPLICAS + 2);
        assert!(ReplicaSlots::default().is_empty() && !back.is_empty());
    }

    #[test]
    fn a_finished_move_gives_the_slot_to_the_replacement_and_retires_the_old() {
        let mut s = ReplicaSlots::default();
        s.moves.push(moving(1, 1, 1000));
        assert_eq!(s.wanted(2), vec![0, 1, 1000]);
        assert_eq!(s.move_from(1).map(|m| m.to), Some(1000));
        assert_eq!(s.finish(1000).map(|m| m.from), Some(1));
        assert_eq!((s.index_of(1), s.slot_of(1000, 2)), (1000, Some(1)));
        assert_eq!(s.slot_of(1, 2), None);
        assert_eq!(s.retiring, vec![1]);
        assert_eq!(s.wanted(2), vec![0, 1000]);
        assert!(s.finish(1000).is_none());
    }

    #[test]
    fn a_scale_in_drops_the_moves_of_the_slots_it_removes() {
        let mut s = ReplicaSlots::default();
        s.serving.insert(2, 1001);
        s.moves.push(moving(0, 0, 1002));
        s.moves.push(moving(3, 3, 1003));
        assert_eq!(s.shrink(2), vec![1003]);
        assert!(s.serving.is_empty());
        assert_eq!(s.wanted(2), vec![0, 1, 1002]);
    }

    #[test]
    fn replica_indexes_are_read_back_from_ids() {
        assert_eq!(replica_index("t/svc", "t/svc.r1000"), Some(1000));
        assert_eq!(replica_index("t/svc", "t/svc.r0"), Some(0));
        for id in ["t/svc2.r1", "t/svc.r", "t/svc.rx", "t/svc.r1.2", "u/svc.r1"] {
            assert_eq!(replica_index("t/svc", id), None, "{id}");
        }
    }
}
