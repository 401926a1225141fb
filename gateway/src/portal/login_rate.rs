//! How often the portal's login may be tried: each principal may log in
//! `per_minute` times a minute, and each client address may fail that many
//! times a minute (later failures are answered 429). The first keeps one
//! tenant's script from opening sessions as fast as the server answers; the
//! second bounds the log lines and work one address's failed logins cost.
//! It does not slow guessing a token, and need not: generated tokens hold
//! 256 random bits, configured ones at least 16 characters.
//!
//! A successful login is counted against its principal, never its address,
//! and a valid token is never refused for its address's failures: a person
//! behind the same address as a failing script (one NAT, one proxy) still
//! logs in, so one tenant cannot lock the operator out.
//!
//! Principals and addresses are kept in separate tables for the same reason.
//! Principals are as many as the tenants, so their table always has room;
//! addresses are as many as an attacker holds, so their table is bounded and,
//! when full, forgets its oldest windows rather than refusing anyone. An IPv6
//! address is counted per /64: one host is commonly handed a whole /64, and
//! counting its 2^64 addresses apart would let it fill the table alone.
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;

/// The window the counts cover, ms.
pub const WINDOW_MS: u64 = 60_000;
/// Most client addresses (IPv6: /64 networks) remembered; past it the ones
/// whose window ended are forgotten, then the oldest.
const MAX_ADDRESSES: usize = 100_000;
/// How many of the oldest addresses one eviction forgets, so a flood of new
/// addresses sorts the table once per this many, not once per address.
const EVICT_BATCH: usize = MAX_ADDRESSES / 16;
/// Principals remembered before the ones whose window ended are swept out
/// (the sweep runs again each time the table doubles past its last size).
const PRINCIPAL_SWEEP_AT: usize = 1024;

/// A refused login: when its key may try again, s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

/// Login counts per principal and failure counts per client address, in
/// fixed one-minute windows.
pub struct LoginRate {
    per_minute: u32,
    tables: Mutex<Tables>,
}

struct Tables {
    principals: HashMap<String, Window>,
    principal_sweep_at: usize,
    addresses: HashMap<IpAddr, Window>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: u64,
    count: u32,
}

/// The key an address's failures are counted under: an IPv4 address (also
/// one written IPv4-mapped in IPv6) as it is, an IPv6 address as its /64.
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let network = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(network))
        }
        v4 => v4,
    }
}

impl LoginRate {
    /// At most `per_minute` counted logins per key a minute (at least 1).
    pub fn new(per_minute: u32) -> LoginRate {
        LoginRate {
            per_minute: per_minute.max(1),
            tables: Mutex::new(Tables {
                principals: HashMap::new(),
                principal_sweep_at: PRINCIPAL_SWEEP_AT,
                addresses: HashMap::new(),
            }),
        }
    }

    /// The limit, per key and minute.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Counts one login of the principal `key` (`operator`, `tenant:…`) at
    /// `now_ms`, or refuses it when the principal had `per_minute` in its
    /// window already (a refused one is not counted). Never refused for
    /// want of room.
    pub fn count_login(&self, key: &str, now_ms: u64) -> Result<(), RetryAfter> {
        let mut t = self.lock();
        if !t.principals.contains_key(key) && t.principals.len() >= t.principal_sweep_at {
            t.principals.retain(|_, w| w.live_at(now_ms));
            t.principal_sweep_at = (t.principals.len() * 2).max(PRINCIPAL_SWEEP_AT);
        }
        let w = t
            .principals
            .entry(key.to_string())
            .or_insert(Window::fresh(now_ms));
        w.count_one(self.per_minute, now_ms)
    }

    /// Counts one failed login from `from` (its /64 for IPv6) at `now_ms`,
    /// or refuses it when that address had `per_minute` failures in its
    /// window already (a refused one is not counted). An unknown address is
    /// counted as the unspecified one.
    pub fn count_failure(&self, from: Option<IpAddr>, now_ms: u64) -> Result<(), RetryAfter> {
        let key = address_key(from.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)));
        let mut t = self.lock();
        if !t.addresses.contains_key(&key) && t.addresses.len() >= MAX_ADDRESSES {
            forget_oldest(&mut t.addresses, now_ms);
        }
        let w = t.addresses.entry(key).or_insert(Window::fresh(now_ms));
        w.count_one(self.per_minute, now_ms)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tables> {
        // A panic elsewhere while holding the lock leaves usable tables.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Makes room in a full address table: drops the windows that ended, and
/// when that leaves less than `EVICT_BATCH` free, the oldest until it does. Forgetting a busy
/// address only lets it start a fresh window, which its owner could have
/// had anyway by waiting a minute; refusing instead would lock everyone out.
fn forget_oldest(addresses: &mut HashMap<IpAddr, Window>, now_ms: u64) {
    addresses.retain(|_, w| w.live_at(now_ms));
    let cut = (addresses.len() + EVICT_BATCH).saturating_sub(MAX_ADDRESSES);
    if cut == 0 {
        return;
    }
    let mut by_age: Vec<(u64, IpAddr)> = addresses.iter().map(|(k, w)| (w.start_ms, *k)).collect();
    by_age.select_nth_unstable(cut - 1);
    for (_, key) in &by_age[..cut] {
        addresses.remove(key);
    }
}

impl Window {
    fn fresh(now_ms: u64) -> Window {
        Window {
            start_ms: now_ms,
            count: 0,
        }
    }

    fn live_at(&self, now_ms: u64) -> bool {
        now_ms < self.start_ms.saturating_add(WINDOW_MS)
    }

    /// Counts one try, starting a new window when this one ended, or
    /// refuses it when the window holds `per_minute` already.
    fn count_one(&mut self, per_minute: u32, now_ms: u64) -> Result<(), RetryAfter> {
        if !self.live_at(now_ms) {
            *self = Window::fresh(now_ms);
        }
        if self.count >= per_minute {
            return Err(self.retry_after(now_ms));
        }
        self.count += 1;
        Ok(())
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

    fn v4(n: u32) -> Option<IpAddr> {
        Some(IpAddr::V4(std::net::Ipv4Addr::from(n)))
    }

    fn v6(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn a_key_gets_its_per_minute_then_waits_for_the_next_window() {
        let r = LoginRate::new(3);
        for t in 0..3 {
            assert_eq!(r.count_login("tenant:a", t), Ok(()));
        }
        assert_eq!(r.count_login("tenant:a", 10), Err(RetryAfter(60)));
        assert_eq!(r.count_login("tenant:a", 59_500), Err(RetryAfter(1)));
        assert_eq!(
            r.count_login("operator", 10),
            Ok(()),
            "keys are counted apart"
        );
        assert_eq!(r.count_login("tenant:a", 60_000), Ok(()), "a new window");
    }

    #[test]
    fn a_refused_login_is_not_counted() {
        let r = LoginRate::new(1);
        let local = v4(0x7f00_0001);
        assert_eq!(r.count_failure(local, 0), Ok(()));
        for t in 1..10 {
            assert!(r.count_failure(local, t).is_err());
        }
        assert_eq!(
            r.count_failure(local, 60_000),
            Ok(()),
            "its window is not pushed on"
        );
    }

    #[test]
    fn a_full_address_table_refuses_no_principal_and_forgets_its_oldest() {
        let r = LoginRate::new(1);
        // Every address fails once, all within one window: none expires.
        for n in 0..MAX_ADDRESSES as u32 {
            assert_eq!(r.count_failure(v4(n), u64::from(n) / 10), Ok(()), "{n}");
        }
        let now = 10_000;
        assert_eq!(r.lock().addresses.len(), MAX_ADDRESSES);
        assert_eq!(r.count_login("operator", now), Ok(()));
        assert_eq!(r.count_login("tenant:a", now), Ok(()));
        // A new address is counted, not refused; the oldest make room.
        let newcomer = v4(u32::MAX);
        assert_eq!(r.count_failure(newcomer, now), Ok(()));
        assert!(r.count_failure(newcomer, now).is_err(), "and is remembered");
        let t = r.lock();
        assert_eq!(t.addresses.len(), MAX_ADDRESSES - EVICT_BATCH + 1);
        assert!(
            !t.addresses.contains_key(&IpAddr::V4(0.into())),
            "oldest forgotten"
        );
        let last = IpAddr::V4((MAX_ADDRESSES as u32 - 1).into());
        assert!(t.addresses.contains_key(&last), "newest kept");
    }

    #[test]
    fn one_ipv6_slash_64_is_one_address() {
        let r = LoginRate::new(3);
        for host in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"] {
            assert_eq!(r.count_failure(v6(host), 0), Ok(()), "{host}");
        }
        assert!(r.count_failure(v6("2001:db8:1:2:abcd::1"), 1).is_err());
        assert_eq!(
            r.count_failure(v6("2001:db8:1:3::1"), 1),
            Ok(()),
            "next /64"
        );
        assert_eq!(r.lock().addresses.len(), 2);
    }

    #[test]
    fn an_ipv4_mapped_address_is_its_ipv4_address() {
        let key = |s: &str| address_key(s.parse().unwrap());
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_eq!(key("192.0.2.7"), IpAddr::V4([192, 0, 2, 7].into()));
        assert_eq!(key("2001:db8::1"), "2001:db8::".parse::<IpAddr>().unwrap());
    }
}
