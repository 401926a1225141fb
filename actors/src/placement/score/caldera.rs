//! `caldera`: fragmentation-aware scoring that improves on FGD (placeholder:
//! FGD without score quantisation; tuned below).
use super::fgd::{choices, frag_growth};
use super::{ScoreCtx, Scored};

/// Plugin name.
pub const NAME: &str = "Caldera";

/// See the module comment.
pub fn score(ctx: &ScoreCtx) -> Option<Scored> {
    let mut best: Option<Scored> = None;
    for takes in choices(ctx) {
        let score = -frag_growth(ctx, &takes);
        if best.as_ref().is_none_or(|b| score > b.score) {
            best = Some(Scored { score, gpus: takes });
        }
    }
    best
}

/// Caldera's fragmentation table: the mix, memory-aware.
pub fn table(
    mix: &crate::placement::mix::WorkloadMix,
    state: &crate::placement::state::NodeState,
) -> crate::placement::frag::FragTable {
    crate::placement::frag::FragTable::build(
        state,
        mix.shapes().iter().map(|s| (&s.demand, s.freq)),
        true,
    )
}
