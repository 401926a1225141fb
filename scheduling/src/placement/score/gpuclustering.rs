//! `gpuclustering`: prefer nodes already running tasks of the same kind
//! (GPU-sharing vs k whole GPUs), fuller nodes first within a tier (the FGD
//! paper's GpuClustering baseline; integer scores as in its simulator).
//!
//! fill = 25 * (G - gpu_free) / G (integer division), plus a tier offset:
//! only this kind on the node: +75; this kind among others: +50; empty node: +25;
//! other kinds only: +0. Example (G = 8 GPUs): 8-GPU node with 3 GPUs free running
//! only sharing tasks, sharing request: 25*5000/8000 = 15 -> 90.
use super::{ScoreCtx, Scored};
use crate::placement::fit;
use crate::placement::pool::task_kind;

/// Plugin name.
pub const NAME: &str = "GpuClustering";

/// See the module comment. GPUs: best fit.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let gpus = fit::best_fit_gpus(ctx.state, ctx.demand)?;
    let Some(kind) = task_kind(&ctx.demand.gpu) else {
        return Some(Scored { score: 0.0, gpus });
    };
    let g = ctx.norm.max_gpu as i64;
    let fill = 25 * (g - ctx.state.gpu_free_milli() as i64).max(0) / g.max(1);
    let kinds = &ctx.state.kinds;
    let tier = if kinds.iter().any(|(k, _)| *k == kind) {
        if kinds.len() == 1 {
            75
        } else {
            50
        }
    } else if kinds.is_empty() {
        25
    } else {
        0
    };
    Some(Scored {
        score: (fill + tier) as f64,
        gpus,
    })
}
