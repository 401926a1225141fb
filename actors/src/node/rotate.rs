//! Rotating a node's secret (an operator's `caldera node rotate-secret
//! NAME`): for a secret that may have leaked while the node itself is fine.
//!
//! The new secret is handed over the node's live session, which the old
//! secret opened: no re-join, no join token on the node, and the node's
//! work stays where it is. Its hash replaces the old one in the record
//! before anything is sent, so from that commit on the old secret opens no
//! session (an impostor holding it is refused). The agent keeps the new one
//! in its data dir and presents it on every later hello. A node with no
//! live session cannot be handed a secret: the operator is told to revoke
//! it instead, as for a node whose session may itself be an impostor's.
use super::NodeActor;
use crate::errors::{ActorError, Result};
use crate::protocol::node::RotateSecret;
use actix::prelude::*;
use caldera_spec::wire::ServerMessage;
use caldera_spec::EventKind;

impl Handler<RotateSecret> for NodeActor {
    type Result = ResponseFuture<Result<()>>;
    /// Answers once the new secret's hash is durable and the secret is on
    /// its way to the agent.
    fn handle(&mut self, _: RotateSecret, _: &mut Context<Self>) -> Self::Result {
        match self.rotate() {
            Ok((ticket, hand_over)) => {
                let gate = self.sh.gate.clone();
                Box::pin(async move {
                    gate.durable(ticket).await;
                    hand_over()
                })
            }
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }
}

type HandOver = Box<dyn FnOnce() -> Result<()>>;

impl NodeActor {
    /// Records the new secret's hash; answers the commit's ticket and what
    /// sends the secret once that is durable (a secret sent before its hash
    /// is durable could be lost with a crash, and the node with it).
    fn rotate(&mut self) -> Result<(crate::durability::Ticket, HandOver)> {
        let name = self.rec.name.clone();
        if self.rec.revoked {
            return Err(ActorError::Conflict(format!(
                "node {name} is revoked: it has no secret to rotate"
            )));
        }
        let tx = match (&self.session, self.session_alive()) {
            (Some(s), true) => s.tx.clone(),
            _ => {
                return Err(ActorError::Conflict(format!(
                    "node {name} has no live session: a new secret is handed over only on \
                     one; if its secret may be in the wrong hands, revoke it \
                     (caldera node revoke {name})"
                )))
            }
        };
        let secret = crate::tokens::generate()
            .map_err(|e| ActorError::Unavailable(format!("no randomness for a secret: {e}")))?;
        let mut planned = self.rec.clone();
        planned.secret_sha256 = Some(self.sh.tokens.digest(&secret));
        let notice = format!(
            "node {name}: its secret was rotated by an operator; the old one no longer opens a session"
        );
        let site = crate::commit_site::CommitSite::NodeSecretRotate;
        let Some(ticket) = self.record(site, planned, EventKind::NodeSecretRotated, notice) else {
            return Err(ActorError::NotRecorded(format!(
                "the new secret of node {name} could not be recorded; nothing was changed; retry"
            )));
        };
        let epoch = self.rec.epoch;
        let hand_over: HandOver = Box::new(move || {
            tx.send(ServerMessage::NodeSecret { epoch, secret })
                .map_err(|_| {
                    ActorError::Conflict(format!(
                        "node {name}'s session closed before its new secret was handed over: \
                         the old secret no longer works; revoke the node and join it again"
                    ))
                })
        });
        Ok((ticket, hand_over))
    }
}
