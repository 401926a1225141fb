//! The node's lease as the agent keeps it for one session: heartbeats are
//! numbered from 1, each one's send instant is remembered (on
//! `CLOCK_BOOTTIME`, the clock the shims read), and a `LeaseRenewed{seq}`
//! moves the deadline to that send instant plus the welcome's `lease_ms`.
//! Counting from the send, not the answer, keeps the agent's deadline no
//! later than the control plane's, which counts from its answer.
use std::collections::VecDeque;
use std::time::Duration;

/// Send instants kept for renewals still to come (older ones are never answered in time).
const REMEMBERED: usize = 64;

/// One session's lease bookkeeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseClock {
    /// From the welcome; 0: the control plane has no leases.
    lease_ms: u64,
    last_seq: u64,
    /// (seq, send instant ms), oldest first.
    sent: VecDeque<(u64, u64)>,
    deadline: Option<u64>,
}

impl LeaseClock {
    /// The welcome's lease, counted from `hello_sent_ms` (a lease is held
    /// from the hello on). Returns the deadline to hand the shims: None for
    /// a control plane without leases.
    pub fn welcomed(&mut self, lease_ms: u64, hello_sent_ms: u64) -> Option<u64> {
        self.lease_ms = lease_ms;
        self.deadline = (lease_ms > 0).then(|| hello_sent_ms + lease_ms);
        self.deadline
    }

    /// Numbers the next heartbeat, sent at `now_ms`.
    pub fn next_heartbeat(&mut self, now_ms: u64) -> u64 {
        self.last_seq += 1;
        if self.sent.len() >= REMEMBERED {
            self.sent.pop_front();
        }
        self.sent.push_back((self.last_seq, now_ms));
        self.last_seq
    }

    /// Heartbeat `seq` was confirmed: the new deadline, when it moves later.
    pub fn renewed(&mut self, seq: u64) -> Option<u64> {
        if self.lease_ms == 0 {
            return None;
        }
        let sent = self.sent.iter().find(|(s, _)| *s == seq)?.1;
        let deadline = sent + self.lease_ms;
        if self.deadline.is_some_and(|d| d >= deadline) {
            return None;
        }
        self.deadline = Some(deadline);
        self.sent.retain(|(s, _)| *s > seq);
        self.deadline
    }
}

/// The grace a shim gives its workload once the lease has run out (SIGTERM,
/// this, SIGKILL): the agent's own grace, but never more than the control
/// plane's stop grace (`cp_stop_grace_ms` from the welcome; 0: an older
/// server that sent none). The control plane starts a lost node's fenced
/// tasks elsewhere lease + its stop grace after the last renewal; a longer
/// grace on the node would let the old copy run on beside the new one.
pub fn lapse_grace(agent_grace: Duration, cp_stop_grace_ms: u64) -> Duration {
    match cp_stop_grace_ms {
        0 => agent_grace,
        ms => agent_grace.min(Duration::from_millis(ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapsed_lease_never_gets_more_grace_than_the_control_plane_waits() {
        let s = Duration::from_secs;
        assert_eq!(lapse_grace(s(30), 10_000), s(10), "capped");
        assert_eq!(lapse_grace(s(2), 10_000), s(2), "shorter is kept");
        assert_eq!(lapse_grace(s(30), 0), s(30), "no figure, no cap");
    }

    #[test]
    fn a_renewal_counts_from_the_send_of_the_heartbeat_it_names() {
        let mut l = LeaseClock::default();
        // Hello sent at t=1000, lease 30 s.
        assert_eq!(l.welcomed(30_000, 1_000), Some(31_000));
        assert_eq!(l.next_heartbeat(2_000), 1);
        assert_eq!(l.next_heartbeat(3_000), 2);
        // Seq 2 confirmed: 3000 + 30000.
        assert_eq!(l.renewed(2), Some(33_000));
        // A late answer for seq 1 would move the deadline back: ignored.
        assert_eq!(l.renewed(1), None);
        // An unknown seq (another session's) renews nothing.
        assert_eq!(l.renewed(9), None);
    }

    #[test]
    fn no_lease_from_the_control_plane_means_no_deadline() {
        let mut l = LeaseClock::default();
        assert_eq!(l.welcomed(0, 1_000), None);
        let seq = l.next_heartbeat(2_000);
        assert_eq!(l.renewed(seq), None);
    }

    #[test]
    fn only_recent_send_instants_are_kept() {
        let mut l = LeaseClock::default();
        l.welcomed(10, 0);
        for t in 0..(REMEMBERED as u64 + 5) {
            l.next_heartbeat(t);
        }
        assert_eq!(l.renewed(1), None, "forgotten");
        assert_eq!(
            l.renewed(REMEMBERED as u64 + 5),
            Some(REMEMBERED as u64 + 4 + 10)
        );
    }
}
