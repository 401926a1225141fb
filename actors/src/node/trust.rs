//! What a node's session may say, applied to the NodeActor (the rules are in
//! `crate::node_trust`): which hellos open a session, which events and
//! reports reach a task, and revocation.
use super::NodeActor;
use crate::node_trust::{self, Refusal, Verdict};
use crate::protocol::node::{AgentHello, Revoke};
use actix::prelude::*;
use caldera_spec::wire::{AllocationUse, ServerMessage, UsageReport, WorkloadEvent};
use caldera_spec::{EventKind, NodeState};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// What the agent is told when its hello is refused.
fn hello_refusal(why: Refusal, name: &str) -> String {
    match why {
        Refusal::Revoked => format!("node {name} was revoked by an operator"),
        Refusal::LiveSession => format!(
            "node {name} already has a live session; a second one is refused while it lasts"
        ),
        _ => format!(
            "node {name} is registered: the hello must carry its node_secret \
             (kept in that agent's data dir)"
        ),
    }
}

impl NodeActor {
    /// Whether `m` may open a session: `Some(secret to issue, if any)`, or
    /// None when it was refused (the agent told, the refusal counted).
    pub(super) fn admit_hello(&mut self, m: &AgentHello) -> Option<Option<String>> {
        let presented = m.hello.node_secret.as_deref();
        let issue =
            match node_trust::admit(&self.rec, self.session_alive(), presented, &self.sh.tokens) {
                Ok(issue) => issue,
                Err(why) => {
                    let detail = hello_refusal(why, &self.rec.name);
                    self.refuse_hello(&m.tx, why, detail);
                    return None;
                }
            };
        let secret = match issue.then(crate::tokens::generate).transpose() {
            Ok(s) => s,
            Err(e) => {
                let detail = format!("no node secret could be generated: {e}");
                self.refuse_hello(&m.tx, Refusal::BadSecret, detail);
                return None;
            }
        };
        // Its hash goes into the record with the session it opens.
        Some(secret)
    }

    /// Whether the session may speak for `allocation_id`: the task to tell,
    /// or None (dropped, or refused and counted).
    pub(super) fn vouch(
        &self,
        epoch: u64,
        allocation_id: &str,
        task_id: &str,
        what: &str,
    ) -> Option<String> {
        match self
            .held
            .check(self.rec.epoch, epoch, allocation_id, task_id)
        {
            Verdict::Accept(task) => Some(task),
            Verdict::Drop => None,
            Verdict::Refuse(why) => {
                let detail = format!(
                    "{what} for allocation {allocation_id} (task {task_id:?}, epoch {epoch}; current epoch {})",
                    self.rec.epoch
                );
                node_trust::refuse(&self.sh, &self.rec.name, why, &detail);
                None
            }
        }
    }

    pub(super) fn on_event(&mut self, ev: WorkloadEvent) {
        // Once its exit is in, the node has nothing more to say for it.
        if self.exits_forwarded.contains_key(&ev.allocation_id) {
            return;
        }
        let what = format!("{:?} event", ev.kind);
        if let Some(task) = self.vouch(ev.epoch, &ev.allocation_id, &ev.task_id, &what) {
            self.forward(&task, &ev.allocation_id, ev.kind);
        }
    }

    /// The usage of the heartbeat's entries the node may speak for (the
    /// heartbeat's epoch is the session's, checked before). A heartbeat
    /// carries only usage: what the workloads did comes in events, and in a
    /// resync when one was missed.
    pub(super) fn usage_of(&self, reports: &[UsageReport]) -> Vec<(String, AllocationUse)> {
        reports
            .iter()
            .filter(|u| !self.exits_forwarded.contains_key(&u.allocation_id))
            .filter(|u| {
                // An allocation not held names no task: refused as not held.
                let task = self.held.task_of(&u.allocation_id).unwrap_or_default();
                self.vouch(self.rec.epoch, &u.allocation_id, &task, "heartbeat usage")
                    .is_some()
            })
            .map(|u| (u.allocation_id.clone(), u.usage.clone()))
            .collect()
    }

    /// Whether the current session still speaks: heard within two heartbeat
    /// periods. A silent one (a half-open socket the agent already gave up
    /// on, as its pings went unanswered) may be superseded by a hello that
    /// carries the secret; a live one never is.
    pub(super) fn session_alive(&self) -> bool {
        let quiet = Duration::from_millis(2 * self.sh.config.nodes.heartbeat_interval_ms);
        self.session.is_some() && self.sh.clock.since(self.last_seen) < quiet
    }

    /// Refuses a hello: the agent is told why, the refusal is counted, and
    /// dropping `tx` closes that socket.
    pub(super) fn refuse_hello(
        &self,
        tx: &UnboundedSender<ServerMessage>,
        why: Refusal,
        detail: String,
    ) {
        node_trust::refuse(
            &self.sh,
            &self.rec.name,
            why,
            &format!("hello refused: {detail}"),
        );
        let _ = tx.send(ServerMessage::Refused {
            reason: detail,
            code: why.code().code,
        });
    }
}

impl Handler<Revoke> for NodeActor {
    type Result = ResponseFuture<crate::errors::Result<bool>>;
    /// Answers once the revocation is durable.
    fn handle(&mut self, _: Revoke, ctx: &mut Context<Self>) -> Self::Result {
        if self.rec.revoked {
            return Box::pin(async { Ok(false) });
        }
        let mut planned = self.rec.clone();
        planned.revoked = true;
        planned.secret_sha256 = None;
        let notice = format!(
            "node {} revoked by an operator: its secret no longer opens a session",
            self.rec.name
        );
        // Recorded first: a revocation that could not be recorded is not made.
        let site = crate::commit_site::CommitSite::NodeRevoke;
        let Some(ticket) = self.record(site, planned, EventKind::NodeRevoked, notice) else {
            let e = crate::errors::ActorError::NotRecorded(format!(
                "the revocation of node {} could not be recorded; nothing was changed; retry",
                self.rec.name
            ));
            return Box::pin(async move { Err(e) });
        };
        self.send(ServerMessage::Refused {
            reason: format!("node {} was revoked by an operator", self.rec.name),
            code: caldera_spec::codes::NODE_REVOKED.code,
        });
        if self.rec.state == NodeState::Ready {
            self.lose(ctx);
        }
        self.session = None;
        let sh = self.sh.clone();
        Box::pin(async move {
            sh.gate.durable(ticket).await;
            Ok(true)
        })
    }
}
