//! What the core knows of model weights: the size and sha256 of each
//! registered version (from the model registry) and what each node's cache
//! holds (from its cache reports). Placement uses both: a node whose cache
//! cannot take a task's weights is filtered out, and one that holds them is
//! preferred (see `placement::score::weights`). The control plane calls
//! these when a version is registered and when a node reports its cache.
use caldera_spec::TaskSpec;

use super::core::Core;
use crate::placement::{NodeWeights, WeightsNeed};

impl Core {
    /// A registered version's weights, keyed by `need.model` (`name:version`).
    /// Tasks enqueued from now on that name it carry them in their demand.
    pub fn set_model_weights(&mut self, need: WeightsNeed) {
        self.model_weights.insert(need.model.clone(), need);
    }

    /// What `node`'s weight cache holds, from its last report. Kept across
    /// the node's other updates until the next report replaces it; a report
    /// of a node not up yet is kept for when it is.
    ///
    /// A report that could let a waiting task in (more room, a bigger cache,
    /// a copy that was not there) makes the next pass look at the whole
    /// queue, as a release does: a task turned down for cache room waits for
    /// the report after its blockers' workloads exit, and that report can
    /// come after the release's own pass (without this, a task could wait on
    /// a cache that has room until something else wakes the queue).
    pub fn set_node_weights(&mut self, node: &str, weights: NodeWeights) {
        let grew = self
            .node_weights
            .get(node)
            .is_none_or(|before| may_admit_more(before, &weights));
        self.node_weights.insert(node.to_string(), weights);
        self.refresh_node(node);
        if grew {
            self.room_grew();
        }
    }

    /// What `node`'s cache held at its last report (empty when unknown):
    /// the hypothetical pools of estimates and victim searches carry it, or
    /// a task serving a model would never fit there.
    pub(in crate::queue) fn node_weights(&self, node: &str) -> NodeWeights {
        self.node_weights.get(node).cloned().unwrap_or_default()
    }

    /// The weights `spec`'s model version needs, if it names a known one.
    pub(in crate::queue) fn weights_for(&self, spec: &TaskSpec) -> Option<WeightsNeed> {
        self.model_weights.get(spec.model.as_deref()?).cloned()
    }
}

/// Whether a node's cache went from `before` to `now` in a way that could let
/// in a task the filter turned down: room or capacity grew, or a copy is
/// there (or coming) that was not.
fn may_admit_more(before: &NodeWeights, now: &NodeWeights) -> bool {
    now.evictable_room_bytes > before.evictable_room_bytes
        || now.capacity_bytes > before.capacity_bytes
        || !now.cached.is_subset(&before.cached)
        || !now.warming.is_subset(&before.warming)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::core::Decision;
    use crate::queue::fixtures::{core_with, placements, spec, submit};

    fn need() -> WeightsNeed {
        WeightsNeed {
            model: "llama:3".into(),
            sha256: "ab".repeat(32),
            size_bytes: 20 << 30,
        }
    }

    fn cache(cached: bool) -> NodeWeights {
        NodeWeights {
            capacity_bytes: 100 << 30,
            evictable_room_bytes: 100 << 30,
            cached: if cached {
                [need().sha256].into_iter().collect()
            } else {
                Default::default()
            },
            warming: Default::default(),
        }
    }

    fn serving(id: &str) -> TaskSpec {
        let mut s = spec(id, 1, "high", None);
        s.model = Some("llama:3".into());
        s
    }

    #[test]
    fn a_task_of_a_known_version_goes_where_its_weights_are_cached_and_says_so() {
        let mut c = core_with(&[("a", 2), ("b", 2), ("c", 2)]);
        c.set_model_weights(need());
        c.set_node_weights("a", cache(false));
        c.set_node_weights("b", cache(true));
        c.set_node_weights("c", cache(false));
        submit(&mut c, "t", serving("s1"), 1, 1);
        assert_eq!(
            placements(&c.cycle(0)),
            [("b".to_string(), Some("weights cached"))]
        );
        // The placement refreshed b's view; its cache report stayed.
        submit(&mut c, "t", serving("s2"), 2, 1);
        assert_eq!(
            placements(&c.cycle(1)),
            [("b".to_string(), Some("weights cached"))]
        );
        // A task without a model says nothing more than its node.
        submit(&mut c, "t", spec("plain", 1, "low", None), 3, 1);
        let d = c.cycle(2);
        assert!(matches!(placements(&d).as_slice(), [(_, None)]), "{d:?}");
    }

    #[test]
    fn a_serving_task_may_preempt_on_a_node_whose_cache_can_take_its_weights() {
        let mut c = core_with(&[("a", 1)]);
        c.set_model_weights(need());
        c.set_node_weights("a", cache(false));
        submit(&mut c, "t", spec("low", 1, "low", None), 1, 1);
        assert_eq!(placements(&c.cycle(0)).len(), 1);
        submit(&mut c, "t", serving("hi"), 2, 1);
        let d = c.cycle(100_000);
        assert_eq!(crate::queue::fixtures::victims(&d), ["low"], "{d:?}");
    }

    #[test]
    fn nodes_without_a_cache_are_not_offered_a_serving_task() {
        let mut c = core_with(&[("a", 2)]);
        c.set_model_weights(need());
        // "a" never reported a cache: capacity 0.
        submit(&mut c, "t", serving("s1"), 1, 1);
        let d = c.cycle(0);
        let reason = d.iter().find_map(|d| match d {
            Decision::Pending { reason, .. } => Some(reason.clone()),
            _ => None,
        });
        assert_eq!(
            reason.as_deref(),
            Some("1 node: 1 no weight cache (--cache-gb 0)"),
            "{d:?}"
        );
    }

    #[test]
    fn a_task_turned_down_for_cache_room_is_placed_once_a_report_shows_room() {
        let mut c = core_with(&[("a", 2)]);
        c.set_model_weights(need());
        let full = NodeWeights {
            evictable_room_bytes: 10 << 30,
            ..cache(false)
        };
        c.set_node_weights("a", full.clone());
        submit(&mut c, "t", serving("s1"), 1, 1);
        assert!(placements(&c.cycle(0)).is_empty());
        // Nothing was released; only the cache report changed (its users
        // exited). The pass after it must look at the waiting task again.
        assert!(placements(&c.cycle(1)).is_empty());
        c.set_node_weights("a", full.clone());
        assert!(placements(&c.cycle(2)).is_empty(), "the same report again");
        c.set_node_weights("a", cache(false));
        assert_eq!(placements(&c.cycle(3)), [("a".to_string(), None)]);
    }

    #[test]
    fn only_a_report_that_could_let_a_task_in_counts_as_room() {
        let base = cache(false);
        let less = NodeWeights {
            evictable_room_bytes: 1,
            ..base.clone()
        };
        assert!(!may_admit_more(&base, &base));
        assert!(!may_admit_more(&base, &less));
        assert!(may_admit_more(&less, &base));
        let mut warming = base.clone();
        warming.warming.insert("cd".repeat(32));
        assert!(may_admit_more(&base, &warming));
        assert!(!may_admit_more(&warming, &base));
        assert!(may_admit_more(&base, &cache(true)));
    }
}
