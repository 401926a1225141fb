//! Reconnect delays: 200 ms doubling to a 5 s cap, each with "equal jitter"
//! (half fixed, half random) so a fleet of agents does not reconnect in lockstep
//! after a control plane restart.
use std::time::Duration;

/// Exponential backoff with jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    current: Duration,
    rng: u64,
}

impl Backoff {
    /// Starts at `base`, doubles per failure, never exceeds `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ (u64::from(std::process::id()) << 32);
        Backoff {
            base,
            cap,
            current: base,
            rng: seed | 1,
        }
    }

    /// The agent's default: 200 ms to 5 s.
    pub fn standard() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(5))
    }

    /// The next delay, in `[d/2, d]` for the current step `d`; then doubles `d`.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.current;
        self.current = (self.current * 2).min(self.cap);
        let half = step / 2;
        let span = (step - half).as_millis() as u64;
        half + Duration::from_millis(if span == 0 {
            0
        } else {
            self.next_random() % (span + 1)
        })
    }

    /// Back to the base delay (after a session that was welcomed).
    pub fn reset(&mut self) {
        self.current = self.base;
    }

    /// xorshift64: plenty for jitter, no dependency.
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_bounded_jitter_and_resets() {
        let mut b = Backoff::standard();
        // Steps: 200, 400, 800, 1600, 3200, 5000, 5000 ms; each delay in [step/2, step].
        for step in [200u64, 400, 800, 1600, 3200, 5000, 5000] {
            let d = b.next_delay().as_millis() as u64;
            assert!(d >= step / 2 && d <= step, "step {step}: {d}");
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(200));
    }
}
