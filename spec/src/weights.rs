//! The weights part of the node protocol (protocol 4): what a node's weight
//! cache holds, how the control plane tells a node to warm a version and from
//! where, and how the node reports progress.
//!
//! Warmup is driven by the control plane, one copy per node and version:
//! - A task that names a model is started with [`ModelMount`] on its
//!   [`StartCommand`](crate::wire::StartCommand). The agent prepares it, then
//!   holds it in `warming` (reporting `WorkloadEventKind::Warming` for the
//!   allocation) until its cache has a verified copy of `sha256`; then `ready`,
//!   then the process starts with `CALDERA_MODEL_PATH`. A verified copy already
//!   in the cache is a hit: warming takes as long as the checksum does.
//! - The control plane sends [`WarmCommand`] naming one [`WeightSource`]: the
//!   origin (only as many nodes at once as `max-origin-pulls-per-version` and
//!   `max-origin-pulls` allow) or a peer that holds a verified copy.
//! - Before pointing a receiver at a peer, the control plane sends that peer a
//!   [`PeerGrant`]: a random token, for one version and one receiver, that
//!   expires. The peer serves `GET {peer_url}/v1/weights/{sha256}` (with
//!   `Range: bytes=N-`) only to a bearer of a live grant for that sha256. A
//!   token carries no key material: a node can authorise nobody.
//! - The agent reports per version with [`WarmupReport`]s: progress (throttled),
//!   verified, failed (the control plane then picks another source; the partial
//!   file is kept, so the next source resumes at `bytes_done`), evicted.
//! - Every fetch writes `<sha256>.partial`, checks size and SHA-256, syncs and
//!   renames into place, so a partial or corrupt file is never used.
use serde::{Deserialize, Serialize};

/// A task's model as the agent needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelMount {
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub size_bytes: u64,
    /// A tenant's own version (not the operator's): its copy is opened only
    /// by that tenant's uid on the node, never by another tenant's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

/// Where a node reads a version's weights from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WeightSource {
    /// The registered uri (`file://` or `http(s)://`).
    Origin { uri: String },
    /// Another node's cache: `GET {url}/v1/weights/{sha256}`, bearer `token`.
    Peer {
        node: String,
        url: String,
        token: String,
    },
}

impl WeightSource {
    /// How a progress event or a failure names it: `origin` or `peer node-3`.
    pub fn label(&self) -> String {
        match self {
            WeightSource::Origin { .. } => "origin".into(),
            WeightSource::Peer { node, .. } => format!("peer {node}"),
        }
    }
}

/// Control plane -> agent: get a verified copy of `sha256` into the cache
/// from `source`. Idempotent: a verified copy already there is reported
/// `verified` at once (and `pinned` applied); one being fetched from another
/// source is switched to this one, resuming at the bytes it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmCommand {
    pub epoch: u64,
    /// `name:version`, for logs and progress events.
    pub model: String,
    pub sha256: String,
    pub size_bytes: u64,
    pub source: WeightSource,
    /// Never evicted while pinned (a prewarm may pin).
    #[serde(default)]
    pub pinned: bool,
    /// How the origin may be read (ignored for a peer).
    #[serde(default)]
    pub origin: OriginAccess,
}

/// What an agent may do to read a version's origin on its registrant's
/// behalf: the operator's allow-list for that registrant, checked again
/// against the addresses the agent is about to connect to, and for a file
/// the tree the read is confined to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginAccess {
    pub rules: crate::origin::OriginRules,
    /// A `file://` origin is opened only inside this tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined: Option<ConfinedRead>,
}

/// A file read on a tenant's behalf: opened without following a link out of
/// `root` (its real path is checked to be under `root`), and only if the
/// tenant could read it itself: any user may (mode o+r), or, with
/// `owner_reads`, the owner of `root` (a task's checkpoint tree is its
/// tenant's) owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinedRead {
    pub root: String,
    #[serde(default)]
    pub owner_reads: bool,
}

/// Control plane -> the serving peer: serve `sha256` to the bearer of `token`
/// until `expires_at_ms` (unix ms). The receiver's name is for the peer's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerGrant {
    pub epoch: u64,
    pub token: String,
    pub sha256: String,
    pub receiver: String,
    pub expires_at_ms: u64,
}

/// Control plane -> agent: delete the cached copy of `sha256` (a retired
/// version), unless a running allocation still uses it (then it goes as soon
/// as the last one ends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictCommand {
    pub epoch: u64,
    pub sha256: String,
    pub reason: String,
}

/// Control plane -> agent: pin or unpin a cached copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinCommand {
    pub epoch: u64,
    pub sha256: String,
    pub pinned: bool,
}

/// Agent -> control plane: what happened to one version's copy on this node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmupReport {
    pub epoch: u64,
    pub sha256: String,
    pub at_ms: u64,
    pub progress: WarmupProgress,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WarmupProgress {
    /// Bytes arriving; `source` is [`WeightSource::label`].
    Fetching {
        source: String,
        bytes_done: u64,
        size_bytes: u64,
        rate_bytes_per_s: u64,
    },
    /// The copy is in place and its SHA-256 checked. `bytes_fetched` is 0 for
    /// a copy that was already there.
    Verified {
        source: String,
        bytes_fetched: u64,
        seconds: f64,
    },
    /// This source failed (unreachable, refused, died mid-transfer, wrong
    /// checksum, cache full); `bytes_done` stays on disk for the next source.
    Failed {
        source: String,
        bytes_done: u64,
        reason: String,
    },
    /// The copy is gone (LRU eviction, an evict command, a corrupt file found).
    Evicted { reason: String },
}

/// A node's weight cache, in its hello and every heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct CacheReport {
    /// `--cache-gb` in bytes; 0: the node has no cache (models cannot run there).
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    /// Verified copies.
    pub entries: Vec<CacheEntry>,
    /// Fetches under way (or cut, with their partial bytes kept).
    pub fetching: Vec<CacheFetch>,
    pub counters: CacheCounters,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheEntry {
    pub sha256: String,
    pub size_bytes: u64,
    /// Unix ms of the last start that used it (or its verification).
    pub last_used_ms: u64,
    pub pinned: bool,
    /// Live allocations using it; > 0 is never evicted.
    pub in_use: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheFetch {
    pub sha256: String,
    pub bytes_done: u64,
    pub size_bytes: u64,
    /// [`WeightSource::label`], or empty when no source is reading now.
    pub source: String,
}

/// Totals since the agent's data dir was created (persisted with the cache).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(default)]
pub struct CacheCounters {
    /// Starts (and warm commands) that found a verified copy.
    pub hits: u64,
    /// Starts (and warm commands) that had to fetch.
    pub misses: u64,
    pub bytes_from_origin: u64,
    pub bytes_from_peers: u64,
    /// Bytes this node served to peers.
    pub bytes_served: u64,
    /// Seconds spent fetching and verifying.
    pub load_seconds: f64,
    pub evictions: u64,
    /// Copies found corrupt or truncated (and deleted) before use.
    pub corrupt_found: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{NodeMessage, ServerMessage};

    #[test]
    fn weight_messages_round_trip_with_type_tags() {
        let w = ServerMessage::Warm(WarmCommand {
            epoch: 2,
            model: "llama:v1".into(),
            sha256: "ab".repeat(32),
            size_bytes: 5,
            source: WeightSource::Peer {
                node: "n2".into(),
                url: "http://127.0.0.1:1".into(),
                token: "t".into(),
            },
            pinned: false,
            origin: OriginAccess::default(),
        });
        let text = serde_json::to_string(&w).unwrap();
        assert!(text.starts_with(r#"{"type":"warm""#), "{text}");
        assert!(text.contains(r#""kind":"peer""#), "{text}");
        assert_eq!(serde_json::from_str::<ServerMessage>(&text).unwrap(), w);
        let r = NodeMessage::Warmup(WarmupReport {
            epoch: 2,
            sha256: "ab".repeat(32),
            at_ms: 1,
            progress: WarmupProgress::Failed {
                source: "peer n2".into(),
                bytes_done: 3,
                reason: "connection reset".into(),
            },
        });
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<NodeMessage>(&text).unwrap(), r);
    }

    #[test]
    fn a_hello_without_a_cache_still_parses() {
        // Older agents send no cache: an empty report (no capacity).
        let c: CacheReport = serde_json::from_str("{}").unwrap();
        assert_eq!(c, CacheReport::default());
        let h = crate::wire::Heartbeat {
            epoch: 1,
            seq: 1,
            metrics: Default::default(),
            workloads: vec![],
            cache: None,
        };
        let mut v = serde_json::to_value(&h).unwrap();
        assert!(v.get("cache").is_none(), "{v}");
        v["cache"] = serde_json::json!({"capacity_bytes": 5});
        let back: crate::wire::Heartbeat = serde_json::from_value(v).unwrap();
        assert_eq!(back.cache.map(|c| c.capacity_bytes), Some(5));
    }
}
