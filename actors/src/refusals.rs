//! What nodes said that was refused, by reason, counted per node since boot
//! (shown on `/metrics`); [`crate::node_trust`] decides what is refused.
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Why something a node said was refused: the `reason` label on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// An event or report for an allocation this node does not hold.
    NotHeld,
    /// An event or report under an epoch that is not the node's current one.
    StaleEpoch,
    /// An allocation the node holds, named with another task's id.
    WrongTask,
    /// A checkpoint path outside the task's checkpoint dir.
    CheckpointOutsideDir,
    /// A hello for a registered name without its secret (or a wrong one).
    BadSecret,
    /// A hello for a name whose session is alive.
    LiveSession,
    /// A hello for a revoked node.
    Revoked,
    /// A hello the control plane could not answer (its Scheduler did not).
    HelloUnanswered,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::NotHeld => "not_held",
            Refusal::StaleEpoch => "stale_epoch",
            Refusal::WrongTask => "wrong_task",
            Refusal::CheckpointOutsideDir => "checkpoint_outside_dir",
            Refusal::BadSecret => "bad_secret",
            Refusal::LiveSession => "live_session",
            Refusal::Revoked => "revoked",
            Refusal::HelloUnanswered => "hello_unanswered",
        }
    }

    /// The registry entry the agent is told (in `Refused.code`).
    pub fn code(self) -> &'static caldera_spec::codes::ErrorCode {
        use caldera_spec::codes;
        match self {
            Refusal::BadSecret => &codes::NODE_SECRET_INVALID,
            Refusal::LiveSession => &codes::NODE_SESSION_LIVE,
            Refusal::Revoked => &codes::NODE_REVOKED,
            Refusal::HelloUnanswered => &codes::NODE_HELLO_UNANSWERED,
            _ => &codes::NODE_REPORT_REFUSED,
        }
    }
}

/// Refusals per (node, reason), since boot.
#[derive(Default)]
pub struct Refusals {
    counts: Mutex<BTreeMap<(String, Refusal), u64>>,
}

impl Refusals {
    pub(crate) fn bump(&self, node: &str, why: Refusal) {
        if let Ok(mut m) = self.counts.lock() {
            *m.entry((node.to_string(), why)).or_default() += 1;
        }
    }

    /// `(node, reason label, count)`, in order.
    pub fn snapshot(&self) -> Vec<(String, &'static str, u64)> {
        self.counts
            .lock()
            .map(|m| {
                m.iter()
                    .map(|((n, r), c)| (n.clone(), r.label(), *c))
                    .collect()
            })
            .unwrap_or_default()
    }
}
