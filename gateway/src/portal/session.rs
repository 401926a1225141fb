//! Portal sessions: a pasted token is exchanged for a random session id held
//! server-side, so the token itself never sits in the browser.
//!
//! Sessions live in the gateway's memory only: a restart of the control plane
//! ends them all (people log in again; nothing else is lost). The store is
//! keyed by the SHA-256 of the id, so a lookup never compares secrets by
//! their bytes, and it is bounded twice, so logins cannot grow the control
//! plane without bound and one principal's logins never end another's
//! session: each principal holds at most `per_principal` sessions (a login
//! past that ends the same principal's oldest one), and the whole store at
//! most [`MAX_SESSIONS`] (a login past that ends the same principal's oldest
//! one too, and a principal with none there is refused until one ends).
use caldera_actors::tokens::{self, Principal};
use caldera_spec::codes::{self, ErrorCode};
use std::collections::HashMap;
use std::sync::Mutex;

/// Most live sessions of all principals together.
pub const MAX_SESSIONS: usize = 10_000;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// Every form of this session carries it; a POST without it is refused.
    pub csrf: String,
    pub expires_ms: u64,
    /// Login order: the oldest of a principal's sessions is the one a new
    /// login past its bound ends (expiry times tie within one millisecond).
    opened: u64,
}

/// A fresh session: the id for the cookie and what the server keeps.
pub struct Opened {
    pub id: String,
    pub session: Session,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum NotOpened {
    #[error("the OS random number generator failed: {0}")]
    NoRandomness(String),
    #[error(
        "the portal holds its most sessions ({max}), none of them yours to end; \
         log in again when one ends or expires"
    )]
    Full { max: usize },
}

impl NotOpened {
    /// This refusal's entry in the registry.
    pub fn code(&self) -> &'static ErrorCode {
        match self {
            NotOpened::NoRandomness(_) => &codes::UNAVAILABLE,
            NotOpened::Full { .. } => &codes::PORTAL_SESSIONS_FULL,
        }
    }
}

/// The live sessions, by hash of their id.
pub struct Sessions {
    inner: Mutex<Store>,
    ttl_ms: u64,
    per_principal: usize,
    total: usize,
}

struct Store {
    by_hash: HashMap<String, Session>,
    next_opened: u64,
}

impl Sessions {
    /// Sessions that last `ttl_ms` from their login, at most `per_principal`
    /// of them for one principal (at least 1).
    pub fn new(ttl_ms: u64, per_principal: usize) -> Sessions {
        Sessions::bounded(ttl_ms, per_principal, MAX_SESSIONS)
    }

    fn bounded(ttl_ms: u64, per_principal: usize, total: usize) -> Sessions {
        Sessions {
            inner: Mutex::new(Store {
                by_hash: HashMap::new(),
                next_opened: 0,
            }),
            ttl_ms,
            per_principal: per_principal.max(1),
            total: total.max(1),
        }
    }

    /// How long a session lasts, ms.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Opens a session for `principal` at `now_ms`: a 256-bit id and a
    /// 256-bit CSRF token, both from the OS's randomness. Past either bound
    /// the principal's own oldest session ends; no other principal's ever does.
    pub fn open(&self, principal: Principal, now_ms: u64) -> Result<Opened, NotOpened> {
        let id = tokens::generate().map_err(|e| NotOpened::NoRandomness(e.to_string()))?;
        let csrf = tokens::generate().map_err(|e| NotOpened::NoRandomness(e.to_string()))?;
        let mut store = self.lock();
        store.by_hash.retain(|_, s| s.expires_ms > now_ms);
        let own = store
            .by_hash
            .values()
            .filter(|s| s.principal == principal)
            .count();
        if own >= self.per_principal || store.by_hash.len() >= self.total {
            let oldest_own = store
                .by_hash
                .iter()
                .filter(|(_, s)| s.principal == principal)
                .min_by_key(|(_, s)| s.opened)
                .map(|(k, _)| k.clone());
            match oldest_own {
                Some(k) => {
                    store.by_hash.remove(&k);
                }
                None => return Err(NotOpened::Full { max: self.total }),
            }
        }
        let session = Session {
            principal,
            csrf,
            expires_ms: now_ms.saturating_add(self.ttl_ms),
            opened: store.next_opened,
        };
        store.next_opened += 1;
        store.by_hash.insert(tokens::hash(&id), session.clone());
        Ok(Opened { id, session })
    }

    /// The live session with cookie value `id` at `now_ms`; an expired one
    /// is removed and answers `None`.
    pub fn find(&self, id: &str, now_ms: u64) -> Option<Session> {
        let key = tokens::hash(id);
        let mut store = self.lock();
        match store.by_hash.get(&key) {
            Some(s) if s.expires_ms > now_ms => Some(s.clone()),
            Some(_) => {
                store.by_hash.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session with cookie value `id` (logout).
    pub fn close(&self, id: &str) {
        self.lock().by_hash.remove(&tokens::hash(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `given` is `expected`, compared in constant time (a wrong CSRF
/// token must not reveal how many of its leading bytes were right).
pub fn same_secret(given: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_id_until_it_expires_or_is_closed() {
        let s = Sessions::new(1_000, 16);
        let a = s.open(Principal::Tenant("a".into()), 10).unwrap();
        assert_eq!(a.id.len(), 64, "256 bits as hex");
        assert_ne!(a.id, a.session.csrf);
        assert!(s.find(&a.id, 500).is_some());
        assert!(s.find("not-it", 500).is_none());
        assert!(s.find(&a.id, 1_010).is_none(), "expired at login + ttl");
        let b = s.open(Principal::Operator, 10).unwrap();
        s.close(&b.id);
        assert!(s.find(&b.id, 11).is_none(), "logged out");
    }

    #[test]
    fn a_principal_past_its_bound_ends_its_own_oldest_session_only() {
        let s = Sessions::new(60_000, 3);
        let operator = s.open(Principal::Operator, 0).unwrap();
        let tenant = |s: &Sessions| s.open(Principal::Tenant("a".into()), 1).unwrap();
        let first = tenant(&s);
        let rest: Vec<Opened> = (0..200).map(|_| tenant(&s)).collect();
        assert!(
            s.find(&operator.id, 2).is_some(),
            "another principal's session stays"
        );
        assert!(s.find(&first.id, 2).is_none(), "the tenant's oldest ended");
        let live = rest.iter().filter(|o| s.find(&o.id, 2).is_some()).count();
        assert_eq!(live, 3, "the tenant keeps its newest 3");
        assert!(rest[197..].iter().all(|o| s.find(&o.id, 2).is_some()));
    }

    #[test]
    fn a_full_store_ends_the_same_principals_oldest_or_refuses_a_newcomer() {
        let s = Sessions::bounded(60_000, 100, 50);
        let operator = s.open(Principal::Operator, 0).unwrap();
        let first = s.open(Principal::Tenant("a".into()), 0).unwrap();
        for _ in 2..50 {
            s.open(Principal::Tenant("a".into()), 0).unwrap();
        }
        // Full: tenant a's next login ends its own oldest, never the operator's.
        s.open(Principal::Tenant("a".into()), 0).unwrap();
        assert!(s.find(&first.id, 1).is_none());
        assert!(s.find(&operator.id, 1).is_some());
        // A principal with no session in a full store is refused, nobody ends.
        let refused = s.open(Principal::Tenant("b".into()), 0);
        assert!(matches!(refused, Err(NotOpened::Full { max: 50 })));
        assert!(s.find(&operator.id, 1).is_some());
        // Once sessions expire there is room again.
        assert!(s.open(Principal::Tenant("b".into()), 60_001).is_ok());
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("", "abc"));
    }
}
