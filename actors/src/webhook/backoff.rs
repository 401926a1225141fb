//! When a delivery that did not get a 2xx is tried again: exponential
//! backoff with jitter, never past the retry window.

/// The retry policy, from config (`webhook-retry-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The first retry's delay, ms (default 10 s).
    pub initial_ms: u64,
    /// The longest delay, ms (default 1 h).
    pub max_ms: u64,
    /// No attempt later than this after the first one, ms (default 24 h).
    pub retry_for_ms: u64,
}

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// Try again at this time (ms).
    RetryAt(u64),
    /// The window is spent: the delivery failed.
    GiveUp,
}

impl RetryPolicy {
    /// The delay before retry number `n` (1 = after the first attempt):
    /// `initial * 2^(n-1)`, capped at `max`, then scaled by `jitter` in
    /// [0.8, 1.2) (`unit` in [0, 1) picks where), so receivers that failed
    /// together are not all retried in the same instant.
    pub fn delay_ms(&self, n: u32, unit: f64) -> u64 {
        let doublings = n.saturating_sub(1).min(40);
        let base = self
            .initial_ms
            .saturating_mul(1u64 << doublings)
            .min(self.max_ms);
        let jitter = 0.8 + 0.4 * unit.clamp(0.0, 0.999_999);
        (base as f64 * jitter) as u64
    }

    /// After attempt number `n` failed at `now` (the first attempt was at
    /// `first`): the next try, no later than `first + retry_for` — one last
    /// try at the window's end — or nothing once that has been tried.
    pub fn after_failure(&self, n: u32, first: u64, now: u64, unit: f64) -> NextStep {
        let deadline = first.saturating_add(self.retry_for_ms);
        if now >= deadline {
            return NextStep::GiveUp;
        }
        NextStep::RetryAt(now.saturating_add(self.delay_ms(n, unit)).min(deadline))
    }
}

/// A number in [0, 1) from the OS's randomness (0.5 if it has none: no
/// jitter is better than no retry).
pub fn jitter_unit() -> f64 {
    let mut b = [0u8; 4];
    match getrandom::fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: RetryPolicy = RetryPolicy {
        initial_ms: 10_000,
        max_ms: 3_600_000,
        retry_for_ms: 86_400_000,
    };

    /// unit 0.5 is the middle of the jitter: exactly the base delay.
    #[test]
    fn delays_double_from_ten_seconds_to_an_hour() {
        let rows = [
            (1, 10_000, "10 s"),
            (2, 20_000, "10 x 2"),
            (3, 40_000, "10 x 4"),
            (9, 2_560_000, "10 x 256 = 42.7 min"),
            (10, 3_600_000, "10 x 512 = 85 min, capped at 1 h"),
            (60, 3_600_000, "still 1 h, no overflow"),
        ];
        for (n, want, why) in rows {
            assert_eq!(DEFAULT.delay_ms(n, 0.5), want, "retry {n}: {why}");
        }
        // Jitter: 0.8x at unit 0, just under 1.2x near unit 1.
        assert_eq!(DEFAULT.delay_ms(1, 0.0), 8_000);
        assert!((11_999..12_000).contains(&DEFAULT.delay_ms(1, 0.999_999_9)));
        let u = jitter_unit();
        assert!((0.0..1.0).contains(&u));
    }

    /// Retries stop at the window: one last try at its end, then give up.
    #[test]
    fn the_window_ends_with_one_last_try_then_failure() {
        let p = RetryPolicy {
            initial_ms: 100,
            max_ms: 1_000,
            retry_for_ms: 2_500,
        };
        // First attempt at 0 failed: retry at 100.
        assert_eq!(p.after_failure(1, 0, 0, 0.5), NextStep::RetryAt(100));
        // Attempt 5 failed at 2_000: 100 x 16 = 1_600 would be 3_600 > 2_500.
        assert_eq!(p.after_failure(5, 0, 2_000, 0.5), NextStep::RetryAt(2_500));
        // The try at the window's end failed: no more.
        assert_eq!(p.after_failure(6, 0, 2_500, 0.5), NextStep::GiveUp);
    }
}
