//! Gaps in a session's workload events. The agent numbers the events it
//! sends in a session from 1 and each heartbeat says how many it sent; the
//! socket keeps frames in order, so an event number that skips, repeats or
//! goes back, or a heartbeat that counts more events than arrived, means
//! the control plane missed what a workload did. Then it asks for a digest
//! (one at a time: a digest covers every gap before it).
//!
//! Pure: no actix, no clock, no I/O.
use std::collections::BTreeMap;

/// Heartbeats a digest may take before the control plane asks again (the
/// request or its answer was lost too).
const DIGEST_PATIENCE: u32 = 3;

/// The workload events of one session, as the control plane received them.
#[derive(Debug, Default)]
pub struct SessionEvents {
    /// The highest event number received (or covered by a digest).
    received: u64,
    /// Digests asked for and not yet received: request number -> why, and
    /// how many heartbeats have come since.
    asked: BTreeMap<u64, (String, u32)>,
    next_request: u64,
}

/// A request for a digest to send to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub request: u64,
}

impl SessionEvents {
    /// Event number `seq` arrived: the gap it shows, if any (0: an event
    /// the agent did not number, which shows nothing).
    pub fn event(&mut self, seq: u64) -> Option<String> {
        if seq == 0 {
            return None;
        }
        let expected = self.received + 1;
        self.received = self.received.max(seq);
        match seq.cmp(&expected) {
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater if seq == expected + 1 => Some(format!(
                "workload event {expected} never arrived (got {seq})"
            )),
            std::cmp::Ordering::Greater => Some(format!(
                "workload events {expected}..{} never arrived (got {seq})",
                seq - 1
            )),
            std::cmp::Ordering::Less => Some(format!(
                "workload event {seq} arrived out of order (after {})",
                expected - 1
            )),
        }
    }

    /// A heartbeat said `events_sent` events went out before it: the gap,
    /// if fewer arrived. Also counts the heartbeat against digests asked for.
    pub fn heartbeat(&mut self, events_sent: u64) -> Option<String> {
        for (_, waited) in self.asked.values_mut() {
            *waited += 1;
        }
        self.asked
            .retain(|_, (_, waited)| *waited < DIGEST_PATIENCE);
        (events_sent > self.received).then(|| {
            let first = self.received + 1;
            match events_sent - self.received {
                1 => format!("workload event {first} never arrived (the heartbeat counts {events_sent})"),
                _ => format!(
                    "workload events {first}..{events_sent} never arrived (the heartbeat counts {events_sent})"
                ),
            }
        })
    }

    /// A digest is wanted for `why`. Answers the request to send, or None
    /// when one asked for a gap is still on its way (it covers this one too).
    /// `always`: ask even then (a task that may have missed news after that
    /// digest was made).
    pub fn ask(&mut self, why: &str, always: bool) -> Option<Ask> {
        if !always && !self.asked.is_empty() {
            return None;
        }
        self.next_request += 1;
        let request = self.next_request;
        self.asked.insert(request, (why.to_string(), 0));
        Some(Ask { request })
    }

    /// A digest answering `request` arrived, covering `events_sent`
    /// events: answers why it was asked for (None: not asked, or asked so
    /// long ago that it was asked again; it is applied all the same).
    pub fn digest(&mut self, request: u64, events_sent: u64) -> Option<String> {
        self.received = self.received.max(events_sent);
        self.asked.remove(&request).map(|(why, _)| why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_in_order_show_no_gap() {
        let mut s = SessionEvents::default();
        assert_eq!((1..=5).filter_map(|n| s.event(n)).count(), 0);
        assert_eq!(s.heartbeat(5), None);
    }

    #[test]
    fn an_event_that_skips_a_number_shows_the_missing_one() {
        let mut s = SessionEvents::default();
        s.event(1);
        assert_eq!(
            s.event(3).as_deref(),
            Some("workload event 2 never arrived (got 3)")
        );
        assert_eq!(
            s.event(7).as_deref(),
            Some("workload events 4..6 never arrived (got 7)")
        );
        assert_eq!(s.event(8), None);
    }

    #[test]
    fn a_repeated_or_late_event_is_a_gap_and_unnumbered_ones_show_nothing() {
        let mut s = SessionEvents::default();
        s.event(1);
        s.event(2);
        assert!(s.event(2).unwrap().contains("out of order"));
        assert_eq!(s.event(0), None);
        assert_eq!(s.event(3), None);
    }

    #[test]
    fn a_heartbeat_counting_more_events_than_arrived_shows_the_lost_last_one() {
        let mut s = SessionEvents::default();
        s.event(1);
        assert_eq!(
            s.heartbeat(2).as_deref(),
            Some("workload event 2 never arrived (the heartbeat counts 2)")
        );
        assert!(s.heartbeat(4).unwrap().contains("2..4"));
    }

    #[test]
    fn one_digest_at_a_time_until_it_comes_or_patience_runs_out() {
        let mut s = SessionEvents::default();
        let first = s.ask("gap", false).expect("the first ask goes out");
        assert_eq!(s.ask("another gap", false), None, "one is on its way");
        // A task's ask goes out even so.
        let task = s.ask("task rebuilt", true).expect("a task's ask goes out");
        assert_ne!(first, task);
        assert_eq!(s.digest(task.request, 0).as_deref(), Some("task rebuilt"));
        // The first digest is lost: after its patience, a gap asks again.
        for _ in 0..DIGEST_PATIENCE {
            s.heartbeat(0);
        }
        let again = s.ask("gap", false).expect("asked again");
        assert_eq!(s.digest(first.request, 0), None, "given up on");
        // The digest covers the events it counts: no gap below them.
        assert_eq!(s.digest(again.request, 9).as_deref(), Some("gap"));
        assert_eq!(s.heartbeat(9), None);
        assert_eq!(s.event(10), None);
    }
}
