//! One seed of the cache replay; see the module comment of [`super`].
use std::collections::BTreeMap;

use caldera_scheduling::placement::rng::SplitMix64;
use caldera_scheduling::placement::{Demand, GpuUnit, NodeId, Placer, Pool, WorkloadMix};
use serde::Serialize;

use super::catalogue::{Catalogue, GB};
use super::node_cache::NodeCache;
use super::transfers::{Rates, Source, Transfers};
use super::CacheConfig;
use crate::replay::{tie_break_seed, workload, Trace};
use crate::tally::{Tally, Totals};
use caldera_scheduling::placement::explain::placed_on;

/// Inference placements of each run kept with their explanation.
const EXPLAINED: usize = 3;

/// What one seed measured, with the cache term at `bound`.
#[derive(Debug, Clone, Serialize)]
pub struct CacheRun {
    pub seed: u64,
    pub bound: f64,
    pub alloc_pct_at_100: f64,
    pub alloc_pct_at_end: f64,
    pub unallocated_gpus_at_end: f64,
    /// Inference tasks placed.
    pub served: u32,
    /// ... whose node held the version verified.
    pub hits: u32,
    /// ... whose node was already fetching it.
    pub joins: u32,
    /// ... that fetched it from a peer (at once, or after its origin read).
    pub from_peer: u32,
    /// ... that read it from the origin.
    pub from_origin: u32,
    /// Tasks (of any kind) that found no node, by reason.
    pub failed_by_reason: BTreeMap<String, u32>,
    pub origin_bytes: u64,
    pub peer_bytes: u64,
    /// Copies evicted.
    pub evictions: u32,
    /// Inference placements the explanation credits to the cache term
    /// (`weights cached` / `weights warming`).
    pub noted: u32,
    /// The first few inference placements, as the live scheduler words them.
    pub explained: Vec<String>,
    /// Time to ready of each placed inference task, seconds.
    #[serde(skip)]
    pub ready_s: Vec<f64>,
}

/// The inference tasks of a replay order: position -> version, for a seeded
/// `share` of all positions drawn among sharing tasks of at most half a GPU.
pub fn inference_versions(
    trace: &Trace,
    order: &[usize],
    catalogue: &Catalogue,
    share: f64,
    seed: u64,
) -> Vec<Option<usize>> {
    let mut rng = SplitMix64::new(seed ^ 0x1FE2_E4CE);
    let mut eligible: Vec<usize> = (0..order.len())
        .filter(|&j| {
            let t = &trace.tasks[order[j]];
            t.demand().gpu.is_sharing() && t.gpu_milli <= 500
        })
        .collect();
    rng.shuffle(&mut eligible);
    let want = ((order.len() as f64) * share).round() as usize;
    let mut out = vec![None; order.len()];
    for &j in eligible.iter().take(want) {
        out[j] = Some(catalogue.draw(&mut rng));
    }
    out
}

/// The caches and who holds what, kept in step with the pool's view.
struct Caches<'a> {
    catalogue: &'a Catalogue,
    nodes: Vec<NodeCache>,
    ids: Vec<NodeId>,
    /// Verified copies per version, cluster-wide.
    holders: Vec<u32>,
    evictions: u32,
}

impl Caches<'_> {
    fn show(&self, pool: &mut Pool, node: usize) {
        pool.set_weights(self.ids[node], self.nodes[node].weights(self.catalogue));
    }

    /// Fill each cache to `share` of its capacity with versions drawn by
    /// popularity, oldest first.
    fn prefill(&mut self, share: f64, capacity: u64, rng: &mut SplitMix64) {
        let target = (capacity as f64 * share) as u64;
        let tries = 4 * self.catalogue.len();
        let mut stamp = -(self.nodes.len() as i64 * tries as i64) - 1;
        for cache in &mut self.nodes {
            for _ in 0..tries {
                let v = self.catalogue.draw(rng);
                let size = self.catalogue.size(v);
                if cache.used() + size <= target && cache.prefill(v, size, stamp) {
                    self.holders[v] += 1;
                }
                stamp += 1;
            }
        }
    }
}

/// Replay one seed with the cache term at `bound` (0: off).
pub fn replay_cache(
    trace: &Trace,
    mix: &WorkloadMix,
    cfg: &CacheConfig,
    seed: u64,
    bound: f64,
) -> CacheRun {
    let catalogue = Catalogue::new(cfg.models, cfg.size_gb.0, cfg.size_gb.1, cfg.zipf, seed);
    let capacity = (cfg.cache_gb * GB) as u64;
    let mut pool = Pool::new(GpuUnit::Milli);
    let ids: Vec<NodeId> = trace
        .nodes
        .iter()
        .map(|n| pool.upsert_node(n.view()))
        .collect();
    let mut caches = Caches {
        catalogue: &catalogue,
        nodes: vec![NodeCache::new(capacity); ids.len()],
        ids,
        holders: vec![0; catalogue.len()],
        evictions: 0,
    };
    caches.prefill(cfg.prefill, capacity, &mut SplitMix64::new(seed ^ 0xCAC4E));
    for n in 0..caches.nodes.len() {
        caches.show(&mut pool, n);
    }
    let order = workload(&trace.tasks, trace.capacity_milli(), cfg.inflate, seed);
    let versions = inference_versions(trace, &order, &catalogue, cfg.inference_share, seed);
    let mut placer =
        Placer::new(cfg.policy, mix.clone(), tie_break_seed(seed)).with_cache_bound(bound);
    let mut transfers = Transfers::new(Rates {
        origin: cfg.origin_mbps * 1e6,
        peer: cfg.peer_mbps * 1e6,
        disk: cfg.disk_mbps * 1e6,
    });
    let mut tally = Tally::new(trace.capacity_milli());
    let mut run = CacheRun::empty(seed, bound);
    // Arrival times of the tasks waiting for a fetch, per (node, version).
    let mut waiting: BTreeMap<(usize, usize), Vec<f64>> = BTreeMap::new();
    for (j, &i) in order.iter().enumerate() {
        let now = j as f64 * cfg.arrival_s;
        for d in transfers.advance(now) {
            caches.nodes[d.node].verified(d.version);
            caches.holders[d.version] += 1;
            caches.show(&mut pool, d.node);
            for arrived in waiting.remove(&(d.node, d.version)).unwrap_or_default() {
                run.ready_s.push(d.at - arrived);
            }
        }
        let task = &trace.tasks[i];
        let demand = Demand {
            weights: versions[j].map(|v| catalogue.get(v).need.clone()),
            ..task.demand()
        };
        let Some(p) = tally.place(&mut placer, &mut pool, &demand, task.gpu_request_milli()) else {
            continue;
        };
        let Some(v) = versions[j] else { continue };
        let note = placer.explain(&pool, &demand, &p);
        run.noted += u32::from(note.is_some());
        if run.explained.len() < EXPLAINED {
            let name = pool.node(p.node).map_or("?", |n| n.name.as_str());
            let model = &catalogue.get(v).need.model;
            run.explained
                .push(format!("task {j} ({model}): {}", placed_on(name, note)));
        }
        let node = p.node.0 as usize;
        let stamp = j as i64;
        run.served += 1;
        let cache = &mut caches.nodes[node];
        match cache.get(v).map(|e| e.verified) {
            Some(true) => {
                cache.use_held(v, stamp);
                run.hits += 1;
                run.ready_s.push(transfers.verify_s(catalogue.size(v)));
            }
            Some(false) => {
                cache.use_held(v, stamp);
                run.joins += 1;
                waiting.entry((node, v)).or_default().push(now);
            }
            None => {
                // The weights filter let the node through: the room is there.
                let Ok(evicted) = cache.admit(v, catalogue.size(v), stamp) else {
                    continue;
                };
                for k in evicted {
                    caches.holders[k] = caches.holders[k].saturating_sub(1);
                    caches.evictions += 1;
                }
                match transfers.start(node, v, catalogue.size(v), caches.holders[v] > 0) {
                    Source::Origin => run.from_origin += 1,
                    Source::Peer | Source::PeerAfterOrigin => run.from_peer += 1,
                }
                waiting.entry((node, v)).or_default().push(now);
            }
        }
        caches.show(&mut pool, node);
    }
    for d in transfers.advance(f64::INFINITY) {
        for arrived in waiting.remove(&(d.node, d.version)).unwrap_or_default() {
            run.ready_s.push(d.at - arrived);
        }
    }
    run.finish(tally.finish(), &transfers, caches.evictions);
    run
}

impl CacheRun {
    fn empty(seed: u64, bound: f64) -> Self {
        CacheRun {
            seed,
            bound,
            alloc_pct_at_100: 0.0,
            alloc_pct_at_end: 0.0,
            unallocated_gpus_at_end: 0.0,
            served: 0,
            hits: 0,
            joins: 0,
            from_peer: 0,
            from_origin: 0,
            failed_by_reason: BTreeMap::new(),
            origin_bytes: 0,
            peer_bytes: 0,
            evictions: 0,
            noted: 0,
            explained: Vec::new(),
            ready_s: Vec::new(),
        }
    }

    fn finish(&mut self, t: Totals, transfers: &Transfers, evictions: u32) {
        self.alloc_pct_at_100 = t.alloc_pct_at_100;
        self.alloc_pct_at_end = t.alloc_pct_at_end;
        self.unallocated_gpus_at_end = t.unallocated_gpus_at_end;
        self.failed_by_reason = t.failed_by_reason;
        self.origin_bytes = transfers.origin_bytes;
        self.peer_bytes = transfers.peer_bytes;
        self.evictions = evictions;
    }

    /// Share of placed inference tasks whose node held the version verified.
    pub fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.served.max(1) as f64
    }
}
