//! `gpupacking`: prefer, in order, nodes whose partly used GPUs can take the
//! task, then nodes with some GPUs used, then empty nodes (the FGD paper's
//! GpuPacking baseline; integer scores as in its simulator).
//!
//! - all GPUs idle: 33 - idle GPUs (8-GPU node: 25)
//! - must use idle GPUs on a used node: max(50 - idle GPUs used, 33)
//! - fits on partly used GPUs: max(100 - (sum of free% on the GPUs used)/10, 50);
//!   e.g. a GPU with 400 milli free: 100 - 40/10 = 96.
//!
//! CPU-only requests score 0 everywhere (random among feasible).
use super::{ScoreCtx, Scored};
use crate::placement::fit;

/// Plugin name.
pub const NAME: &str = "GpuPacking";

/// See the module comment. GPUs: least free first.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let gpus = fit::best_fit_gpus(ctx.state, ctx.demand)?;
    if ctx.demand.gpu.count() == 0 {
        return Some(Scored { score: 0.0, gpus });
    }
    let idle = ctx.state.idle_gpus() as i64;
    let score = if idle == ctx.state.gpus.len() as i64 {
        (33 - idle).max(idle)
    } else {
        let used_idle = gpus
            .iter()
            .filter(|(p, _)| ctx.state.gpus[*p].is_idle())
            .count() as i64;
        if used_idle > 0 {
            (50 - used_idle).max(33)
        } else {
            let pct: i64 = gpus
                .iter()
                .map(|(p, _)| ctx.state.gpus[*p].free_milli() as i64 * 100 / 1000)
                .sum();
            (100 - pct / 10).max(50)
        }
    };
    Some(Scored {
        score: score as f64,
        gpus,
    })
}
