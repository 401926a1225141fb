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
use super::score::weights::Holding;
use super::score::{self, ClassFrag, Norm, ScoreCtx, Scored};
use super::types::{Demand, ImageNeed, NodeId, Placement, WeightsNeed};

/// Pools with at most this many distinct node states are searched exhaustively.
pub const DEFAULT_SEARCH_LIMIT: usize = 2048;

/// Larger pools score this many feasible classes per decision, walking from a
/// seeded random start (Nomad's limit iterator). On the 1,213-node trace even 16
/// loses nothing (docs/benchmarks/placement.md); it keeps a decision near 50 us at 10,000
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
    cache_bound: f64,
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
            cache_bound: score::weights::DEFAULT_BOUND,
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

    /// Weigh a node's cached copy of a demand's weights at most `bound` of
    /// the policy's score (see [`score::weights`]); 0 turns the term off
    /// (the filter still applies: weights must fit the node's cache).
    pub fn with_cache_bound(mut self, bound: f64) -> Self {
        self.cache_bound = bound.max(0.0);
        self
    }

    /// What the cache term may trade for a hit (0: off).
    pub fn cache_bound(&self) -> f64 {
        self.cache_bound
    }

    /// What to say about a placement beyond its node: `weights cached` or
    /// `weights warming` when the cache term counted for the chosen node,
    /// else `image present` when the node held the task's image.
    pub fn explain(
        &self,
        pool: &Pool,
        demand: &Demand,
        placement: &Placement,
    ) -> Option<&'static str> {
        if self.cache_bound <= 0.0 {
            return None;
        }
        let view = pool.node(placement.node)?;
        let weights = demand
            .weights
            .as_ref()
            .and_then(|need| Holding::of(&view.weights, need).note());
        let image = demand
            .image
            .as_ref()
            .filter(|need| score::locality::holds_image(&view.images, need))
            .map(|_| "image present");
        weights.or(image)
    }

    /// The seeded draws so far: a preview (a dry run) saves them and
    /// [`Placer::rewind`]s after, so asking "where would it go" never moves
    /// the sequence the live placements (and a replay) depend on.
    pub fn draws(&self) -> SplitMix64 {
        self.rng.clone()
    }

    /// Puts back the draws [`Placer::draws`] saved.
    pub fn rewind(&mut self, draws: SplitMix64) {
        self.rng = draws;
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
        // Classes are scored without the weights (cache contents are not
        // part of a class's state); the cache filter and term then look at
        // each member node.
        let stripped;
        let (demand, need) = match (&demand.weights, &demand.image) {
            (None, None) => (demand, None),
            (weights, image) => {
                stripped = Demand {
                    weights: None,
                    image: None,
                    ..demand.clone()
                };
                let need = NodeNeeds {
                    weights: weights.as_ref(),
                    image: image.as_ref(),
                };
                (&stripped, Some(need))
            }
        };
        let did = self.intern(demand);
        let mut rejections = Rejections::new(pool.unit());
        let Some(choice) = self.select(pool, demand, did, need, &mut rejections) else {
            return Err(rejections);
        };
        let Some(class) = pool.class_at(choice.slot) else {
            return Err(rejections);
        };
        let Some(mut gpus) = self.gpus_in(class, demand, did) else {
            return Err(rejections);
        };
        // The node is drawn before any GPU redraw: the seeded sequence is part
        // of what a replay reproduces.
        let node = match choice.node {
            Some(node) => node,
            None => class.members[self.rng.below(class.members.len() as u64) as usize],
        };
        if self.policy == PolicyName::Random && demand.gpu.is_sharing() {
            self.redraw_shared_gpu(class, demand, &mut gpus);
        }
        Ok(pool.placement_from_positions(node, &gpus))
    }

    /// Filter -> score -> select over the pool's classes: the slot of the
    /// best-scoring feasible class, ties broken uniformly over their nodes
    /// (a weighted reservoir). Counts every rejected node in `rejections`.
    /// A pool over the search limit is walked from a seeded random slot and
    /// only `bounded_scores` feasible classes are scored. With weights
    /// (`need`), each member node of a feasible class is filtered and scored
    /// on its own (class score + cache term) and the node is chosen here.
    fn select(
        &mut self,
        pool: &Pool,
        demand: &Demand,
        did: u32,
        need: Option<NodeNeeds<'_>>,
        rejections: &mut Rejections,
    ) -> Option<Choice> {
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
        let mut pick = NodePick::default();
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
            if let Some(need) = need {
                self.select_members(pool, class, score, &need, &mut pick, rejections);
                scored += 1;
                if bounded && scored >= self.bounded_scores {
                    break;
                }
                continue;
            }
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
        if need.is_some() {
            return pick.best.map(|(_, slot, node)| Choice {
                slot,
                node: Some(node),
            });
        }
        best.map(|(_, slot)| Choice { slot, node: None })
    }

    /// The member nodes of a feasible `class` whose cache can take the
    /// weights `need` names, each scored `class_score` plus its locality
    /// term (weights and image), into `pick` (ties broken uniformly over
    /// nodes, like classes).
    fn select_members(
        &mut self,
        pool: &Pool,
        class: &Class,
        class_score: f64,
        need: &NodeNeeds<'_>,
        pick: &mut NodePick,
        rejections: &mut Rejections,
    ) {
        for &node in &class.members {
            let Some(view) = pool.node(node) else {
                continue;
            };
            if let Some(weights) = need.weights {
                if let Err(reason) = filter::weights::check(&view.weights, weights) {
                    if reason == super::rejections::WEIGHTS_ROOM {
                        rejections.add_weights_room(&view.weights);
                    } else {
                        rejections.add(reason, 1);
                    }
                    continue;
                }
            }
            let weights = need
                .weights
                .map(|w| (Holding::of(&view.weights, w), w.size_bytes));
            let image = need.image.map(|i| {
                let there = score::locality::holds_image(&view.images, i);
                (there, i.size_bytes)
            });
            let score = class_score + score::locality::bonus(weights, image, self.cache_bound);
            match pick.best {
                Some((b, _, _)) if score < b => {}
                Some((b, _, _)) if score == b => {
                    pick.tied += 1;
                    if self.rng.below(pick.tied) == 0 {
                        pick.best = Some((score, class.handle.slot as usize, node));
                    }
                }
                _ => {
                    pick.best = Some((score, class.handle.slot as usize, node));
                    pick.tied = 1;
                }
            }
        }
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

/// What [`Placer::select`] chose: a class, and the node when the cache term
/// chose it (else a member is drawn uniformly).
struct Choice {
    slot: usize,
    node: Option<NodeId>,
}

/// The best node so far when nodes are scored one by one, and how many tie
/// with it.
#[derive(Default)]
struct NodePick {
    best: Option<(f64, usize, NodeId)>,
    tied: u64,
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

/// What a demand needs on its node beyond room, looked at per member node:
/// its weights (filtered and scored) and its image (scored).
#[derive(Debug, Clone, Copy)]
struct NodeNeeds<'a> {
    weights: Option<&'a WeightsNeed>,
    image: Option<&'a ImageNeed>,
}
