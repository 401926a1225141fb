//! The agent's half of gap detection: each workload event gets its number
//! in the session as it goes out (from 1), and heartbeats and digests say
//! how many went out. The control plane, seeing a number skip or a count it
//! did not receive, asks for a digest of what the node holds (see
//! `caldera_spec::wire`, "Resync").
use caldera_spec::wire::WorkloadEvent;

/// The workload events sent in one session.
#[derive(Debug, Default)]
pub struct EventNumbers {
    sent: u64,
}

impl EventNumbers {
    /// How many events this session has sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Numbers `events` as they go out; answers the ones to send. (A test
    /// build may drop one here, numbered, to make a gap: see `drop_hook`.)
    pub fn number(&mut self, events: Vec<WorkloadEvent>) -> Vec<WorkloadEvent> {
        events
            .into_iter()
            .filter_map(|mut e| {
                self.sent += 1;
                e.seq = self.sent;
                (!drop_hook::drops(&e)).then_some(e)
            })
            .collect()
    }
}

/// Test builds only (the `failpoints` feature): an agent started with
/// `CALDERA_FAILPOINT_DROP_EVENT=<kind>` (`started`, `readiness`, `exited`,
/// ...) loses the first event of that kind after numbering it, as if it
/// never reached the control plane: the gap a resync must repair.
#[cfg(feature = "failpoints")]
mod drop_hook {
    use caldera_spec::wire::WorkloadEvent;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The environment variable naming the kind of event to drop once.
    const ENV: &str = "CALDERA_FAILPOINT_DROP_EVENT";
    static DROPPED: AtomicBool = AtomicBool::new(false);

    pub(super) fn drops(e: &WorkloadEvent) -> bool {
        let Ok(kind) = std::env::var(ENV) else {
            return false;
        };
        let named = serde_json::to_value(&e.kind)
            .ok()
            .is_some_and(|v| v["kind"] == kind.as_str());
        if named && !DROPPED.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                "fail point {ENV}: dropping event {} ({kind}) of allocation {}",
                e.seq,
                e.allocation_id
            );
            return true;
        }
        false
    }
}

#[cfg(not(feature = "failpoints"))]
mod drop_hook {
    pub(super) fn drops(_: &caldera_spec::wire::WorkloadEvent) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::wire::WorkloadEventKind;

    fn event(id: &str) -> WorkloadEvent {
        WorkloadEvent {
            allocation_id: id.into(),
            task_id: "t".into(),
            epoch: 1,
            at_ms: 0,
            kind: WorkloadEventKind::Preparing,
            seq: 0,
        }
    }

    #[test]
    fn events_are_numbered_from_one_across_flushes() {
        let mut n = EventNumbers::default();
        let first = n.number(vec![event("a"), event("b")]);
        let second = n.number(vec![event("c")]);
        let seqs: Vec<u64> = first.iter().chain(&second).map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(n.sent(), 3);
        assert_eq!(
            EventNumbers::default().sent(),
            0,
            "a new session counts afresh"
        );
    }
}
