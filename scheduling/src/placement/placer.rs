//! The placement pipeline: filter -> score -> select (Nomad's stack, kube-scheduler's
//! framework). Pure and deterministic given its seed: no clock, no I/O.
//!
//! Work is done per node class (nodes in identical states), and each class's score
//! for a demand is cached: a class's state never changes (a changed node moves to
//! another class), so the cache only misses on states created since the demand's
//! shape was last placed. Ties are broken uniformly over nodes with the seeded RNG.
use std::sync::Arc;

use super::filter;
use super::fit;
use super::frag::{free_vector, FragTable};
use super::hash::FxHashMap;
use super::holes::HoleValues;
use super::mix::WorkloadMix;
use super::policy::PolicyName;
use super::pool::{Class, Pool};
use super::rejections::Rejections;
use super::rng::SplitMix64;
use super::score::{self, ClassFrag, Norm, ScoreCtx, Scored};
use super::types::{Demand, Placement};

/// Pools with at most this many distinct node states are searched exhaustively.
pub const DEFAULT_SEARCH_LIMIT: usize = 2048;

/// Larger pools score this many feasible classes per decision, walking from a
/// seeded random start (Nomad's limit iterator). On the 1,213-node trace even 16
/// loses nothing (docs/placement.md); it keeps a decision near 50 us at 10,000
/// nodes.
pub const DEFAULT_BOUNDED_SCORES: usize = 16;

/// Cache entries after which caches are dropped (bounds memory in long runs).
const CACHE_CAP: usize = 1 << 21;

/// Chooses nodes for demands; see the module comment.
#[derive(Debug)]
pub struct Placer {
    policy: PolicyName,
    mix: WorkloadMix,
    rng: SplitMix64,
    search_limit: usize,
    bounded_scores: usize,
    cache_for: (u64, u64, (u64, u64), u64),
    frags: FxHashMap<u64, ClassFrag>,
    facts: MixFacts,
    scores: FxHashMap<(u64, u32), Option<Scored>>,
    demand_ids: FxHashMap<Demand, u32>,
}

impl Placer {
    /// A placer running `policy` against the typical `mix`, tie-breaking with `seed`.
    pub fn new(policy: PolicyName, mix: WorkloadMix, seed: u64) -> Self {
        Placer {
            policy,
            mix,
            rng: SplitMix64::new(seed),
            search_limit: DEFAULT_SEARCH_LIMIT,
            bounded_scores: DEFAULT_BOUNDED_SCORES,
            cache_for: (0, 0, (0, 0), 0),
            frags: FxHashMap::default(),
            facts: MixFacts::default(),
            scores: FxHashMap::default(),
            demand_ids: FxHashMap::default(),
        }
    }

    /// Score at most `limit` feasible classes per decision (at least 1),
    /// whatever the pool size.
    pub fn with_search_limit(mut self, limit: usize) -> Self {
        self.search_limit = limit.max(1);
        self.bounded_scores = limit.max(1);
        self
    }

    /// The policy this placer runs.
    pub fn policy(&self) -> PolicyName {
        self.policy
    }

    /// The typical mix fragmentation is measured against.
    pub fn mix(&self) -> &WorkloadMix {
        &self.mix
    }

    /// Learn from a demand the scheduler saw (online typical mix).
    pub fn observe(&mut self, demand: &Demand) {
        self.mix.observe(demand);
    }

    /// Choose a node and GPUs for `demand`. Does not change the pool: the caller
    /// commits the placement (and may be refused if the pool moved meanwhile).
    /// When no node fits, says why, counted by reason.
    pub fn place(&mut self, pool: &Pool, demand: &Demand) -> Result<Placement, Rejections> {
        self.sync(pool);
        let did = self.intern(demand);
        let mut rejections = Rejections::new(pool.unit());
        let Some(slot) = self.select(pool, demand, did, &mut rejections) else {
            return Err(rejections);
        };
        let Some(class) = pool.class_at(slot) else {
            return Err(rejections);
        };
        let Some(mut gpus) = self.gpus_in(class, demand, did) else {
            return Err(rejections);
        };
        // The node is drawn before any GPU redraw: the seeded sequence is part
        // of what a replay reproduces.
        let node = class.members[self.rng.below(class.members.len() as u64) as usize];
        if self.policy == PolicyName::Random && demand.gpu.is_sharing() {
            self.redraw_shared_gpu(class, demand, &mut gpus);
        }
        Ok(pool.placement_from_positions(node, &gpus))
    }

    /// Filter -> score -> select over the pool's classes: the slot of the
    /// best-scoring feasible class, ties broken uniformly over their nodes
    /// (a weighted reservoir). Counts every rejected node in `rejections`.
    /// A pool over the search limit is walked from a seeded random slot and
    /// only `bounded_scores` feasible classes are scored.
    fn select(
        &mut self,
        pool: &Pool,
        demand: &Demand,
        did: u32,
        rejections: &mut Rejections,
    ) -> Option<usize> {
        let (max_cpu, max_gpu) = pool.max_sizes();
        let norm = Norm {
            max_cpu: max_cpu as f64,
            max_gpu: max_gpu as f64,
        };
        let slots = pool.class_slots();
        let bounded = pool.class_count() > self.search_limit;
        let start = if bounded {
            self.rng.below(slots as u64) as usize
        } else {
            0
        };
        let mut best: Option<(f64, usize)> = None;
        let mut tied_nodes = 0u64;
        let mut scored = 0usize;
        for i in 0..slots {
            let slot = (start + i) % slots;
            let Some(class) = pool.class_at(slot) else {
                continue;
            };
            let members = class.members.len() as u32;
            rejections.nodes += members;
            if let Err(reason) = filter::feasible(&class.state, demand) {
                rejections.add(reason, members);
                continue;
            }
            let Some(score) = self.score_class(pool, class, demand, did, norm) else {
                continue;
            };
            match best {
                Some((b, _)) if score < b => {}
                Some((b, _)) if score == b => {
                    tied_nodes += members as u64;
                    if self.rng.below(tied_nodes) < members as u64 {
                        best = Some((score, slot));
                    }
                }
                _ => {
                    best = Some((score, slot));
                    tied_nodes = members as u64;
                }
            }
            scored += 1;
            if bounded && scored >= self.bounded_scores {
                break;
            }
        }
        best.map(|(_, slot)| slot)
    }

    /// The GPUs `demand` takes in the chosen `class`: those its score chose
    /// (cached), else best-fit.
    fn gpus_in(&self, class: &Class, demand: &Demand, did: u32) -> Option<Vec<(usize, u64)>> {
        let cached = self
            .scores
            .get(&(class.handle.key(), did))
            .and_then(Option::as_ref)
            .map(|s| s.gpus.clone());
        match cached {
            Some(g) => Some(g),
            None => fit::best_fit_gpus(&class.state, demand),
        }
    }

    /// The random policy's sharing demand takes a uniformly drawn usable GPU
    /// of the class rather than the one best-fit chose.
    fn redraw_shared_gpu(&mut self, class: &Class, demand: &Demand, gpus: &mut Vec<(usize, u64)>) {
        let usable = fit::usable_positions(&class.state, demand);
        if let Some(&p) = usable.get(self.rng.below(usable.len() as u64) as usize) {
            if let Some(units) = fit::gpu_take(&class.state.gpus[p], demand) {
                *gpus = vec![(p, units)];
            }
        }
    }

    /// Score of `class` for the demand (cached); `None` when it cannot host it.
    fn score_class(
        &mut self,
        pool: &Pool,
        class: &Class,
        demand: &Demand,
        did: u32,
        norm: Norm,
    ) -> Option<f64> {
        if self.policy == PolicyName::Random {
            // Every feasible node scores the same; nothing worth caching.
            return Some(0.0);
        }
        let key = (class.handle.key(), did);
        if let Some(s) = self.scores.get(&key) {
            return s.as_ref().map(|s| s.score);
        }
        let policy = self.policy;
        let frag = if policy.uses_fragmentation() {
            let mix = &self.mix;
            let facts = &mut self.facts;
            Some(
                &*self
                    .frags
                    .entry(class.handle.key())
                    .or_insert_with(|| class_frag(policy, mix, class, pool, facts)),
            )
        } else {
            None
        };
        let ctx = ScoreCtx {
            state: &class.state,
            demand,
            norm,
            frag,
        };
        let s = match policy {
            PolicyName::Random => score::random::score(&ctx),
            PolicyName::DotProd => score::with_bestfit_tiebreak(score::dotprod::score(&ctx), &ctx),
            PolicyName::BestFit => score::bestfit::score(&ctx),
            PolicyName::GpuPacking => {
                score::with_bestfit_tiebreak(score::gpupacking::score(&ctx), &ctx)
            }
            PolicyName::GpuClustering => {
                score::with_bestfit_tiebreak(score::gpuclustering::score(&ctx), &ctx)
            }
            PolicyName::Fgd => score::with_bestfit_tiebreak(score::fgd::score(&ctx), &ctx),
            PolicyName::Caldera => score::caldera::score(&ctx),
        };
        let out = s.as_ref().map(|s| s.score);
        self.scores.insert(key, s);
        out
    }

    fn intern(&mut self, demand: &Demand) -> u32 {
        if let Some(&id) = self.demand_ids.get(demand) {
            return id;
        }
        let id = self.demand_ids.len() as u32;
        self.demand_ids.insert(demand.clone(), id);
        id
    }

    /// Drop caches that no longer apply (other pool, new mix, new largest node)
    /// or that grew too big.
    fn sync(&mut self, pool: &Pool) {
        let key = (
            pool.instance_id(),
            self.mix.version(),
            pool.max_sizes(),
            pool.gpu_count(),
        );
        if key != self.cache_for || self.scores.len() > CACHE_CAP || self.frags.len() > CACHE_CAP {
            self.cache_for = key;
            self.frags.clear();
            self.facts = MixFacts::default();
            self.scores.clear();
            self.demand_ids.clear();
        }
    }
}

/// Fragmentation data of a class under `policy`.
fn class_frag(
    policy: PolicyName,
    mix: &WorkloadMix,
    class: &Class,
    pool: &Pool,
    facts: &mut MixFacts,
) -> ClassFrag {
    let table = build_table(policy, mix, &class.state);
    let free = free_vector(&class.state);
    let before = table.frag(&free, class.state.cpu_free, class.state.memory_free);
    let (cpu_per_gpu, memory_per_gpu) = facts.per_gpu_needs(mix);
    // Demand pinned to the node's model relative to that model's supply (the
    // pool's supply can change within a cache epoch, so not cached).
    let model_pressure = class
        .state
        .gpus
        .first()
        .map(|g| {
            score::caldera::model_pressure(mix, &g.model) / pool.model_share(&g.model).max(1e-3)
        })
        .unwrap_or(0.0);
    let holes = match policy {
        PolicyName::Caldera => class
            .state
            .gpus
            .iter()
            .map(|g| facts.holes(mix, &g.model, g.capacity))
            .collect(),
        _ => Vec::new(),
    };
    ClassFrag {
        table,
        free,
        before,
        cpu_per_gpu,
        memory_per_gpu,
        model_pressure,
        holes,
    }
}

/// What the mix says that is the same for every class: its CPU and memory per
/// GPU, and the hole values of each GPU type (model, capacity; about 0.1 ms
/// each to build). Derived once per mix version instead of per class.
#[derive(Debug, Default)]
struct MixFacts {
    per_gpu_needs: Option<(f64, f64)>,
    holes: Vec<(String, u64, Arc<HoleValues>)>,
}

impl MixFacts {
    fn per_gpu_needs(&mut self, mix: &WorkloadMix) -> (f64, f64) {
        *self
            .per_gpu_needs
            .get_or_insert_with(|| score::caldera::per_gpu_needs(mix))
    }

    fn holes(&mut self, mix: &WorkloadMix, model: &str, capacity: u64) -> Arc<HoleValues> {
        if let Some((_, _, v)) = self
            .holes
            .iter()
            .find(|(m, c, _)| m == model && *c == capacity)
        {
            return v.clone();
        }
        let v = Arc::new(HoleValues::build(mix, model, capacity));
        self.holes.push((model.to_string(), capacity, v.clone()));
        v
    }
}

/// The fragmentation table a policy measures with.
fn build_table(
    policy: PolicyName,
    mix: &WorkloadMix,
    state: &super::state::NodeState,
) -> FragTable {
    match policy {
        PolicyName::Caldera => score::caldera::table(mix, state),
        _ => FragTable::build(
            state,
            mix.shapes().iter().map(|s| (&s.demand, s.freq)),
            false,
        ),
    }
}
