//! Portal sessions: a pasted token is exchanged for a random session id held
//! server-side, so the token itself never sits in the browser.
//!
//! Sessions live in the gateway's memory only: a restart of the control plane
//! ends them all (people log in again; nothing else is lost). The store is
//! keyed by the SHA-256 of the id, so a lookup never compares secrets by
//! their bytes, and it is capped, so logins cannot grow the control plane
//! without bound.
use caldera_actors::tokens::{self, Principal};
use std::collections::HashMap;
use std::sync::Mutex;

/// Most live sessions; the oldest one is dropped for a new login beyond it.
pub const MAX_SESSIONS: usize = 10_000;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    pub principal: Principal,
    /// Every form of this session carries it; a POST without it is refused.
    pub csrf: String,
    pub expires_ms: u64,
}

/// A fresh session: the id for the cookie and what the server keeps.
pub struct Opened {
    pub id: String,
    pub session: Session,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the OS random number generator failed: {0}")]
pub struct NoRandomness(String);

/// The live sessions, by hash of their id.
pub struct Sessions {
    by_hash: Mutex<HashMap<String, Session>>,
    ttl_ms: u64,
}

impl Sessions {
    /// Sessions that last `ttl_ms` from their login.
    pub fn new(ttl_ms: u64) -> Sessions {
        Sessions {
            by_hash: Mutex::new(HashMap::new()),
            ttl_ms,
        }
    }

    /// How long a session lasts, ms.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Opens a session for `principal` at `now_ms`: a 256-bit id and a
    /// 256-bit CSRF token, both from the OS's randomness.
    pub fn open(&self, principal: Principal, now_ms: u64) -> Result<Opened, NoRandomness> {
        let id = tokens::generate().map_err(|e| NoRandomness(e.to_string()))?;
        let csrf = tokens::generate().map_err(|e| NoRandomness(e.to_string()))?;
        let session = Session {
            principal,
            csrf,
            expires_ms: now_ms.saturating_add(self.ttl_ms),
        };
        let mut map = self.lock();
        map.retain(|_, s| s.expires_ms > now_ms);
        if map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.expires_ms)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                map.remove(&k);
            }
        }
        map.insert(tokens::hash(&id), session.clone());
        Ok(Opened { id, session })
    }

    /// The live session with cookie value `id` at `now_ms`; an expired one
    /// is removed and answers `None`.
    pub fn find(&self, id: &str, now_ms: u64) -> Option<Session> {
        let key = tokens::hash(id);
        let mut map = self.lock();
        match map.get(&key) {
            Some(s) if s.expires_ms > now_ms => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Ends the session with cookie value `id` (logout).
    pub fn close(&self, id: &str) {
        self.lock().remove(&tokens::hash(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.by_hash.lock().unwrap_or_else(|e| e.into_inner())
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
        let s = Sessions::new(1_000);
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
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abd", "abc"));
        assert!(!same_secret("ab", "abc"));
        assert!(!same_secret("", "abc"));
    }
}
