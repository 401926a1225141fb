//! Whom a cached copy serves. The cache is content-addressed, but a digest
//! is not a secret: a tenant who learned another tenant's private version's
//! SHA-256 could register its own version declaring it. So a copy serves a
//! version only if it was obtained for that version's audience — the
//! operator's shared versions are one audience, each tenant's private
//! versions its own — and any other audience proves it has the bytes by
//! fetching them from its own source, verified against the digest.
//!
//! A copy the operator's shared version brought serves every version with
//! its digest (anyone may use the shared version: nothing leaks). A copy
//! whose audience is unknown (an index written before audiences were kept,
//! or a file renamed in just before a crash) serves nobody until a warm for
//! a shared version claims it: the control plane only says "shared" for the
//! operator's own versions, and any tenant's version fetches its own.
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The audiences one copy (or one partial fetch) was obtained for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Access {
    /// Brought by the operator's shared version.
    pub shared: bool,
    /// Brought (and verified) by these tenants' private versions.
    pub tenants: BTreeSet<String>,
}

impl Access {
    /// The audience of a version owned by `owner` (None: the operator's).
    pub fn of(owner: Option<&str>) -> Access {
        let mut a = Access::default();
        a.admit(owner);
        a
    }

    /// Whether this copy may serve a version owned by `owner`.
    pub fn serves(&self, owner: Option<&str>) -> bool {
        let tenants: Vec<&str> = self.tenants.iter().map(String::as_str).collect();
        caldera_spec::weights::serves(self.shared, &tenants, owner)
    }

    /// Adds `owner`'s audience (it proved it has the bytes, or it is the
    /// operator's).
    pub fn admit(&mut self, owner: Option<&str>) {
        match owner {
            None => self.shared = true,
            Some(t) => {
                self.tenants.insert(t.to_string());
            }
        }
    }

    /// False for a copy of unknown audience.
    pub fn is_known(&self) -> bool {
        self.shared || !self.tenants.is_empty()
    }
}

/// What the peer server may serve, kept by the cache as it changes: each
/// verified copy's audiences, and the audience each fetch under way writes
/// its partial for.
#[derive(Debug, Default)]
pub struct PeerAccess {
    pub copies: BTreeMap<String, Access>,
    pub partials: BTreeMap<String, Access>,
}

/// [`PeerAccess`] shared between the cache (the writer) and the peer server.
pub type SharedAccess = Arc<Mutex<PeerAccess>>;

impl PeerAccess {
    /// Whether a receiver fetching `owner`'s version may be sent the
    /// verified copy of `sha256`.
    pub fn copy_serves(&self, sha256: &str, owner: Option<&str>) -> bool {
        self.copies.get(sha256).is_some_and(|a| a.serves(owner))
    }

    /// Whether it may be sent the partial of `sha256` (a fetch for exactly
    /// its audience: a partial is never shared across audiences).
    pub fn partial_serves(&self, sha256: &str, owner: Option<&str>) -> bool {
        self.partials.get(sha256) == Some(&Access::of(owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_copy_serves_that_tenant_and_a_shared_one_serves_everyone() {
        let b = Access::of(Some("b"));
        assert!(b.serves(Some("b")));
        assert!(!b.serves(Some("a")), "a digest alone opens nothing");
        assert!(!b.serves(None), "nor does an operator's version");
        let mut both = b.clone();
        both.admit(Some("a"));
        assert!(both.serves(Some("a")) && both.serves(Some("b")));
        let shared = Access::of(None);
        assert!(shared.serves(None) && shared.serves(Some("a")));
        assert!(!Access::default().is_known());
        assert!(!Access::default().serves(None));
        // The index's form: an entry written before audiences is unknown.
        let old: Access = serde_json::from_str("{}").unwrap();
        assert_eq!(old, Access::default());
    }

    #[test]
    fn a_partial_is_served_to_its_own_audience_only() {
        let mut p = PeerAccess::default();
        let sha = "ab".repeat(32);
        p.partials.insert(sha.clone(), Access::of(Some("b")));
        p.copies.insert(sha.clone(), Access::of(Some("b")));
        assert!(p.partial_serves(&sha, Some("b")));
        assert!(!p.partial_serves(&sha, Some("a")));
        assert!(!p.partial_serves(&sha, None));
        assert!(p.copy_serves(&sha, Some("b")));
        assert!(!p.copy_serves(&sha, Some("a")));
        assert!(!p.copy_serves(&"cd".repeat(32), None));
    }
}
