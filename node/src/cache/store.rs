//! The cache's state and its bookkeeping: what is on disk (index, partial
//! fetches), what is pinned or used, room and eviction, reports.
use super::fetch::Tally;
use super::index::Index;
use super::layout::{file_len, Layout};
use super::{lru, CacheEvent, CacheNote};
use crate::error::AgentError;
use caldera_spec::codes;
use caldera_spec::weights::{CacheEntry, CacheFetch, CacheReport, WarmupProgress};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// Live allocations per sha256 (the runtime's count, never the cache's own:
/// it includes workloads adopted after an agent restart).
pub type InUse = BTreeMap<String, u32>;

/// A fetch under way.
pub(super) struct Running {
    pub source: caldera_spec::weights::WeightSource,
    pub label: String,
    pub size_bytes: u64,
    pub from_peer: bool,
    /// The warm asked for a pin: applied once the copy is verified.
    pub pin: bool,
    /// The owner of the version it fetches for (None: shared): the copy
    /// it brings serves that audience.
    pub owner: Option<String>,
    pub generation: u64,
    pub tally: Rc<Tally>,
    pub handle: tokio::task::JoinHandle<()>,
}

/// The node's weight cache (see the module doc of [`super`]).
pub struct WeightCache {
    /// TLS of https origins (the host's roots, and `--origin-ca`'s).
    pub(super) tls: super::fetch::Tls,
    pub(super) layout: Layout,
    pub(super) index: Index,
    pub(super) capacity_bytes: u64,
    pub(super) running: BTreeMap<String, Running>,
    /// Checks before use in flight, with the registered size.
    pub(super) checking: BTreeMap<String, u64>,
    /// Each copy's file as it was at its last full SHA-256 check (this
    /// agent's run only): see [`super::stamp`].
    pub(super) stamps: BTreeMap<String, super::stamp::Stamp>,
    /// Evictions asked for while the copy was in use.
    pub(super) evict_later: BTreeMap<String, String>,
    pub(super) notes: UnboundedSender<CacheNote>,
    pub(super) next_generation: u64,
    /// Bytes the peer server sent since the last fold into the counters.
    served: Arc<AtomicU64>,
    /// Whom each copy and partial serves, as the peer server sees it.
    peer_access: super::access::SharedAccess,
}

impl WeightCache {
    /// Opens (creating) the cache under `data_dir` with `capacity_bytes`
    /// (0: no cache; nothing is created). Results of its tasks arrive on
    /// the receiver of `notes`, for [`WeightCache::on_note`].
    pub fn open(
        data_dir: &Path,
        capacity_bytes: u64,
        notes: UnboundedSender<CacheNote>,
        tls: super::fetch::Tls,
    ) -> Result<WeightCache, AgentError> {
        let layout = Layout::under(data_dir);
        let mut index = Index::default();
        if capacity_bytes > 0 {
            layout.create().map_err(|source| AgentError::Cache {
                path: layout.root().to_path_buf(),
                source,
            })?;
            index = Index::load(&layout);
            index.reconcile(&layout, crate::runtime::now_ms());
            super::exposure::sweep(&layout);
            let partials = layout.partials();
            if !partials.is_empty() {
                tracing::info!(
                    "weight cache: {} cut fetch(es) found ({}); the next warm of each resumes it",
                    partials.len(),
                    partials.join(", ")
                );
            }
        }
        let mut cache = WeightCache {
            tls,
            layout,
            index,
            capacity_bytes,
            running: BTreeMap::new(),
            checking: BTreeMap::new(),
            stamps: BTreeMap::new(),
            evict_later: BTreeMap::new(),
            notes,
            next_generation: 1,
            served: Arc::new(AtomicU64::new(0)),
            peer_access: Default::default(),
        };
        cache.save();
        Ok(cache)
    }

    /// False with `--cache-gb 0`: no model can run on this node.
    pub fn enabled(&self) -> bool {
        self.capacity_bytes > 0
    }

    /// Where the verified copy of `sha256` is (or would be).
    pub fn copy_path(&self, sha256: &str) -> PathBuf {
        self.layout.copy(sha256)
    }

    /// `weights/`, the only dir the peer server reads.
    /// Where the cache's files are (the peer server reads copies and partials).
    pub fn layout(&self) -> super::layout::Layout {
        self.layout.clone()
    }

    /// The counter the peer server adds the bytes it sends to.
    pub fn served_counter(&self) -> Arc<AtomicU64> {
        self.served.clone()
    }

    /// Whom each copy and partial serves, kept current for the peer server.
    pub fn peer_access(&self) -> super::access::SharedAccess {
        self.peer_access.clone()
    }

    /// True when a verified copy of `sha256` is in place (for whomever).
    pub fn holds(&self, sha256: &str) -> bool {
        self.index.entries.contains_key(sha256)
    }

    /// True when a verified copy of `sha256` is in place that serves a
    /// version owned by `owner` (see [`super::access`]).
    pub fn serves(&self, sha256: &str, owner: Option<&str>) -> bool {
        self.index
            .entries
            .get(sha256)
            .is_some_and(|e| e.access.serves(owner))
    }

    /// What the hello and heartbeats carry.
    pub fn report(&mut self, in_use: &InUse) -> CacheReport {
        self.fold_served();
        let entries = self
            .index
            .entries
            .iter()
            .map(|(sha, e)| CacheEntry {
                sha256: sha.clone(),
                size_bytes: e.size_bytes,
                last_used_ms: e.last_used_ms,
                pinned: e.pinned,
                in_use: in_use.get(sha).copied().unwrap_or(0),
                shared: e.access.shared,
                tenants: e.access.tenants.iter().cloned().collect(),
            })
            .collect();
        // Partials on disk, and fetches just started that have none yet.
        let shas: std::collections::BTreeSet<String> = self
            .layout
            .partials()
            .into_iter()
            .chain(self.running.keys().cloned())
            .collect();
        let fetching = shas
            .into_iter()
            .map(|sha| {
                let running = self.running.get(&sha);
                CacheFetch {
                    bytes_done: file_len(&self.layout.partial(&sha)),
                    size_bytes: running.map(|r| r.size_bytes).unwrap_or(0),
                    source: running.map(|r| r.label.clone()).unwrap_or_default(),
                    owner: self
                        .index
                        .partials
                        .get(&sha)
                        .and_then(|a| a.tenants.iter().next().cloned()),
                    sha256: sha,
                }
            })
            .collect();
        CacheReport {
            capacity_bytes: self.capacity_bytes,
            used_bytes: self.used_bytes(),
            entries,
            fetching,
            counters: self.index.counters.clone(),
        }
    }

    /// Bytes on disk: verified copies and partial fetches.
    pub(super) fn used_bytes(&self) -> u64 {
        let partial: u64 = self
            .layout
            .partials()
            .iter()
            .map(|sha| file_len(&self.layout.partial(sha)))
            .sum();
        self.index.used_bytes() + partial
    }

    fn fold_served(&mut self) {
        let served = self.served.swap(0, Ordering::Relaxed);
        self.index.counters.bytes_served += served;
    }

    /// Persists the index; a failure is logged (the files stay the truth).
    pub(super) fn save(&mut self) {
        if !self.enabled() {
            return;
        }
        self.fold_served();
        self.publish_access();
        if let Err(e) = self.index.save(&self.layout) {
            tracing::error!(
                code = codes::CACHE_UNUSABLE.code,
                "weight cache index {}: {e}",
                self.layout.index().display()
            );
        }
    }

    /// Tells the peer server whom each copy and partial serves now.
    fn publish_access(&self) {
        let mut p = self.peer_access.lock().unwrap_or_else(|p| p.into_inner());
        p.copies = self
            .index
            .entries
            .iter()
            .map(|(sha, e)| (sha.clone(), e.access.clone()))
            .collect();
        p.partials = self.index.partials.clone();
    }

    /// Pins or unpins a verified copy, or the copy a running fetch brings
    /// (a pin of a version neither here nor coming is dropped: a warm
    /// carries its own `pinned`).
    pub fn pin(&mut self, sha256: &str, pinned: bool) {
        if let Some(r) = self.running.get_mut(sha256) {
            r.pin = pinned;
        }
        if let Some(e) = self.index.entries.get_mut(sha256) {
            e.pinned = pinned;
            self.save();
        }
    }

    /// Deletes `sha256`'s copy (and any fetch of it), or, while an
    /// allocation uses it, as soon as the last one ends ([`Self::sweep`]).
    pub fn evict(&mut self, sha256: &str, reason: &str, in_use: &InUse) -> Vec<CacheEvent> {
        if let Some(r) = self.running.remove(sha256) {
            r.handle.abort();
            self.count_bytes(r.from_peer, r.tally.written.get());
        }
        let _ = std::fs::remove_file(self.layout.partial(sha256));
        self.index.partials.remove(sha256);
        if self.is_held(sha256, in_use) {
            tracing::info!("weight cache: {sha256} is in use; evicted once its last user ends");
            self.evict_later
                .insert(sha256.to_string(), reason.to_string());
            return Vec::new();
        }
        self.delete(sha256, reason).into_iter().collect()
    }

    /// Carries out the evictions that waited for a copy's last user.
    pub fn sweep(&mut self, in_use: &InUse) -> Vec<CacheEvent> {
        let ready: Vec<(String, String)> = self
            .evict_later
            .iter()
            .filter(|(sha, _)| !self.is_held(sha, in_use))
            .map(|(s, r)| (s.clone(), r.clone()))
            .collect();
        let mut events = Vec::new();
        for (sha, reason) in ready {
            self.evict_later.remove(&sha);
            events.extend(self.delete(&sha, &reason));
        }
        events
    }

    /// In use by a live allocation, or being checked for one.
    fn is_held(&self, sha256: &str, in_use: &InUse) -> bool {
        in_use.get(sha256).is_some_and(|n| *n > 0) || self.checking.contains_key(sha256)
    }

    /// Deletes a verified copy; the report says why.
    pub(super) fn delete(&mut self, sha256: &str, reason: &str) -> Option<CacheEvent> {
        self.index.entries.remove(sha256)?;
        self.stamps.remove(sha256);
        super::exposure::withdraw(&self.layout, sha256);
        if let Err(e) = std::fs::remove_file(self.layout.copy(sha256)) {
            tracing::warn!("weight cache: deleting {sha256}: {e}");
        }
        self.index.counters.evictions += 1;
        self.save();
        tracing::info!("weight cache: {sha256} evicted: {reason}");
        Some(CacheEvent::Report {
            sha256: sha256.to_string(),
            owner: None,
            progress: WarmupProgress::Evicted {
                reason: reason.to_string(),
            },
        })
    }

    /// Makes room for `need` more bytes by evicting least recently used
    /// copies nobody uses or pinned; the error says how much is held.
    pub(super) fn make_room(
        &mut self,
        need: u64,
        in_use: &InUse,
    ) -> Result<Vec<CacheEvent>, lru::CacheFull> {
        let held = |sha: &str| self.is_held(sha, in_use);
        let victims = lru::victims(
            &self.index.entries,
            held,
            self.capacity_bytes,
            self.used_bytes(),
            need,
        )?;
        Ok(victims
            .iter()
            .filter_map(|sha| self.delete(sha, "least recently used; room for another version"))
            .collect())
    }

    /// Adds a run's bytes to the origin or peer counter.
    pub(super) fn count_bytes(&mut self, from_peer: bool, bytes: u64) {
        match from_peer {
            true => self.index.counters.bytes_from_peers += bytes,
            false => self.index.counters.bytes_from_origin += bytes,
        }
    }

    /// Aborts every fetch (agent shutdown); their partials stay.
    pub fn abort_fetches(&mut self) {
        for (_, r) in std::mem::take(&mut self.running) {
            r.handle.abort();
            self.count_bytes(r.from_peer, r.tally.written.get());
        }
        self.save();
    }
}
