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
    /// The tenant owning a private version (None: the operator's, shared):
    /// the cache serves it only a copy obtained for that owner or a shared
    /// one, never one another tenant's version brought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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
    /// How the origin may be read (ignored for a peer). Absent: no origin
    /// may be read at all; the control plane always sends its registrant's
    /// rules.
    #[serde(default)]
    pub origin: OriginAccess,
    /// The tenant owning the version (None: the operator's, shared). A copy
    /// is a hit only if it was obtained for this owner (or is shared);
    /// otherwise the bytes are fetched from `source` and verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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
    /// The owner of the version the receiver fetches (None: shared): the
    /// peer serves only a copy obtained for that owner, or a shared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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
    /// Whose version's fetch it is about (None: the operator's shared
    /// version, or every version with the digest, as an eviction is): a
    /// fetch for one audience says nothing of another's copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl WarmupReport {
    /// Whether this report is news for a version owned by `owner`: an
    /// eviction is (the copy is gone for all), a shared copy verified is
    /// (it serves every version with its digest), anything else only for
    /// the same audience.
    pub fn concerns(&self, owner: Option<&str>) -> bool {
        match self.progress {
            WarmupProgress::Evicted { .. } => true,
            WarmupProgress::Verified { .. } if self.owner.is_none() => true,
            _ => self.owner.as_deref() == owner,
        }
    }
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
    /// Obtained for an operator's (shared) version: serves every version
    /// with this digest.
    #[serde(default)]
    pub shared: bool,
    /// The tenants whose own private versions brought (and verified) it:
    /// it serves their versions with this digest, nobody else's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
}

impl CacheEntry {
    /// Whether this copy may serve a version owned by `owner` (None: the
    /// operator's, shared). See [`serves`].
    pub fn serves(&self, owner: Option<&str>) -> bool {
        serves(self.shared, &self.tenants, owner)
    }
}

/// The one rule of who a cached copy serves: a copy obtained for the
/// operator's shared version serves every version with its digest (anyone
/// may use the shared version, so nothing leaks); a copy a tenant's private
/// version brought serves that tenant's versions only. A digest alone proves
/// nothing: another owner gets the bytes from its own source and they are
/// verified.
pub fn serves<S: AsRef<str>>(shared: bool, tenants: &[S], owner: Option<&str>) -> bool {
    shared || owner.is_some_and(|o| tenants.iter().any(|t| t.as_ref() == o))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheFetch {
    pub sha256: String,
    pub bytes_done: u64,
    pub size_bytes: u64,
    /// [`WeightSource::label`], or empty when no source is reading now.
    pub source: String,
    /// Whose version the fetch is for (None: shared, or not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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

    /// A warm command that carries no `origin` (an older or a forged
    /// sender) lets the agent read nothing from an origin: not a file on the
    /// node, not a loopback service.
    #[test]
    fn a_warm_command_without_origin_rules_reads_no_origin() {
        let text = format!(
            r#"{{"epoch":1,"model":"m:v1","sha256":"{}","size_bytes":5,
                "source":{{"kind":"origin","uri":"file:///etc/shadow"}}}}"#,
            "ab".repeat(32)
        );
        let w: WarmCommand = serde_json::from_str(&text).unwrap();
        let allow = &w.origin.rules.allow;
        let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        for (uri, addrs) in [
            ("file:///etc/shadow", vec![]),
            ("file:///proc/self/environ", vec![]),
            ("http://127.0.0.1:7070/v1/tenants", vec![loopback]),
            ("http://localhost:7070/v1/tenants", vec![loopback]),
        ] {
            let e = crate::origin::admits(allow, uri, &addrs).unwrap_err();
            assert_eq!(e, crate::origin::NotAdmitted::NothingAllowed, "{uri}");
            assert!(e.to_string().contains("no origin is allowed"), "{uri}: {e}");
        }
        assert_eq!(w.origin.confined, None);
    }

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
            owner: Some("acme".into()),
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
            owner: None,
        });
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<NodeMessage>(&text).unwrap(), r);
    }

    #[test]
    fn a_copy_serves_its_own_audience_and_a_shared_one_serves_all() {
        let none: [&str; 0] = [];
        // A shared copy: every owner.
        assert!(serves(true, &none, None));
        assert!(serves(true, &none, Some("a")));
        // B's private copy: B only, never A, never the operator's version.
        assert!(serves(false, &["b"], Some("b")));
        assert!(!serves(false, &["b"], Some("a")));
        assert!(!serves(false, &["b"], None));
        // A copy of unknown origin serves nobody until claimed.
        assert!(!serves(false, &none, None));
        // Reports from agents that do not say whom a copy serves: nobody.
        let e: CacheEntry = serde_json::from_str(
            r#"{"sha256":"x","size_bytes":1,"last_used_ms":0,"pinned":false,"in_use":0}"#,
        )
        .unwrap();
        assert!(!e.serves(None) && !e.serves(Some("a")));
    }

    #[test]
    fn a_report_concerns_its_own_audience_and_evictions_concern_all() {
        let report = |owner: Option<&str>, progress| WarmupReport {
            epoch: 1,
            sha256: "ab".repeat(32),
            at_ms: 0,
            progress,
            owner: owner.map(String::from),
        };
        let failed = || WarmupProgress::Failed {
            source: "origin".into(),
            bytes_done: 0,
            reason: "does not match".into(),
        };
        let verified = || WarmupProgress::Verified {
            source: "origin".into(),
            bytes_fetched: 1,
            seconds: 0.0,
        };
        // A's failed fetch is not news to B's version, nor to the operator's.
        assert!(report(Some("a"), failed()).concerns(Some("a")));
        assert!(!report(Some("a"), failed()).concerns(Some("b")));
        assert!(!report(Some("a"), failed()).concerns(None));
        // B's verified copy serves B only; a shared one serves everyone.
        assert!(!report(Some("b"), verified()).concerns(Some("a")));
        assert!(report(None, verified()).concerns(Some("a")));
        // A copy gone is gone for every version.
        let gone = WarmupProgress::Evicted {
            reason: "lru".into(),
        };
        assert!(report(Some("b"), gone).concerns(Some("a")));
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
            images: None,
            events_sent: 0,
        };
        let mut v = serde_json::to_value(&h).unwrap();
        assert!(v.get("cache").is_none(), "{v}");
        v["cache"] = serde_json::json!({"capacity_bytes": 5});
        let back: crate::wire::Heartbeat = serde_json::from_value(v).unwrap();
        assert_eq!(back.cache.map(|c| c.capacity_bytes), Some(5));
    }
}
