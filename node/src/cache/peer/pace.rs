//! `--peer-max-mbps`: a cap on the bytes per second the peer server sends,
//! shared by all its transfers, so serving peers never takes the node's
//! whole NIC (and a test can make a transfer slow enough to cut).
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Megabits per second -> bytes per second.
const BYTES_PER_MEGABIT: f64 = 125_000.0;

/// Spaces out sends so their total rate stays at the cap.
#[derive(Debug)]
pub struct Pace {
    bytes_per_s: f64,
    /// When the link is next free.
    next_free: Mutex<Instant>,
}

impl Pace {
    /// A pace of `mbps` megabits per second.
    pub fn new(mbps: f64) -> Pace {
        Pace {
            bytes_per_s: mbps * BYTES_PER_MEGABIT,
            next_free: Mutex::new(Instant::now()),
        }
    }

    /// How long to wait before sending `bytes`: the link is booked for
    /// `bytes / rate` from when it is next free.
    ///
    /// Example: at 8 Mbit/s (1 MB/s), two 500 kB sends booked at t=0: the
    /// first waits 0 and books until 0.5 s; the second waits 0.5 s.
    pub fn book(&self, bytes: usize) -> Duration {
        self.book_at(Instant::now(), bytes)
    }

    fn book_at(&self, now: Instant, bytes: usize) -> Duration {
        let mut next = self.next_free.lock().unwrap_or_else(|p| p.into_inner());
        let start = (*next).max(now);
        *next = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_s);
        start - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_booked_one_after_another_at_the_rate() {
        let pace = Pace::new(8.0);
        let t0 = Instant::now() + Duration::from_secs(1);
        assert_eq!(pace.book_at(t0, 500_000), Duration::ZERO);
        assert_eq!(pace.book_at(t0, 500_000), Duration::from_millis(500));
        // Later than the link is booked: no wait, booked from then.
        let t2 = t0 + Duration::from_secs(3);
        assert_eq!(pace.book_at(t2, 250_000), Duration::ZERO);
        assert_eq!(pace.book_at(t2, 1), Duration::from_millis(250));
    }
}
