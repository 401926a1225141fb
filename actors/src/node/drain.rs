//! Cordon and drain (a stop is a drain). A cordoned node
//! takes no new placements; a drained one also has its work moved away as a
//! planned stop, which spends no retry. An operator cordons or drains with
//! `caldera node cordon|drain NAME` (lifted only by `uncordon`); an agent
//! asked to stop (SIGTERM) says `Draining`, and that cordon is lifted by its
//! next hello. Persist, then act: the cordon is committed before the
//! Scheduler or any task hears of it, and a failed commit changes nothing.
use super::NodeActor;
use crate::commit_site::CommitSite;
use crate::durability::Ticket;
use crate::errors::{ActorError, Result};
use crate::protocol::node::{CordonNode, Uncordon};
use crate::protocol::scheduler::{AllocationsOn, NodeCordoned, NodeUp};
use crate::protocol::task::Drain;
use actix::prelude::*;
use caldera_spec::{Cordon, CordonBy, EventKind, NodeRecord, NodeState};

impl NodeActor {
    /// Tells the Scheduler the node is up, with its cordon.
    pub(super) fn announce_up(&self) {
        self.sh.scheduler.do_send(NodeUp {
            name: self.rec.name.clone(),
            inventory: self.rec.inventory.clone(),
            epoch: self.rec.epoch,
            cordoned: self.rec.cordon.is_some(),
        });
        // A rebuilt Scheduler knows no cache: tell it again.
        if let Some(c) = self.sh.fleet.get(&self.rec.name) {
            self.sh
                .scheduler
                .do_send(crate::protocol::scheduler::NodeWeightsUpdate {
                    name: self.rec.name.clone(),
                    weights: crate::model::fleet::node_weights(&c.report),
                });
        }
    }

    /// A hello after the agent's own drain: it is back, so its cordon goes
    /// from `planned`, the session's record, and is recorded with it. An
    /// operator's cordon stays.
    pub(super) fn lift_agent_cordon(planned: &mut NodeRecord) {
        if planned
            .cordon
            .as_ref()
            .is_some_and(|c| c.by == CordonBy::Agent)
        {
            tracing::info!(node = %planned.name, "the agent is back: its drain's cordon is lifted");
            planned.cordon = None;
        }
    }

    /// Records `cordon` with an event at `node_cordon`; not recorded, the
    /// record stays as it was, the actor is rebuilt from sled, and the error
    /// says nothing changed.
    fn record_cordon(&mut self, cordon: Option<Cordon>, message: String) -> Result<Ticket> {
        let mut planned = self.rec.clone();
        planned.cordon = cordon;
        let site = CommitSite::NodeCordon;
        self.record(site, planned, EventKind::NodeCordoned, message)
            .ok_or_else(|| {
                ActorError::NotRecorded(format!(
                    "the cordon of node {} could not be recorded; nothing was changed; retry",
                    self.rec.name
                ))
            })
    }

    /// Cordons the node (`drain`: and moves its work away), once recorded.
    /// An operator's cordon is not downgraded to an agent's.
    fn cordon(
        &mut self,
        ctx: &mut Context<Self>,
        by: CordonBy,
        drain: bool,
        why: &str,
        cluster_stopping: bool,
    ) -> Result<Ticket> {
        let by = match &self.rec.cordon {
            Some(c) if c.by == CordonBy::Operator => CordonBy::Operator,
            _ => by,
        };
        let drain = drain || self.rec.cordon.as_ref().is_some_and(|c| c.drain);
        let cordon = Cordon {
            by,
            drain,
            at_ms: self.sh.now_ms(),
        };
        let what = if drain { "drained" } else { "cordoned" };
        let message = format!(
            "node {} {what} ({why}): no new placements{}",
            self.rec.name,
            if drain {
                "; its work moves away as a planned stop (no retry spent)"
            } else {
                ""
            }
        );
        let ticket = self.record_cordon(Some(cordon), message)?;
        self.sh.scheduler.do_send(NodeCordoned {
            name: self.rec.name.clone(),
            cordoned: true,
        });
        if drain {
            self.move_work_away(ctx, Some(ticket), cluster_stopping);
        }
        Ok(ticket)
    }

    /// Tells every task with an allocation here to leave, as a planned stop,
    /// once the drain is durable (`ticket`; None: it already is).
    /// `cluster_stopping`: no node stays, so nothing is moved elsewhere first.
    fn move_work_away(
        &self,
        ctx: &mut Context<Self>,
        ticket: Option<Ticket>,
        cluster_stopping: bool,
    ) {
        let sh = self.sh.clone();
        let node = self.rec.name.clone();
        ctx.spawn(
            async move {
                if let Some(ticket) = ticket {
                    sh.gate.durable(ticket).await;
                }
                let allocs = sh
                    .scheduler
                    .send(AllocationsOn { node: node.clone() })
                    .await
                    .unwrap_or_default();
                for a in allocs.iter().filter(|a| a.node == node) {
                    if let Some(t) = sh.registry.task(&a.task_id) {
                        t.do_send(Drain {
                            allocation_id: a.allocation_id.clone(),
                            node: node.clone(),
                            cluster_stopping,
                        });
                    }
                }
            }
            .into_actor(self),
        );
    }

    /// A drained node said hello again (its agent restarted, or the control
    /// plane did and lost the moves it had under way in memory): the drain
    /// still holds, so whatever is still here is told to leave again. A task
    /// already leaving takes the repeat as a no-op.
    pub(super) fn resume_drain(&self, ctx: &mut Context<Self>) {
        if self.rec.cordon.as_ref().is_some_and(|c| c.drain) {
            tracing::info!(node = %self.rec.name, "node still drained: its remaining work is moved away");
            self.move_work_away(ctx, None, false);
        }
    }

    /// The agent says it is stopping (SIGTERM): drain the node, unless the
    /// message is of an older session. `cluster_stopping`: every node stops
    /// (`caldera up`), so its work is stopped where it is, not moved.
    pub(super) fn agent_draining(
        &mut self,
        ctx: &mut Context<Self>,
        epoch: u64,
        reason: &str,
        cluster_stopping: bool,
    ) {
        if epoch != self.rec.epoch || self.rec.state != NodeState::Ready {
            return;
        }
        let why = format!("its agent is stopping: {reason}");
        if let Err(e) = self.cordon(ctx, CordonBy::Agent, true, &why, cluster_stopping) {
            // Not recorded: nothing moves; the agent waits out its bound and
            // says what it left.
            tracing::error!(node = %self.rec.name, error = %e, "the agent's drain could not be recorded");
        }
    }
}

impl Handler<CordonNode> for NodeActor {
    type Result = ResponseFuture<Result<()>>;
    /// Answers once the cordon is durable.
    fn handle(&mut self, m: CordonNode, ctx: &mut Context<Self>) -> Self::Result {
        let asked = if m.drain {
            "caldera node drain"
        } else {
            "caldera node cordon"
        };
        let ticket = self.cordon(
            ctx,
            CordonBy::Operator,
            m.drain,
            &format!("an operator's {asked}"),
            false,
        );
        let gate = self.sh.gate.clone();
        Box::pin(async move {
            gate.durable(ticket?).await;
            Ok(())
        })
    }
}

impl Handler<Uncordon> for NodeActor {
    type Result = ResponseFuture<Result<()>>;
    /// Answers once the lifted cordon is durable; the Scheduler hears of it
    /// only then (persist, then act).
    fn handle(&mut self, _: Uncordon, _: &mut Context<Self>) -> Self::Result {
        let ticket = match &self.rec.cordon {
            None => None,
            Some(_) => {
                let message = format!("node {} uncordoned: placements there again", self.rec.name);
                Some(self.record_cordon(None, message))
            }
        };
        let gate = self.sh.gate.clone();
        let scheduler = self.sh.scheduler.clone();
        let name = self.rec.name.clone();
        Box::pin(async move {
            if let Some(t) = ticket {
                gate.durable(t?).await;
                scheduler.do_send(NodeCordoned {
                    name,
                    cordoned: false,
                });
            }
            Ok(())
        })
    }
}
