//! `caldera sim --models K`: what cache-aware placement buys and costs. The
//! trace is replayed exactly as the plain replay does (shuffle, inflate to
//! 130%, place one at a time, no departures: the allocation figures are the
//! paper's), while a share of the tasks serve one of `K` model versions and
//! every node has a weight cache. The trace has no task types, so — as
//! `--dynamic` does — a seeded `inference_share` of all tasks, drawn among
//! sharing tasks of at most half a GPU, are the inference tasks; each asks
//! for a version drawn by Zipf popularity. Tasks arrive one every
//! `arrival_s`; each inference task's time to ready comes from where its
//! node finds the weights (see [`transfers`]).
//!
//! Each seed is replayed twice on the same tasks and versions: the cache
//! term off (bound 0: the weights filter still applies) and on, so the two
//! columns of the report differ only by the term.
pub mod catalogue;
pub mod node_cache;
pub mod replay;
pub mod report;
pub mod transfers;

#[cfg(test)]
mod tests;

use caldera_scheduling::placement::{PolicyName, WorkloadMix};

pub use replay::{replay_cache, CacheRun};
pub use report::CacheReport;

use super::replay::Trace;

/// Everything that shapes a cache replay.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CacheConfig {
    #[serde(serialize_with = "policy_name")]
    pub policy: PolicyName,
    /// Versions.
    pub models: u32,
    /// Sizes, GB (10^9 bytes), uniform in this range.
    pub size_gb: (f64, f64),
    /// Zipf skew of popularity (0 = uniform).
    pub zipf: f64,
    /// Cache per node, GB.
    pub cache_gb: f64,
    /// Share of each cache filled before the replay with versions drawn by
    /// popularity, unused (what an earlier day left); 0 = cold caches.
    pub prefill: f64,
    /// Bandwidths, MB/s (10^6 bytes): the origin (shared by its readers),
    /// one peer transfer, and a disk read to verify a cached copy.
    pub origin_mbps: f64,
    pub peer_mbps: f64,
    pub disk_mbps: f64,
    /// Share of all tasks that serve a model.
    pub inference_share: f64,
    /// Seconds between two arrivals.
    pub arrival_s: f64,
    /// Inflation of the task list (the paper: 1.3).
    pub inflate: f64,
    /// The cache term's bound in the "on" run.
    pub bound: f64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            policy: PolicyName::Caldera,
            models: 32,
            size_gb: (4.0, 40.0),
            zipf: 1.0,
            cache_gb: 100.0,
            prefill: 1.0,
            origin_mbps: 1000.0,
            peer_mbps: 1000.0,
            disk_mbps: 2000.0,
            inference_share: 0.3,
            arrival_s: 1.0,
            inflate: 1.3,
            bound: caldera_scheduling::placement::score::weights::DEFAULT_BOUND,
        }
    }
}

/// An option of the cache simulation out of range: `rule` names the option
/// as the CLI spells it and the range it must be in (the CLI's usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule}")]
pub struct OptionOutOfRange {
    pub rule: &'static str,
}

impl CacheConfig {
    /// The first option that is out of range, named as the CLI spells it.
    pub fn check(&self) -> Result<(), OptionOutOfRange> {
        let (lo, hi) = self.size_gb;
        let bad = [
            (self.models == 0, "--models must be at least 1"),
            (
                !(lo > 0.0 && hi >= lo && hi.is_finite()),
                "--model-size-gb must be A..B with 0 < A <= B",
            ),
            (
                !(self.zipf >= 0.0 && self.zipf.is_finite()),
                "--zipf must be >= 0",
            ),
            (
                !(self.cache_gb >= 0.0 && self.cache_gb.is_finite()),
                "--cache-gb must be >= 0",
            ),
            (
                !(0.0..=1.0).contains(&self.prefill),
                "--prefill must be in [0, 1]",
            ),
            (
                !(self.origin_mbps > 0.0 && self.peer_mbps > 0.0 && self.disk_mbps > 0.0),
                "--origin-mbps, --peer-mbps and --disk-mbps must be > 0",
            ),
            (
                !(0.0..=1.0).contains(&self.inference_share),
                "--inference-share must be in [0, 1]",
            ),
            (
                !(self.arrival_s >= 0.0 && self.arrival_s.is_finite()),
                "--arrival-ms must be >= 0",
            ),
            (
                !(self.inflate > 0.0 && self.inflate <= 10.0),
                "--inflate must be in (0, 10]",
            ),
            (
                !(self.bound >= 0.0 && self.bound.is_finite()),
                "--cache-bound must be >= 0",
            ),
        ];
        match bad.iter().find(|(b, _)| *b) {
            Some((_, rule)) => Err(OptionOutOfRange { rule }),
            None => Ok(()),
        }
    }
}

fn policy_name<S: serde::Serializer>(p: &PolicyName, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

/// Replay every seed with the term off and on, on `threads` threads; the
/// report has the two side by side.
pub fn run(trace: &Trace, cfg: &CacheConfig, seeds: &[u64], threads: usize) -> CacheReport {
    let mix: WorkloadMix = trace.mix();
    let jobs: Vec<(u64, f64)> = seeds
        .iter()
        .flat_map(|&s| [(s, 0.0), (s, cfg.bound)])
        .collect();
    let runs: Vec<CacheRun> = crate::run::parallel(&jobs, threads, |&(seed, bound)| {
        replay_cache(trace, &mix, cfg, seed, bound)
    })
    .into_iter()
    .flatten()
    .collect();
    CacheReport::new(&trace.name, cfg, runs)
}
