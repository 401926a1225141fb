//! `bestfit`: prefer the node left with the least CPU and GPU, each normalised by
//! the largest node and weighted equally (the FGD paper's BestFit baseline).
//!
//! score = trunc(100 * (1 - (0.5*(cpu_free-cpu_req)/C + 0.5*(gpu_free-gpu_req)/G)))
//! Example (C = 128 cores, G = 8 GPUs): 96 cores + 8 GPUs free, request 8 cores +
//! 1 GPU: left 88/128 = 0.6875 and 7/8 = 0.875 -> 1 - 0.78125 -> trunc(21.875) = 21.
use super::{request_milli, ScoreCtx, Scored};
use crate::placement::fit;

/// Plugin name.
pub const NAME: &str = "BestFit";

/// See the module comment. GPUs: best fit.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let gpus = fit::best_fit_gpus(ctx.state, ctx.demand)?;
    Some(Scored {
        score: (100.0 * closeness(ctx)).trunc(),
        gpus,
    })
}

/// How tightly the request fills the node, in [0, 1]: one minus the CPU and GPU
/// left over, each normalised by the largest node, equally weighted. Shared with
/// `caldera`, which uses it continuously as its fit term.
pub fn closeness(ctx: &ScoreCtx) -> f64 {
    let n = ctx.norm;
    let cpu_left = ctx.state.cpu_free.saturating_sub(ctx.demand.cpu_milli) as f64 / n.max_cpu;
    let gpu_left = ctx
        .state
        .gpu_free_milli()
        .saturating_sub(request_milli(ctx)) as f64
        / n.max_gpu;
    1.0 - (0.5 * cpu_left + 0.5 * gpu_left)
}
