//! Time for the shells: one clock, injected through `Shared`, that all record
//! timestamps and timers agree on. Placement itself never reads a clock.
//!
//! The clock is the boot wall time plus *monotonic* elapsed time, read from
//! tokio's clock. Two consequences, both on purpose:
//! - a wall-clock step backwards (NTP, an operator) never makes time run
//!   backwards inside the control plane, so differences never underflow;
//! - tests pause tokio's clock (`tokio::time::pause`) and `advance` it, and the
//!   shells' timers *and* timestamps move together: accelerated time.
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// Milliseconds since the Unix epoch, from the system clock. For code that has
/// no [`Clock`] at hand (the boot banner, request ids).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The control plane's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base_wall_ms: u64,
    base: Instant,
}

impl Clock {
    /// A clock that reads the system's wall time once, now, and runs on
    /// monotonic time from there.
    pub fn start() -> Clock {
        Clock {
            base_wall_ms: now_ms(),
            base: Instant::now(),
        }
    }

    /// A clock that says `wall_ms` now (tests start at a known time).
    pub fn starting_at(wall_ms: u64) -> Clock {
        Clock {
            base_wall_ms: wall_ms,
            base: Instant::now(),
        }
    }

    /// Milliseconds since the Unix epoch, never decreasing.
    pub fn now_ms(&self) -> u64 {
        self.base_wall_ms
            .saturating_add(self.base.elapsed().as_millis() as u64)
    }

    /// The monotonic instant, for liveness and timeouts.
    pub fn instant(&self) -> Instant {
        Instant::now()
    }

    /// Time since `earlier`, zero if `earlier` is in the future (a grace).
    pub fn since(&self, earlier: Instant) -> Duration {
        Instant::now().saturating_duration_since(earlier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paused_time_moves_the_clock_by_exactly_what_was_advanced() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let c = Clock::starting_at(1_000_000);
            assert_eq!(c.now_ms(), 1_000_000);
            tokio::time::advance(Duration::from_millis(4_500)).await;
            // 1,000,000 + 4,500 ms advanced.
            assert_eq!(c.now_ms(), 1_004_500);
            let t = c.instant();
            tokio::time::advance(Duration::from_secs(2)).await;
            assert_eq!(c.since(t), Duration::from_secs(2));
            // An instant in the future (a boot grace) reads as zero, never a panic.
            assert_eq!(
                c.since(c.instant() + Duration::from_secs(9)),
                Duration::ZERO
            );
        });
    }
}
