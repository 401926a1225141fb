//! One node's weight cache as the replay models it: a capacity in bytes,
//! versions verified or being fetched, how many tasks use each, and when each
//! was last used. Eviction is LRU among verified copies no task uses — the
//! rule the agents follow (a copy in use or being fetched is never evicted).
use std::collections::BTreeMap;

use caldera_scheduling::placement::NodeWeights;

use super::catalogue::Catalogue;

/// A version on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub size: u64,
    pub verified: bool,
    /// Tasks on the node serving it (a fetch counts its task).
    pub users: u32,
    /// Last use, in the replay's arrival order (older is smaller).
    pub last_use: i64,
}

/// See the module comment.
#[derive(Debug, Clone, Default)]
pub struct NodeCache {
    capacity: u64,
    used: u64,
    entries: BTreeMap<usize, Entry>,
}

/// Room could not be made: what is in use or being fetched fills the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

impl NodeCache {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        NodeCache {
            capacity,
            ..NodeCache::default()
        }
    }

    /// The entry of version `v`, if the node holds or fetches it.
    pub fn get(&self, v: usize) -> Option<&Entry> {
        self.entries.get(&v)
    }

    /// Bytes held or being fetched.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Bytes a new version could take: capacity less what may not be evicted.
    pub fn evictable_room(&self) -> u64 {
        let kept: u64 = self
            .entries
            .values()
            .filter(|e| e.users > 0 || !e.verified)
            .map(|e| e.size)
            .sum();
        self.capacity.saturating_sub(kept)
    }

    /// Put a verified, unused copy of `v` in (the state an earlier day left),
    /// if it fits without evicting anything.
    pub fn prefill(&mut self, v: usize, size: u64, last_use: i64) -> bool {
        if self.entries.contains_key(&v) || self.used + size > self.capacity {
            return false;
        }
        self.used += size;
        self.entries.insert(
            v,
            Entry {
                size,
                verified: true,
                users: 0,
                last_use,
            },
        );
        true
    }

    /// A task starts using `v`, which the node holds or fetches.
    pub fn use_held(&mut self, v: usize, now: i64) {
        if let Some(e) = self.entries.get_mut(&v) {
            e.users += 1;
            e.last_use = now;
        }
    }

    /// A task needs `v`, which the node does not hold: evict least recently
    /// used unused copies until it fits, and start a fetch (used by that
    /// task). Returns the evicted versions; nothing changes on `NoRoom`.
    pub fn admit(&mut self, v: usize, size: u64, now: i64) -> Result<Vec<usize>, NoRoom> {
        if self.evictable_room() < size {
            return Err(NoRoom);
        }
        let mut victims: Vec<(i64, usize)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.users == 0 && e.verified)
            .map(|(&k, e)| (e.last_use, k))
            .collect();
        victims.sort_unstable();
        let mut evicted = Vec::new();
        for (_, k) in victims {
            if self.used + size <= self.capacity {
                break;
            }
            if let Some(e) = self.entries.remove(&k) {
                self.used -= e.size;
                evicted.push(k);
            }
        }
        self.used += size;
        self.entries.insert(
            v,
            Entry {
                size,
                verified: false,
                users: 1,
                last_use: now,
            },
        );
        Ok(evicted)
    }

    /// The fetch of `v` finished and checked out.
    pub fn verified(&mut self, v: usize) {
        if let Some(e) = self.entries.get_mut(&v) {
            e.verified = true;
        }
    }

    /// What placement sees of this cache.
    pub fn weights(&self, catalogue: &Catalogue) -> NodeWeights {
        let mut w = NodeWeights {
            capacity_bytes: self.capacity,
            evictable_room_bytes: self.evictable_room(),
            ..NodeWeights::default()
        };
        for (&v, e) in &self.entries {
            let sha = catalogue.get(v).need.sha256.clone();
            if e.verified {
                w.cached.insert(sha);
            } else {
                w.warming.insert(sha);
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_oldest_unused_copy_and_never_one_in_use() {
        let mut c = NodeCache::new(100);
        assert!(c.prefill(0, 40, -3)); // oldest, but about to be used
        assert!(c.prefill(1, 30, -2));
        assert!(c.prefill(2, 30, -1));
        c.use_held(0, 0);
        // 50 bytes needed: 1 (older) then 2 go; 0 is in use and stays.
        assert_eq!(c.admit(3, 50, 1), Ok(vec![1, 2]));
        assert!(c.get(0).is_some() && c.get(3).is_some());
        assert_eq!(c.used(), 90);
        // Everything left is in use or being fetched: no room, nothing lost.
        assert_eq!(c.admit(4, 20, 2), Err(NoRoom));
        assert_eq!(c.used(), 90);
        assert!(c.get(0).is_some() && c.get(3).is_some());
        // A copy being fetched is not evictable either, even once unused.
        assert_eq!(c.evictable_room(), 10);
        c.verified(3);
        assert_eq!(c.evictable_room(), 10, "3 is still used by its task");
    }

    #[test]
    fn the_weights_view_says_what_is_cached_warming_and_evictable() {
        let cat = Catalogue::new(3, 1.0, 1.0, 0.0, 1);
        let mut c = NodeCache::new(100);
        assert!(c.prefill(0, 40, -1));
        assert_eq!(c.admit(1, 30, 0), Ok(vec![]));
        let w = c.weights(&cat);
        assert!(w.cached.contains(&cat.get(0).need.sha256));
        assert!(w.warming.contains(&cat.get(1).need.sha256));
        assert_eq!((w.capacity_bytes, w.evictable_room_bytes), (100, 70));
    }
}
