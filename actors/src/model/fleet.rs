//! What each node's weight cache holds, as its agent last reported it (the
//! hello and every heartbeat), and where it serves peers. The NodeActor is
//! the one writer; version actors read it to choose sources, the Scheduler's
//! node views are fed from it, and `GET /v1/nodes/{name}` shows it.
use caldera_scheduling::placement::NodeWeights;
use caldera_spec::weights::CacheReport;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

/// One node's cache as last reported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeCache {
    /// The node has a live session.
    pub live: bool,
    /// Where it serves its cache (`--peer-listen`), if it does.
    pub peer_url: Option<String>,
    pub report: CacheReport,
}

impl NodeCache {
    /// Whether the report lists a verified copy of `sha256` that serves a
    /// version owned by `owner` (None: the operator's). A copy another
    /// tenant's version brought is, to this version, not there: the node
    /// would not hand it over (see `CacheEntry::serves`).
    pub fn holds(&self, sha256: &str, owner: Option<&str>) -> bool {
        self.report
            .entries
            .iter()
            .any(|e| e.sha256 == sha256 && e.serves(owner))
    }

    /// Its verified copies: SHA-256 and whom each serves.
    pub fn verified(&self) -> BTreeSet<(String, bool, Vec<String>)> {
        self.report
            .entries
            .iter()
            .map(|e| (e.sha256.clone(), e.shared, e.tenants.clone()))
            .collect()
    }
}

/// How placement names a copy: by its digest, and a copy a tenant's private
/// version brought also by that tenant, since it serves no one else's
/// version. (A shared copy also serves a tenant's private version with the
/// same digest; placement only misses a preference there, never a leak.)
pub fn placement_key(sha256: &str, owner: Option<&str>) -> String {
    match owner {
        None => sha256.to_string(),
        Some(tenant) => format!("{sha256} of {tenant}"),
    }
}

/// Placement's view of a cache: what is there, what is coming, and how much
/// room a new version could get (capacity less what may not be evicted).
pub fn node_weights(report: &CacheReport) -> NodeWeights {
    let kept: u64 = report
        .entries
        .iter()
        .filter(|e| e.pinned || e.in_use > 0)
        .map(|e| e.size_bytes)
        .sum();
    NodeWeights {
        capacity_bytes: report.capacity_bytes,
        evictable_room_bytes: report.capacity_bytes.saturating_sub(kept),
        cached: report
            .entries
            .iter()
            .flat_map(|e| {
                let shared = e.shared.then(|| placement_key(&e.sha256, None));
                let own = e.tenants.iter().map(|t| placement_key(&e.sha256, Some(t)));
                shared.into_iter().chain(own)
            })
            .collect(),
        warming: report
            .fetching
            .iter()
            .map(|f| placement_key(&f.sha256, f.owner.as_deref()))
            .collect(),
    }
}

/// Every node's cache, by name.
#[derive(Debug, Default)]
pub struct Fleet(RwLock<BTreeMap<String, NodeCache>>);

impl Fleet {
    /// One node's cache (default: never reported).
    pub fn get(&self, node: &str) -> Option<NodeCache> {
        match self.0.read() {
            Ok(m) => m.get(node).cloned(),
            Err(p) => p.into_inner().get(node).cloned(),
        }
    }

    /// Every node, by name.
    pub fn all(&self) -> BTreeMap<String, NodeCache> {
        match self.0.read() {
            Ok(m) => m.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Changes `node`'s entry; answers it after the change.
    pub fn update(&self, node: &str, f: impl FnOnce(&mut NodeCache)) -> NodeCache {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let e = g.entry(node.to_string()).or_default();
        f(e);
        e.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::weights::{CacheEntry, CacheFetch};

    #[test]
    fn placement_sees_a_private_copy_only_for_its_own_tenant() {
        let (b_sha, shared_sha) = ("bb".repeat(32), "aa".repeat(32));
        let entry = |sha: &str, shared: bool, tenants: &[&str]| CacheEntry {
            sha256: sha.into(),
            size_bytes: 1,
            last_used_ms: 0,
            pinned: false,
            in_use: 0,
            shared,
            tenants: tenants.iter().map(|t| t.to_string()).collect(),
        };
        let report = CacheReport {
            capacity_bytes: 10,
            entries: vec![entry(&b_sha, false, &["b"]), entry(&shared_sha, true, &[])],
            fetching: vec![CacheFetch {
                sha256: b_sha.clone(),
                bytes_done: 0,
                size_bytes: 1,
                source: "origin".into(),
                owner: Some("c".into()),
            }],
            ..Default::default()
        };
        let w = node_weights(&report);
        assert!(w.cached.contains(&placement_key(&b_sha, Some("b"))));
        assert!(!w.cached.contains(&placement_key(&b_sha, Some("a"))));
        assert!(!w.cached.contains(&placement_key(&b_sha, None)));
        assert!(w.cached.contains(&placement_key(&shared_sha, None)));
        assert!(w.warming.contains(&placement_key(&b_sha, Some("c"))));
        assert!(!w.warming.contains(&placement_key(&b_sha, Some("a"))));
        let cache = NodeCache {
            live: true,
            peer_url: None,
            report,
        };
        assert!(cache.holds(&b_sha, Some("b")) && !cache.holds(&b_sha, Some("a")));
        assert!(cache.holds(&shared_sha, Some("a")) && cache.holds(&shared_sha, None));
    }
}
