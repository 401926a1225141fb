//! The cache term: a bounded bonus for nodes that already hold the demand's
//! model version verified (the whole `bound`) or are already fetching it
//! (half of it), added to whatever the policy scored.
//!
//! score = policy score + bound * {1 verified, 0.5 warming, 0 absent}
//!
//! Why bounded: a hit saves minutes of warmup once, a fragment wastes GPU
//! room for as long as the node stays in that state. The term may trade at
//! most `bound` of the policy's own score for a hit, so a node the policy
//! prefers by more than `bound` still wins. On caldera's scale (0.3 per GPU
//! of capacity-fragmentation growth, 8 per GPU of hole growth, 0.1 for a
//! perfect fit) the default [`DEFAULT_BOUND`] of 0.3 moves a task onto its
//! cached weights only when that costs less than one GPU of fragmentation
//! growth, or 0.04 GPU of dead hole. Measured on every Alibaba trace (docs/
//! placement.md, "Cache-aware placement"): 0.3 raises the hit rate from
//! ~35% to 75-83% at no measurable allocation cost; 1.0 reaches ~99% for up
//! to 0.07 points of allocation; 0.001 (ties only) reaches 44%. Example:
//! node A scores -0.50 and holds the version verified, node B scores -0.10
//! and does not: with bound 0.3 A ends at -0.20 and B wins; with bound 1.0
//! A ends at +0.50 and wins.
//!
//! A demand without weights gets no term at all (the placer never calls
//! this), so every figure measured before the term existed is unchanged.
use crate::placement::types::{NodeWeights, WeightsNeed};

/// Plugin name.
pub const NAME: &str = "WeightsCached";

/// Score a verified copy is worth, in the policy's score units; see the
/// module comment (chosen from the measurements in docs/benchmarks/placement.md).
pub const DEFAULT_BOUND: f64 = 0.3;

/// Share of the bound a copy still being fetched earns: it saves the bytes
/// done and, more important, a second origin read, but not the wait.
pub const WARMING_SHARE: f64 = 0.5;

/// What a node holds of the demand's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// A verified copy.
    Cached,
    /// A copy being fetched.
    Warming,
    /// Nothing.
    Absent,
}

impl Holding {
    /// What `cache` holds of `need`.
    pub fn of(cache: &NodeWeights, need: &WeightsNeed) -> Self {
        if cache.cached.contains(&need.sha256) {
            Holding::Cached
        } else if cache.warming.contains(&need.sha256) {
            Holding::Warming
        } else {
            Holding::Absent
        }
    }

    /// The words a placement explanation uses, when there is something to say.
    pub fn note(self) -> Option<&'static str> {
        match self {
            Holding::Cached => Some("weights cached"),
            Holding::Warming => Some("weights warming"),
            Holding::Absent => None,
        }
    }
}

/// The bonus for a node holding `holding`, at most `bound`.
pub fn bonus(holding: Holding, bound: f64) -> f64 {
    match holding {
        Holding::Cached => bound,
        Holding::Warming => bound * WARMING_SHARE,
        Holding::Absent => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verified_copy_earns_the_bound_a_warming_one_half_and_none_nothing() {
        let need = WeightsNeed {
            model: "m:1".into(),
            sha256: "ab".into(),
            size_bytes: 1,
        };
        let mut cache = NodeWeights::default();
        assert_eq!(Holding::of(&cache, &need), Holding::Absent);
        cache.warming.insert("ab".into());
        assert_eq!(Holding::of(&cache, &need), Holding::Warming);
        cache.cached.insert("ab".into());
        assert_eq!(Holding::of(&cache, &need), Holding::Cached);
        assert_eq!(bonus(Holding::Cached, 0.04), 0.04);
        assert_eq!(bonus(Holding::Warming, 0.04), 0.02);
        assert_eq!(bonus(Holding::Absent, 0.04), 0.0);
        assert_eq!(Holding::Cached.note(), Some("weights cached"));
    }
}
