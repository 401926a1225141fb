//! How often the portal's login may be tried: each principal may log in
//! `per_minute` times a minute, and each client address may fail that many
//! times a minute (later failures are answered 429). Without the first, one
//! tenant's script opens sessions as fast as the server answers; without the
//! second, a script tries tokens as fast. A successful login is counted
//! against its principal, never its address, and a valid token is never
//! refused for its address's failures: a person behind the same address as
//! a guessing script (one NAT, one proxy) still logs in, so one tenant
//! cannot lock the operator out. (Guessing a token is hopeless either way:
//! generated tokens hold 256 random bits, configured ones at least 16
//! characters.)
use std::collections::HashMap;
use std::sync::Mutex;

/// The window the counts cover, ms.
pub const WINDOW_MS: u64 = 60_000;
/// Most keys remembered; past it the ones whose window ended are forgotten,
/// and a new key beyond that is refused (its window cannot be kept).
const MAX_KEYS: usize = 100_000;

/// A refused login: when its key may try again, s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

/// Login counts per key in fixed one-minute windows.
pub struct LoginRate {
    per_minute: u32,
    windows: Mutex<HashMap<String, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: u64,
    count: u32,
}

impl LoginRate {
    /// At most `per_minute` counted logins per key a minute (at least 1).
    pub fn new(per_minute: u32) -> LoginRate {
        LoginRate {
            per_minute: per_minute.max(1),
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// The limit, per key and minute.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Counts one login of `key` at `now_ms`, or refuses it when the key
    /// had `per_minute` in its window already (a refused one is not counted).
    pub fn count(&self, key: &str, now_ms: u64) -> Result<(), RetryAfter> {
        let mut map = self.lock();
        if map.len() >= MAX_KEYS && !map.contains_key(key) {
            map.retain(|_, w| w.live_at(now_ms));
            if map.len() >= MAX_KEYS {
                return Err(RetryAfter(WINDOW_MS / 1000));
            }
        }
        let w = map.entry(key.to_string()).or_insert(Window {
            start_ms: now_ms,
            count: 0,
        });
        if !w.live_at(now_ms) {
            *w = Window {
                start_ms: now_ms,
                count: 0,
            };
        }
        if w.count >= self.per_minute {
            return Err(w.retry_after(now_ms));
        }
        w.count += 1;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Window>> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Window {
    fn live_at(&self, now_ms: u64) -> bool {
        now_ms < self.start_ms.saturating_add(WINDOW_MS)
    }

    /// Seconds until the window ends, rounded up (at least 1).
    fn retry_after(&self, now_ms: u64) -> RetryAfter {
        let left = self
            .start_ms
            .saturating_add(WINDOW_MS)
            .saturating_sub(now_ms);
        RetryAfter(left.div_ceil(1000).max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gets_its_per_minute_then_waits_for_the_next_window() {
        let r = LoginRate::new(3);
        for t in 0..3 {
            assert_eq!(r.count("tenant:a", t), Ok(()));
        }
        assert_eq!(r.count("tenant:a", 10), Err(RetryAfter(60)));
        assert_eq!(r.count("tenant:a", 59_500), Err(RetryAfter(1)));
        assert_eq!(r.count("operator", 10), Ok(()), "keys are counted apart");
        assert_eq!(r.count("tenant:a", 60_000), Ok(()), "a new window");
    }

    #[test]
    fn a_refused_login_is_not_counted() {
        let r = LoginRate::new(1);
        assert_eq!(r.count("addr:127.0.0.1", 0), Ok(()));
        for t in 1..10 {
            assert!(r.count("addr:127.0.0.1", t).is_err());
        }
        assert_eq!(
            r.count("addr:127.0.0.1", 60_000),
            Ok(()),
            "its window is not pushed on"
        );
    }
}
