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
    /// Whether the report lists a verified copy of `sha256`.
    pub fn holds(&self, sha256: &str) -> bool {
        self.report.entries.iter().any(|e| e.sha256 == sha256)
    }

    /// The SHA-256s of its verified copies.
    pub fn verified(&self) -> BTreeSet<String> {
        self.report
            .entries
            .iter()
            .map(|e| e.sha256.clone())
            .collect()
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
        cached: report.entries.iter().map(|e| e.sha256.clone()).collect(),
        warming: report.fetching.iter().map(|f| f.sha256.clone()).collect(),
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
