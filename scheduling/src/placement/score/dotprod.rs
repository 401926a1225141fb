//! `dotprod` (Tetris, SIGCOMM'14, as in the FGD paper): prefer the node whose
//! remaining (CPU, GPU) vector has the smallest dot product with the request's,
//! each dimension normalised by the largest node.
//!
//! score = trunc(100 * (1 - (cpu_free/C * cpu_req/C + gpu_free/G * gpu_req/G) / 2))
//! Example (C = 128 cores, G = 8 GPUs): node 64 cores + 4 GPUs free, request 8
//! cores + 1 GPU: dot = 0.5*0.0625 + 0.5*0.125 = 0.09375; score = trunc(95.31) = 95.
use super::{request_milli, ScoreCtx, Scored};
use crate::placement::fit;

/// Plugin name.
pub const NAME: &str = "DotProduct";

/// See the module comment. GPUs: best fit.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let gpus = fit::best_fit_gpus(ctx.state, ctx.demand)?;
    let n = ctx.norm;
    let dot = (ctx.state.cpu_free as f64 / n.max_cpu) * (ctx.demand.cpu_milli as f64 / n.max_cpu)
        + (ctx.state.gpu_free_milli() as f64 / n.max_gpu) * (request_milli(ctx) as f64 / n.max_gpu);
    Some(Scored {
        score: (100.0 * (1.0 - dot / 2.0)).trunc(),
        gpus,
    })
}
