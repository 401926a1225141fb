//! `caldera`: FGD's fragmentation measure, made continuous, memory-aware and
//! packing-aware, plus the expected dead room of the hole a sharing task leaves.
//!
//! score = -w_frag * growth / 1000 - w_hole * hole_growth / 1000
//!         - w_strand * stranding growth / 1000 - w_model * pressure * gpus + w_fit * fit
//!
//! where growth is the fragmentation growth (milli-GPUs, see
//! [`crate::placement::frag`]) measured with CPU *and memory* starvation,
//! hole_growth is how much the expected dead room of the GPU a sharing task
//! takes grows (see [`crate::placement::holes`]), and fit is the BestFit
//! closeness (1 - (cpu_left/C + gpu_left/G)/2, continuous). Example of the fit
//! term (w_fit = 0.1): two 8-GPU nodes where the task grows fragmentation
//! equally; one is left with 40 cores and 3 GPUs free (fit = 1 - (40/128 +
//! 3/8)/2 = 0.656), the other with 90 cores and 7 GPUs (fit = 0.211): the fit
//! terms differ by 0.045, so the fuller node wins instead of a coin flip.
//!
//! Why: FGD's integer sigmoid score ties often, and how ties are broken moves
//! allocation by five points on the trace; a continuous score with a packing term
//! keeps whole GPUs and the CPU next to them free for the tasks that need them.
//! The hole term is what tells a 0.47 task to join another 0.47 (0.06 left)
//! rather than a 0.32 (0.21 left, which almost nothing fits).
use super::fgd::{choices, frag_growth_to};
use super::{request_milli, ScoreCtx, Scored};
use crate::placement::frag::{free_after, FragTable};
use crate::placement::mix::WorkloadMix;
use crate::placement::state::NodeState;

/// Plugin name.
pub const NAME: &str = "Caldera";

/// Tunables of the caldera score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Weight of fragmentation growth (FGD's measure, capacity-aware).
    pub frag_weight: f64,
    /// Weight of the growth of the expected dead room of the GPU a sharing
    /// task takes (see [`crate::placement::holes`]).
    pub hole_weight: f64,
    /// Weight of the packing (BestFit) term against fragmentation growth in GPUs.
    pub fit_weight: f64,
    /// Count a shape as starved when the node lacks its memory (not only CPU).
    pub check_memory: bool,
    /// Blend of count frequency (0) and GPU-weighted frequency (1) for shapes.
    pub gpu_weighting: f64,
    /// Measure capacity fragmentation (CPU/memory-limited copies) instead of
    /// FGD's one-copy test.
    pub capacity: bool,
    /// Weight of stranding growth: idle GPUs whose typical CPU/memory share is
    /// gone (see [`stranded`]).
    pub strand_weight: f64,
    /// Multiplier on the mix's CPU and memory per GPU used by [`stranded`].
    pub strand_scale: f64,
    /// Weight of the model-pressure term: GPUs taken on a model that
    /// model-pinned requests need, per GPU taken.
    pub model_weight: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            frag_weight: 0.3,
            hole_weight: 8.0,
            fit_weight: 0.1,
            check_memory: true,
            gpu_weighting: 0.0,
            capacity: true,
            strand_weight: 3.0,
            strand_scale: 1.0,
            model_weight: 0.3,
        }
    }
}

/// The parameters in use.
pub fn params() -> Params {
    Params::default()
}

/// See the module comment.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let p = params();
    let mut best: Option<Scored> = None;
    // GPU choices that score the same, to within what rounding to milli-GPUs
    // can move a score, go to the GPU left fullest, which keeps whole GPUs
    // free. (A one-shape mix scores every GPU of a node alike; with MiB
    // requests the free room rounds down and the need up, so the exact fit
    // looks a milli-GPU worse than an idle GPU.)
    let same = ROUNDING_MILLI * (p.frag_weight + p.hole_weight) / 1000.0;
    let mut best_left = u64::MAX;
    for takes in choices(ctx) {
        let after = free_after(ctx.state, &takes);
        let score = -(p.frag_weight * frag_growth_to(ctx, &after)
            + p.hole_weight * hole_growth_to(ctx, &takes, &after))
            / 1000.0;
        let left: u64 = takes
            .iter()
            .filter_map(|&(p, _)| after.get(p).map(|&f| f as u64))
            .sum();
        let better = best.as_ref().is_none_or(|b| {
            score > b.score + same || (score >= b.score - same && left < best_left)
        });
        if better {
            best = Some(Scored { score, gpus: takes });
            best_left = left;
        }
    }
    if let (Some(frag), Some(b)) = (ctx.frag, best.as_mut()) {
        let req = request_milli(ctx) as f64;
        let idle = ctx.state.gpu_free_milli() as f64;
        let (cpu, mem) = (ctx.state.cpu_free as f64, ctx.state.memory_free as f64);
        let k = p.strand_scale;
        let (c, m) = (frag.cpu_per_gpu * k, frag.memory_per_gpu * k);
        let after = stranded(
            idle - req,
            cpu - ctx.demand.cpu_milli as f64,
            mem - ctx.demand.memory_mib as f64,
            c,
            m,
        );
        b.score -= p.strand_weight * (after - stranded(idle, cpu, mem, c, m)) / 1000.0;
        b.score -= p.model_weight * frag.model_pressure * req / 1000.0;
    }
    let fit = super::bestfit::closeness(ctx);
    best.map(|b| Scored {
        score: b.score + p.fit_weight * fit,
        gpus: b.gpus,
    })
}

/// Milli-GPUs a score term can be off by from rounding MiB to milli-GPUs
/// (free room down, needs up, per copy).
const ROUNDING_MILLI: f64 = 2.0;

/// Growth of the expected dead room (milli-GPUs) of the GPU a sharing task
/// takes; 0 for whole-GPU and CPU-only tasks (they leave no hole).
pub fn hole_growth(ctx: &ScoreCtx, takes: &[(usize, u64)]) -> f64 {
    hole_growth_to(ctx, takes, &free_after(ctx.state, takes))
}

/// [`hole_growth`] with the free room after `takes` already known.
fn hole_growth_to(ctx: &ScoreCtx, takes: &[(usize, u64)], after: &[u16]) -> f64 {
    let Some(frag) = ctx.frag else { return 0.0 };
    if !ctx.demand.gpu.is_sharing() {
        return 0.0;
    }
    takes
        .iter()
        .filter_map(|&(p, _)| {
            let holes = frag.holes.get(p)?;
            let before = *frag.free.get(p)? as u64;
            Some(holes.value(*after.get(p)? as u64) - holes.value(before))
        })
        .sum()
}

/// Caldera's fragmentation table: the typical mix, optionally GPU-weighted, with
/// memory counted.
pub fn table(mix: &WorkloadMix, state: &NodeState) -> FragTable {
    let p = params();
    let weights: Vec<f64> = mix
        .shapes()
        .iter()
        .map(|s| {
            let gpu = s.demand.gpu.total_milli(1000) as f64 / 1000.0;
            s.freq * ((1.0 - p.gpu_weighting) + p.gpu_weighting * gpu)
        })
        .collect();
    let total: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let table = FragTable::build(
        state,
        mix.shapes()
            .iter()
            .zip(weights.iter())
            .map(|(s, w)| (&s.demand, w / total)),
        p.check_memory,
    );
    if p.capacity {
        table.with_capacity()
    } else {
        table
    }
}

/// Idle GPU room (milli-GPUs) that the node's free CPU or memory cannot feed at
/// the mix's typical CPU and memory per GPU. Example: 4 idle GPUs (4000), 24
/// cores free, 12 cores per GPU typical: CPU feeds 2 GPUs -> 2000 stranded.
pub fn stranded(
    idle: f64,
    cpu_free: f64,
    memory_free: f64,
    cpu_per_gpu: f64,
    memory_per_gpu: f64,
) -> f64 {
    let fed = |free: f64, per_gpu: f64| {
        if per_gpu > 0.0 {
            free.max(0.0) * 1000.0 / per_gpu
        } else {
            f64::INFINITY
        }
    };
    (idle - fed(cpu_free, cpu_per_gpu).min(fed(memory_free, memory_per_gpu))).max(0.0)
}

/// Mean CPU (milli-cores) and memory (MiB) per whole GPU over the mix's GPU shapes.
pub fn per_gpu_needs(mix: &WorkloadMix) -> (f64, f64) {
    let (mut gpu, mut cpu, mut mem) = (0.0, 0.0, 0.0);
    for s in mix.shapes() {
        let g = s.demand.gpu.total_milli(1000) as f64 / 1000.0;
        if g > 0.0 {
            gpu += s.freq * g;
            cpu += s.freq * s.demand.cpu_milli as f64;
            mem += s.freq * s.demand.memory_mib as f64;
        }
    }
    if gpu > 0.0 {
        (cpu / gpu, mem / gpu)
    } else {
        (0.0, 0.0)
    }
}

/// Share of the mix's GPU demand pinned to `model`: each model-constrained GPU
/// shape adds `freq * gpus / allowed models` to each model it allows, over the
/// mix's total `freq * gpus`. Example: 10% of GPU demand asks for `T4` only and
/// 4% for `V100M16|V100M32`: T4 0.10, V100M16 0.02, G2 0.
pub fn model_pressure(mix: &WorkloadMix, model: &str) -> f64 {
    let (mut pinned, mut total) = (0.0, 0.0);
    for s in mix.shapes() {
        let g = s.freq * s.demand.gpu.total_milli(1000) as f64 / 1000.0;
        total += g;
        let allowed = &s.demand.gpu_models;
        if !allowed.is_empty() && allowed.iter().any(|m| m == model) {
            pinned += g / allowed.len() as f64;
        }
    }
    if total > 0.0 {
        pinned / total
    } else {
        0.0
    }
}
