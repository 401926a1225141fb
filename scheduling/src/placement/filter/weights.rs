//! The node's weight cache must be able to take the demand's model weights:
//! a node without a cache (`--cache-gb 0`) can never run a task that serves a
//! model, and a node whose cache is full of versions that are in use or pinned
//! (never evicted) cannot make room for another. A copy the node already holds
//! verified, or is already fetching, needs no new room, so it passes even when
//! the cache is full — that is the node the task should go to.
//!
//! Unlike the class filters in this folder, this one looks at one node: the
//! cache contents are not part of [`crate::placement::state::NodeState`] (they
//! would split every class in two per version), so the placer runs it on the
//! members of a class that passed the others.
use crate::placement::rejections::{NO_WEIGHT_CACHE, WEIGHTS_ROOM};
use crate::placement::types::{NodeWeights, WeightsNeed};

/// Plugin name.
pub const NAME: &str = "NodeWeightsFit";

/// See the module comment.
pub fn check(cache: &NodeWeights, need: &WeightsNeed) -> Result<(), &'static str> {
    if cache.capacity_bytes == 0 {
        Err(NO_WEIGHT_CACHE)
    } else if cache.cached.contains(&need.sha256) || cache.warming.contains(&need.sha256) {
        Ok(())
    } else if cache.evictable_room_bytes < need.size_bytes {
        Err(WEIGHTS_ROOM)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::rejections::Rejections;
    use crate::placement::types::{Demand, GpuUnit};

    pub(crate) const GIB: u64 = 1 << 30;

    fn need(gb: u64) -> WeightsNeed {
        WeightsNeed {
            model: "llama:3".into(),
            sha256: "aa".repeat(32),
            size_bytes: gb * GIB,
        }
    }

    fn cache(capacity_gb: u64, room_gb: u64) -> NodeWeights {
        NodeWeights {
            capacity_bytes: capacity_gb * GIB,
            evictable_room_bytes: room_gb * GIB,
            ..NodeWeights::default()
        }
    }

    #[test]
    fn a_node_without_a_cache_or_without_room_is_rejected() {
        assert_eq!(check(&cache(0, 0), &need(1)), Err(NO_WEIGHT_CACHE));
        assert_eq!(check(&cache(40, 12), &need(20)), Err(WEIGHTS_ROOM));
        assert_eq!(check(&cache(40, 20), &need(20)), Ok(()));
    }

    #[test]
    fn a_cached_or_warming_copy_passes_even_when_the_cache_is_full() {
        let mut full = cache(40, 0);
        full.cached.insert(need(20).sha256);
        assert_eq!(check(&full, &need(20)), Ok(()));
        let mut fetching = cache(40, 0);
        fetching.warming.insert(need(20).sha256);
        assert_eq!(check(&fetching, &need(20)), Ok(()));
        // Another version on the same full cache does not fit.
        let other = WeightsNeed {
            sha256: "bb".repeat(32),
            ..need(20)
        };
        assert_eq!(check(&full, &other), Err(WEIGHTS_ROOM));
    }

    #[test]
    fn the_reason_is_counted_and_worded_with_the_room_there_is() {
        let d = Demand {
            weights: Some(need(20)),
            ..Demand::default()
        };
        let mut r = Rejections::new(GpuUnit::MiB);
        r.nodes = 3;
        r.add_weights_room(&cache(40, 12));
        r.add_weights_room(&cache(40, 4));
        r.add(NO_WEIGHT_CACHE, 1);
        assert_eq!(r.count(WEIGHTS_ROOM), 2);
        assert_eq!(
            r.summary(&d),
            "3 nodes: 2 weights do not fit the node cache: at most 12 GB free of 40 GB \
             (llama:3 needs 20 GB), 1 no weight cache (--cache-gb 0)"
        );
        let mut one = Rejections::new(GpuUnit::MiB);
        one.nodes = 1;
        one.add_weights_room(&cache(40, 12));
        assert_eq!(
            one.summary(&d),
            "1 node: 1 weights do not fit the node cache: 12 GB free of 40 GB \
             (llama:3 needs 20 GB)"
        );
    }
}
