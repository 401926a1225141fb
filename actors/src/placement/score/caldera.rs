//! `caldera`: FGD's fragmentation measure, made continuous, memory-aware and
//! packing-aware.
//!
//! score = -growth / 1000 + w_fit * fit, where growth is the fragmentation growth
//! (milli-GPUs, see [`crate::placement::frag`]) measured with CPU *and memory*
//! starvation, and fit is the BestFit closeness (1 - (cpu_left/C + gpu_left/G)/2,
//! continuous). Example (w_fit = 0.1): two 8-GPU nodes where the task grows
//! fragmentation equally (growth 120 -> -0.12); one is left with 40 cores and 3
//! GPUs free (fit = 1 - (40/128 + 3/8)/2 = 0.656), the other with 90 cores and 7
//! GPUs (fit = 0.211): scores -0.054 and -0.099, so the fuller node wins instead
//! of a coin flip.
//!
//! Why: FGD's integer sigmoid score ties often, and how ties are broken moves
//! allocation by five points on the trace; a continuous score with a packing term
//! keeps whole GPUs and the CPU next to them free for the tasks that need them.
use super::fgd::{choices, frag_growth};
use super::{request_milli, ScoreCtx, Scored};
use crate::placement::frag::FragTable;
use crate::placement::mix::WorkloadMix;
use crate::placement::state::NodeState;

/// Plugin name.
pub const NAME: &str = "Caldera";

/// Tunables of the caldera score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Weight of the packing (BestFit) term against fragmentation growth in GPUs.
    pub fit_weight: f64,
    /// Count a shape as starved when the node lacks its memory (not only CPU).
    pub check_memory: bool,
    /// Blend of count frequency (0) and GPU-weighted frequency (1) for shapes.
    pub gpu_weighting: f64,
    /// Measure capacity fragmentation (CPU/memory-limited copies) instead of
    /// FGD's one-copy test.
    pub capacity: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            fit_weight: 0.1,
            check_memory: true,
            gpu_weighting: 0.0,
            capacity: true,
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
    for takes in choices(ctx) {
        let score = -frag_growth(ctx, &takes) / 1000.0;
        if best.as_ref().is_none_or(|b| score > b.score) {
            best = Some(Scored { score, gpus: takes });
        }
    }
    let n = ctx.norm;
    let cpu_left = ctx.state.cpu_free.saturating_sub(ctx.demand.cpu_milli) as f64 / n.max_cpu;
    let gpu_left = ctx
        .state
        .gpu_free_milli()
        .saturating_sub(request_milli(ctx)) as f64
        / n.max_gpu;
    let fit = 1.0 - (cpu_left + gpu_left) / 2.0;
    best.map(|b| Scored {
        score: b.score + p.fit_weight * fit,
        gpus: b.gpus,
    })
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
