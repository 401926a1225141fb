//! A task leaving its node: the fence timer of a task whose node was lost
//! (`on_node_loss: fence`), and the drain of its node. The decisions are the
//! lifecycle table's (`lifecycle/moves.rs`); this file only carries them out.
use super::TaskActor;
use crate::lifecycle::Input;
use crate::protocol::service::ReplicaDrained;
use crate::protocol::task::{Drain, NodeLost};
use actix::prelude::*;
use caldera_spec::TaskState;
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
    /// A running replica asks its service first: moved make-before-break,
    /// it keeps running until its replacement does and the service releases
    /// it; otherwise (or with no service to ask, or with the whole cluster
    /// stopping, so no node stays to run a replacement) it drains as any task.
    /// With the whole cluster stopping, a reservation stays where it is.
    fn handle(&mut self, m: Drain, ctx: &mut Context<Self>) {
        if m.cluster_stopping && self.rec.spec.is_reservation() {
            // A reservation runs nothing, and no node stays to take it: it
            // stays held, and the node's agent keeps it for the next start
            // (its hello reports it, so it comes back still running).
            return;
        }
        let parent = self.service().filter(|_| !m.cluster_stopping);
        match parent {
            Some(p) if self.rec.state == TaskState::Running => {
                let ask = p.send(ReplicaDrained {
                    replica: self.id().to_string(),
                    node: m.node.clone(),
                });
                ctx.wait(ask.into_actor(self).map(move |moved, act, ctx| {
                    if !matches!(moved, Ok(true)) {
                        act.drain_as_task(ctx, &m);
                    }
                }));
            }
            _ => self.drain_as_task(ctx, &m),
        }
    }
}

impl TaskActor {
    fn drain_as_task(&mut self, ctx: &mut Context<Self>, m: &Drain) {
        let input = Input::Drain {
            allocation_id: &m.allocation_id,
            node: &m.node,
            stop_grace_ms: self.sh.config.nodes.stop_grace_ms,
        };
        self.react(ctx, input, None);
    }
}
