//! A start command that could not be handed to its node (no live session,
//! the node lost or unknown). Nothing ran, so no retry is spent; the task goes
//! back to the queue, but asks for room again only after a backoff that grows
//! with each failure in a row: a node that keeps refusing is then not granted
//! again and again in a tight loop (each grant counts an attempt).
use super::{enter, steps, Outcome, Step};
use caldera_spec::{TaskRecord, TaskState};
use std::time::Duration;

/// First wait after a failed dispatch.
const FIRST_RETRY: Duration = Duration::from_millis(250);
/// Longest wait: a node that is back is used within this.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How long a task waits before asking for room again after its
/// `failures`-th failed dispatch in a row: 250 ms, doubled each time
/// (0.5 s, 1 s, 2 s, ...), at most 30 s.
pub fn dispatch_backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (FIRST_RETRY * 2u32.pow(doublings)).min(MAX_RETRY)
}

/// Back to the queue, asking for room again in `retry_in_ms`.
pub(super) fn dispatch_failed(
    rec: &TaskRecord,
    node: &str,
    why: &str,
    retry_in_ms: u64,
) -> Outcome {
    if !rec.state.holds_allocation() {
        return Outcome::Ignored("the task holds no allocation");
    }
    let why = format!("could not dispatch to {node}: {why}");
    steps(vec![
        Step::ForgetStop,
        Step::Free {
            reason: why.clone(),
        },
        Step::Unbind,
        enter(
            TaskState::Queued,
            format!("{why}; requeued, asks for room again in {retry_in_ms} ms"),
        ),
        Step::EnqueueAfter {
            delay_ms: retry_in_ms,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_a_quarter_second_up_to_thirty_seconds() {
        // (failures in a row, wait in ms)
        let rows = [
            (0, 250),
            (1, 250),
            (2, 500),
            (3, 1_000),
            (4, 2_000),
            (7, 16_000),
            // 250 ms x 2^7 = 32 s > 30 s: capped.
            (8, 30_000),
            (u32::MAX, 30_000),
        ];
        for (failures, ms) in rows {
            assert_eq!(
                dispatch_backoff(failures),
                Duration::from_millis(ms),
                "{failures}"
            );
        }
        // Fifteen seconds of failures make 6 grants (and attempts), not
        // thousands: the 6th comes 0.25 + 0.5 + 1 + 2 + 4 = 7.75 s after the
        // first, the 7th would come 8 s later, at 15.75 s.
        let mut spent = Duration::ZERO;
        let mut grants = 1;
        while spent + dispatch_backoff(grants) <= Duration::from_secs(15) {
            spent += dispatch_backoff(grants);
            grants += 1;
        }
        assert_eq!(grants, 6);
    }
}
