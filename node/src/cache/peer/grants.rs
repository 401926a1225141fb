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
    expires_at_ms: u64,
}

impl Grants {
    /// Adds a grant (and forgets the expired ones).
    pub fn add(
        &mut self,
        token: &str,
        sha256: &str,
        receiver: &str,
        expires_at_ms: u64,
        now_ms: u64,
    ) {
        self.by_token.retain(|_, g| g.expires_at_ms > now_ms);
        self.by_token.insert(
            token.to_string(),
            Grant {
                sha256: sha256.to_string(),
                receiver: receiver.to_string(),
                expires_at_ms,
            },
        );
    }

    /// The receiver `token` was granted `sha256` for, while the grant lives.
    pub fn receiver(&self, token: &str, sha256: &str, now_ms: u64) -> Option<&str> {
        self.by_token
            .get(token)
            .filter(|g| g.sha256 == sha256 && g.expires_at_ms > now_ms)
            .map(|g| g.receiver.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_opens_one_version_until_it_expires() {
        let mut g = Grants::default();
        g.add("t1", "aa", "n2", 1000, 0);
        assert_eq!(g.receiver("t1", "aa", 999), Some("n2"));
        assert_eq!(g.receiver("t1", "bb", 999), None, "another version");
        assert_eq!(g.receiver("t2", "aa", 999), None, "another token");
        assert_eq!(g.receiver("t1", "aa", 1000), None, "expired");
        g.add("t3", "aa", "n3", 5000, 2000);
        assert!(!g.by_token.contains_key("t1"), "expired grants are dropped");
    }
}
