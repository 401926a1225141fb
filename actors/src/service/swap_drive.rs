//! Carrying a recorded swap out, replica by replica (filled in by the next
//! commits: warm, restart in place, wait ready, roll back).
use crate::task::TaskActor;
use actix::prelude::*;

impl TaskActor {
    /// Moves the swap under way on by one step, each recorded first.
    pub(crate) fn drive_swap(&mut self, _ctx: &mut Context<Self>) {
        let Some(swap) = &self.rec.swap else {
            return;
        };
        tracing::debug!(service = %self.id(), phase = swap.phase.as_str(), "swap tick");
    }
}
