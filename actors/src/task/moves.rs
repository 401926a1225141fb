//! A task leaving its node: the fence timer of a task whose node was lost
//! (`on_node_loss: fence`), and the drain of its node. The decisions are the
//! lifecycle table's (`lifecycle/moves.rs`); this file only carries them out.
use super::TaskActor;
use crate::lifecycle::Input;
use crate::protocol::task::{Drain, NodeLost};
use actix::prelude::*;
use std::time::Duration;

impl TaskActor {
    /// Arms the timer of the recorded fence, if any. The fence's deadline is
    /// recorded with the reaction that set it (`task_reaction`); a control
    /// plane restarted meanwhile arms it again from that wall-clock deadline
    /// (`started`), so it never requeues early.
    pub(crate) fn arm_fence(&mut self, ctx: &mut Context<Self>) {
        let (Some(until_ms), Some(alloc)) = (self.rec.fenced_until_ms, self.allocation_id()) else {
            return;
        };
        let wait = Duration::from_millis(until_ms.saturating_sub(self.sh.now_ms()));
        ctx.run_later(wait, move |act, ctx| {
            let input = Input::FenceOver {
                allocation_id: &alloc,
            };
            act.react(ctx, input, None);
        });
    }
}

impl Handler<NodeLost> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: NodeLost, ctx: &mut Context<Self>) {
        let now_ms = self.sh.now_ms();
        let input = Input::NodeLost {
            node: &m.node,
            fence_wait_ms: m.fence_until_ms.saturating_sub(now_ms),
            now_ms,
        };
        self.react(ctx, input, None);
    }
}

impl Handler<Drain> for TaskActor {
    type Result = ();
    fn handle(&mut self, m: Drain, ctx: &mut Context<Self>) {
        let input = Input::Drain {
            allocation_id: &m.allocation_id,
            node: &m.node,
            stop_grace_ms: self.sh.config.stop_grace_ms,
        };
        self.react(ctx, input, None);
    }
}
