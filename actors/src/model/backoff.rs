//! When a node reads a version again after a failed read: the pure rule.
//! A source that cannot serve (an origin that refuses, answers 500, or is
//! not there) fails at once, so without a pause a node would ask it again
//! as fast as the round trip allows, and every try costs a record and an
//! event. The rule, per version and node:
//! 1. the first failure in a row is re-sourced at once: a cut read resumes
//!    where it stopped, and a lost peer is replaced without delay;
//! 2. from the second, the next read waits `first`, then twice as long
//!    after each further failure, up to `max`;
//! 3. after `attempts` failures in a row the copy is `failed`: no more
//!    reads until something changes (a new task needs it there, or a
//!    prewarm asks);
//! 4. a failed read that got at least [`PROGRESS_BYTES`] further than where
//!    it started starts the count again: a long transfer over a flaky link
//!    is not given up for being long.
//!
//! With the defaults (1 s, 5 min, 10 attempts) the waits after failures
//! 1..=10 are 0, 1, 2, 4, 8, 16, 32, 64, 128 s, then `failed`: about 4 min 15 s
//! of retries, 10 reads in all.
use std::time::Duration;

/// A failed read that got this much further than where it began counts as
/// progress: the failures before it are forgotten.
pub const PROGRESS_BYTES: u64 = 1 << 20;

/// The schedule (from `models.warm-retry-first-ms`, `models.warm-retry-max-ms`,
/// `models.warm-retry-attempts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub first: Duration,
    pub max: Duration,
    pub attempts: u32,
}

/// What follows a failed read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterFailure {
    /// Read again now (another source if one may serve).
    Now,
    /// Read again after this long.
    After(Duration),
    /// The budget is spent: stop.
    GiveUp,
}

impl RetryPolicy {
    /// What follows the `failures`-th failed read in a row (1 = the first).
    pub fn after(&self, failures: u32) -> AfterFailure {
        if failures >= self.attempts {
            return AfterFailure::GiveUp;
        }
        if failures <= 1 {
            return AfterFailure::Now;
        }
        // 2 -> first, 3 -> 2 x first, ...; a shift past 31 is past any cap.
        let doublings = (failures - 2).min(31);
        let wait = self.first.saturating_mul(1u32 << doublings);
        AfterFailure::After(wait.min(self.max))
    }
}

/// The failures in a row once a read that began at `began` bytes failed at
/// `done` bytes, `before` having failed in a row until then.
pub fn failures_in_a_row(before: u32, began: u64, done: u64) -> u32 {
    if done >= began.saturating_add(PROGRESS_BYTES) {
        1
    } else {
        before.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(first_ms: u64, max_ms: u64, attempts: u32) -> RetryPolicy {
        RetryPolicy {
            first: Duration::from_millis(first_ms),
            max: Duration::from_millis(max_ms),
            attempts,
        }
    }

    #[test]
    fn the_default_schedule_waits_0_1_2_4_and_so_on_then_gives_up_at_10() {
        let p = policy(1000, 300_000, 10);
        let waits: Vec<AfterFailure> = (1..=10).map(|n| p.after(n)).collect();
        let s = |secs| AfterFailure::After(Duration::from_secs(secs));
        assert_eq!(
            waits,
            [
                AfterFailure::Now,
                s(1),
                s(2),
                s(4),
                s(8),
                s(16),
                s(32),
                s(64),
                s(128),
                AfterFailure::GiveUp,
            ]
        );
    }

    #[test]
    fn the_wait_stops_growing_at_the_cap_and_never_overflows() {
        let p = policy(1000, 300_000, u32::MAX);
        // 2^8 s = 256 s < 300 s; 2^9 s = 512 s is capped.
        assert_eq!(p.after(10), AfterFailure::After(Duration::from_secs(256)));
        assert_eq!(p.after(11), AfterFailure::After(Duration::from_secs(300)));
        assert_eq!(
            p.after(u32::MAX - 1),
            AfterFailure::After(Duration::from_secs(300))
        );
    }

    #[test]
    fn a_failed_read_that_got_a_mebibyte_further_starts_the_count_again() {
        // Began at 0, failed at 1 MiB: progress.
        assert_eq!(failures_in_a_row(7, 0, PROGRESS_BYTES), 1);
        // Began at 5 MiB, failed 1 byte short of 6 MiB: no progress.
        assert_eq!(failures_in_a_row(7, 5 << 20, (6 << 20) - 1), 8);
        // A resumed read that failed before its first byte.
        assert_eq!(failures_in_a_row(0, 4096, 4096), 1);
        assert_eq!(failures_in_a_row(u32::MAX, 0, 0), u32::MAX);
    }
}
