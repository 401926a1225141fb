//! Messages a NodeActor answers, and [`NodeHandle`].
use super::handle::handle;
use super::lifecycle::{Observe, Rebuild};
use crate::errors::Result;
use actix::prelude::*;
use caldera_spec::wire::{Hello, NodeMessage, ServerMessage, StartCommand};
use caldera_spec::{NodeMetrics, NodeRecord};
use tokio::sync::mpsc::UnboundedSender;

/// An agent opened a session and said hello.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AgentHello {
    pub hello: Hello,
    pub session_id: u64,
    pub tx: UnboundedSender<ServerMessage>,
}

/// A frame from the agent after the hello.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AgentMessage {
    pub session_id: u64,
    pub msg: NodeMessage,
}

/// The agent's socket closed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct AgentGone {
    pub session_id: u64,
}

/// Start a workload (from its TaskActor). Answers the lease epoch it was sent
/// under; fails when the node has no session.
#[derive(Message)]
#[rtype(result = "std::result::Result<u64, DispatchRefused>")]
pub struct Dispatch(pub StartCommand);

/// Why a start was not sent; the task retries it after a backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DispatchRefused {
    /// The node is not Ready: nothing more is started there.
    #[error("node is lost")]
    Lost,
    /// The node's agent is not connected now.
    #[error("node has no live session")]
    NoSession,
}

/// Stop a workload: SIGTERM, grace, SIGKILL on the node.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct StopWorkload {
    pub allocation_id: String,
    pub grace_ms: u64,
    pub reason: String,
}

/// The tail of an allocation's log, fetched from the node.
#[derive(Message)]
#[rtype(result = "Result<LogChunk>")]
pub struct FetchLogs {
    pub allocation_id: String,
    pub task_id: String,
    pub tail_bytes: u64,
    /// Read from this offset instead of the tail (following a log).
    pub from_byte: Option<u64>,
}

/// What a node sent of a log: the text, whether bytes before it were left
/// out, and (read from an offset) the offset just past it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogChunk {
    pub content: String,
    pub truncated: bool,
    pub end_byte: Option<u64>,
}

/// An operator revoked the node: its secret stops working, its live session
/// is closed and its tasks are handled as on node loss. Answers false when it
/// was revoked already.
#[derive(Message)]
#[rtype(result = "crate::errors::Result<bool>")]
pub struct Revoke;

/// An operator rotated the node's secret: a new one is recorded (the old
/// one stops opening sessions at once) and handed to the agent over its
/// live session. Refused when the node has no live session.
#[derive(Message)]
#[rtype(result = "crate::errors::Result<()>")]
pub struct RotateSecret;

/// An operator's `caldera node cordon|drain NAME`: no new placements there;
/// with `drain`, its work is moved away as a planned stop. Answers once the
/// cordon is durable; a failed commit answers 503 and changes nothing.
#[derive(Message)]
#[rtype(result = "Result<()>")]
pub struct CordonNode {
    pub drain: bool,
}

/// `caldera node uncordon NAME`: placements there again.
#[derive(Message)]
#[rtype(result = "Result<()>")]
pub struct Uncordon;

/// Record, connection state and latest metrics.
#[derive(Message)]
#[rtype(result = "(NodeRecord, bool, NodeMetrics)")]
pub struct NodeSnapshot;

/// A task rebuilt from sled while its record still holds `allocation_id`
/// asks its node to tell it again what its workload did: an exit this
/// session already forwarded for that allocation goes again (the rebuilt
/// task may never have recorded it: its commit failed); otherwise the node
/// resyncs (a digest of what it holds, compared with the books), so a start
/// or readiness the task could not record reaches it again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ResendExit {
    pub allocation_id: String,
    pub task_id: String,
}

/// A weights command for the agent (`Warm`, `PeerGrant`, `Pin`, `Evict`),
/// stamped with the node's current epoch here. Answers whether it went out
/// on a live session.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct SendWeights(pub ServerMessage);

/// A pull slot freed for `key` (an allocation id, or a pre-pull's key) held
/// back on this node: send what waited for it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PullSlotFree {
    pub key: String,
}

/// The operator's pre-pull of `image` onto this node. Answers
/// `Ok(true)` sent now, `Ok(false)` waiting for a pull slot, `Err` when the
/// node has no live session.
#[derive(Message)]
#[rtype(result = "std::result::Result<bool, NoLiveSession>")]
pub struct SendPrepull {
    pub image: String,
    pub timeout_ms: u64,
}

/// A command for a node whose agent is not connected now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node} has no live session")]
pub struct NoLiveSession {
    pub node: String,
}

/// The scheduler was rebuilt: a connected node announces its room again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reannounce;

handle! {
    /// A node's session actor, as the directory, its tasks and the gateway's socket hold it.
    NodeHandle: NodePort {
        tell {
            rebuild: Rebuild,
            agent_hello: AgentHello,
            agent_message: AgentMessage,
            agent_gone: AgentGone,
            reannounce: Reannounce,
            resend_exit: ResendExit,
            pull_slot_free: PullSlotFree,
            send_weights_unanswered: SendWeights,
            // A task asks for a stop without waiting for the answer.
            stop_unanswered: StopWorkload,
        }
        ask {
            observe: Observe,
            dispatch: Dispatch,
            send_weights: SendWeights,
            stop_workload: StopWorkload,
            fetch_logs: FetchLogs,
            snapshot: NodeSnapshot,
            prepull: SendPrepull,
            revoke: Revoke,
            rotate_secret: RotateSecret,
            cordon: CordonNode,
            uncordon: Uncordon,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused start's words go into the task's dispatch-failure event,
    /// a pre-pull's into its 409: they read as they always have.
    #[test]
    fn an_unsent_command_says_why_in_the_words_users_read() {
        assert_eq!(DispatchRefused::Lost.to_string(), "node is lost");
        assert_eq!(
            DispatchRefused::NoSession.to_string(),
            "node has no live session"
        );
        let unsent = NoLiveSession {
            node: "gpu-7".into(),
        };
        assert_eq!(unsent.to_string(), "node gpu-7 has no live session");
    }
}
