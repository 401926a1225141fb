//! `fgd` (Fragmentation Gradient Descent, ATC'23): choose the node and GPU whose
//! fragmentation (see [`crate::placement::frag`]) grows least. A sharing task
//! tries each GPU that fits; a whole-GPU task takes the least-free GPUs that fit.
//!
//! score = trunc(100 * sigmoid((F_before - F_after) / 1000)), integer like the
//! paper's simulator (whose ties are then broken at random).
//! Example: a node whose idle room is all fragment for the mix (F = 1000) takes a
//! 0.5-GPU task and keeps F = 500: sigmoid(0.5) = 0.622 -> 62. A task that turns
//! 500 milli of usable room into fragment: sigmoid(-0.5) = 0.378 -> 37.
use super::{ScoreCtx, Scored};
use crate::placement::fit;
use crate::placement::frag::free_after;

/// Plugin name.
pub const NAME: &str = "FGD";

/// Fragmentation growth (milli-GPUs, positive = worse) if `takes` were placed.
pub fn frag_growth(ctx: &ScoreCtx, takes: &[(usize, u64)]) -> f64 {
    frag_growth_to(ctx, &free_after(ctx.state, takes))
}

/// Fragmentation growth (milli-GPUs) if the node's GPUs were left with `free`
/// (per canonical position, see [`free_after`]) and the demand's CPU and
/// memory taken.
pub fn frag_growth_to(ctx: &ScoreCtx, free: &[u16]) -> f64 {
    let Some(frag) = ctx.frag else { return 0.0 };
    let after = frag.table.frag(
        free,
        ctx.state.cpu_free.saturating_sub(ctx.demand.cpu_milli),
        ctx.state.memory_free.saturating_sub(ctx.demand.memory_mib),
    );
    after - frag.before
}

/// Candidate GPU choices: each fitting GPU for a sharing task, the least-free
/// fitting GPUs otherwise (one choice; empty for CPU-only).
pub fn choices(ctx: &ScoreCtx) -> Vec<Vec<(usize, u64)>> {
    if ctx.demand.gpu.is_sharing() {
        // GPUs in canonical order with equal (model, capacity, free) are
        // interchangeable: score only the first of each run.
        let gpus = &ctx.state.gpus;
        gpus.iter()
            .enumerate()
            .filter(|(p, g)| *p == 0 || gpus[p - 1] != **g)
            .filter_map(|(p, g)| fit::gpu_take(g, ctx.demand).map(|u| vec![(p, u)]))
            .collect()
    } else {
        fit::best_fit_gpus(ctx.state, ctx.demand)
            .into_iter()
            .collect()
    }
}

/// See the module comment.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let mut best: Option<Scored> = None;
    for takes in choices(ctx) {
        let growth = frag_growth(ctx, &takes);
        let score = (100.0 * super::sigmoid(-growth / 1000.0)).trunc();
        if best.as_ref().is_none_or(|b| score > b.score) {
            best = Some(Scored { score, gpus: takes });
        }
    }
    best
}
