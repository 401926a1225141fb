//! The node's lease, control-plane side (protocol 3): every heartbeat
//! accepted under the current epoch is answered with `LeaseRenewed`, and the
//! instant of the last answer is remembered on the monotonic clock. When the
//! node is lost, a `fence` task is requeued only once that lease, the stop
//! grace the shim gives its workload and [`crate::node_loss::FENCE_MARGIN`]
//! have passed since that instant (`node_loss::fence_wait`).
//!
//! The agent's deadline counts from when it *sent* the heartbeat, so it is
//! never later than ours, which counts from when we answered. After a
//! control-plane restart the last answer is not known: the actor starts with
//! "renewed just now" (its creation), which is never earlier than any renewal
//! sent before the restart, and boot grace keeps the node from being declared
//! lost before its agent had the chance to reconnect.
use super::NodeActor;
use caldera_spec::wire::ServerMessage;
use std::time::Duration;

impl NodeActor {
    /// Answers heartbeat `seq`, accepted under the current epoch, with
    /// `LeaseRenewed`; the lease counts from this answer.
    pub(super) fn renew_lease(&mut self, seq: u64) {
        let renewed = ServerMessage::LeaseRenewed {
            epoch: self.rec.epoch,
            seq,
        };
        if self.send(renewed) {
            self.lease_renewed = self.sh.clock.instant();
        }
    }

    /// How long the lease the agent may still hold lasts (from the welcome).
    pub(super) fn lease_ms(&self) -> u64 {
        self.sh.config.nodes.workload_lease_ms
    }

    /// From now, how long until the node's workloads have stopped by
    /// themselves: the rest of the last lease, plus the stop grace and margin.
    pub(super) fn fence_wait(&self) -> Duration {
        crate::node_loss::fence_wait(
            self.sh.clock.since(self.lease_renewed),
            Duration::from_millis(self.lease_ms()),
            Duration::from_millis(self.sh.config.nodes.stop_grace_ms),
        )
    }
}
