//! `random`: every feasible node scores the same, so the seeded tie-break picks
//! one uniformly (the paper's Random baseline; GPUs are then chosen at random).
use super::{ScoreCtx, Scored};
use crate::placement::fit;

/// Plugin name.
pub const NAME: &str = "Random";

/// Constant score 0; GPUs best-fit here, re-drawn at random by the placer.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let gpus = fit::best_fit_gpus(ctx.state, ctx.demand)?;
    Some(Scored { score: 0.0, gpus })
}
