//! The tokens this node may serve under: one per receiver and version, from
//! the control plane's `PeerGrant`, each until its expiry. A token names a
//! version; it opens nothing else.
use std::collections::HashMap;

/// Live grants, by token.
#[derive(Debug, Default)]
pub struct Grants {
    by_token: HashMap<String, Grant>,
}

#[derive(Debug, Clone)]
struct Grant {
    sha256: String,
    receiver: String,
    /// The owner of the receiver's version (None: shared).
    owner: Option<String>,
    expires_at_ms: u64,
}

/// What one grant is for.
#[derive(Debug, Clone, Copy)]
pub struct Granted<'a> {
    pub sha256: &'a str,
    pub receiver: &'a str,
    pub owner: Option<&'a str>,
}

impl Grants {
    /// Adds a grant (and forgets the expired ones).
    pub fn add(&mut self, token: &str, what: Granted<'_>, expires_at_ms: u64, now_ms: u64) {
        self.by_token.retain(|_, g| g.expires_at_ms > now_ms);
        self.by_token.insert(
            token.to_string(),
            Grant {
                sha256: what.sha256.to_string(),
                receiver: what.receiver.to_string(),
                owner: what.owner.map(String::from),
                expires_at_ms,
            },
        );
    }

    /// The receiver `token` was granted `sha256` for, and the owner of its
    /// version, while the grant lives.
    pub fn receiver(&self, token: &str, sha256: &str, now_ms: u64) -> Option<(&str, Option<&str>)> {
        self.by_token
            .get(token)
            .filter(|g| g.sha256 == sha256 && g.expires_at_ms > now_ms)
            .map(|g| (g.receiver.as_str(), g.owner.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_opens_one_version_until_it_expires() {
        let mut g = Grants::default();
        let to = |receiver, sha256| Granted {
            sha256,
            receiver,
            owner: Some("b"),
        };
        g.add("t1", to("n2", "aa"), 1000, 0);
        assert_eq!(g.receiver("t1", "aa", 999), Some(("n2", Some("b"))));
        assert_eq!(g.receiver("t1", "bb", 999), None, "another version");
        assert_eq!(g.receiver("t2", "aa", 999), None, "another token");
        assert_eq!(g.receiver("t1", "aa", 1000), None, "expired");
        g.add("t3", to("n3", "aa"), 5000, 2000);
        assert!(!g.by_token.contains_key("t1"), "expired grants are dropped");
    }
}
