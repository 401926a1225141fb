//! [`Store`]: sled behind a typed API.
use crate::batch::WriteBatch;
use crate::codec::decode;
use crate::config::StoreConfig;
use crate::errors::{Result, StorageError};
use crate::events::{self, EventFilter, EventPage};
use crate::keys;
use caldera_spec::{Allocation, Event, ModelVersionRecord, NodeRecord, TaskRecord, TenantRecord};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

mod task_index;

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitInfo {
    /// The seqs given to the batch's events, in the order they were appended.
    pub event_seqs: Vec<u64>,
}

/// The control plane's persistent state: tasks, the allocation ledger,
/// tenants, nodes, settings and the event log, in one sled database.
///
/// Cheap to clone (sled handles are reference counted); every clone is the
/// same store. Writes go through [`Store::commit`] (atomic, not yet durable);
/// [`Store::flush`]/[`Store::flush_async`] make everything committed so far
/// durable — call it once for a group of commits.
#[derive(Clone)]
pub struct Store {
    shared: Arc<Shared>,
}

struct Shared {
    /// Held while event seqs are assigned and the batch applied, so that seq
    /// order is log order: a reader paging by seq never skips an event that
    /// lands later with a smaller seq.
    commit_lock: Mutex<()>,
    last_event_seq: AtomicU64,
    /// The database, reopened in place after an I/O failure (`handle.rs`).
    handle: crate::handle::Handle,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("last_event_seq", &self.last_event_seq())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`. Fails if another process holds it.
    pub fn open(dir: &Path, cfg: &StoreConfig) -> Result<Store> {
        cfg.validate()
            .map_err(|e| StorageError::Config(e.to_string()))?;
        let io = |e| StorageError::Sled(sled::Error::Io(e));
        crate::private::narrow_dir(dir).map_err(io)?;
        let handle = crate::handle::Handle::open(dir, cfg)?;
        let db = handle.db()?;
        crate::private::narrow_tree(dir).map_err(io)?;
        let last_event_seq = recover_last_event_seq(&db)?;
        tracing::debug!(dir = %dir.display(), last_event_seq, "storage opened");
        let store = Store {
            shared: Arc::new(Shared {
                commit_lock: Mutex::new(()),
                last_event_seq: AtomicU64::new(last_event_seq),
                handle,
            }),
        };
        task_index::ensure(&store)?;
        Ok(store)
    }

    /// The sled tree itself, for this crate's typed readers (an error
    /// while a reopen runs).
    pub(crate) fn db(&self) -> Result<sled::Db> {
        self.shared.handle.db()
    }

    /// One task by id.
    pub fn task(&self, task_id: &str) -> Result<Option<TaskRecord>> {
        self.get(&keys::record(keys::TASK, task_id))
    }

    /// Every task, ordered by task id (for the rebuild on boot). A corrupt
    /// record yields an `Err` item naming its key; iteration goes on after it.
    pub fn tasks(&self) -> impl Iterator<Item = Result<TaskRecord>> {
        self.scan(keys::TASK)
    }

    /// Tasks with ids after `cursor` (exclusive), ordered by task id: a page of
    /// a listing starts where the last one ended without reading what came before.
    pub fn tasks_after(&self, cursor: &str) -> impl Iterator<Item = Result<TaskRecord>> {
        let mut start = keys::record(keys::TASK, cursor);
        start.push(0);
        let end = {
            let mut e = keys::TASK.to_vec();
            if let Some(last) = e.last_mut() {
                *last += 1;
            }
            e
        };
        crate::handle::entries(self.db().map(|db| db.range(start..end))).map(|kv| {
            let (k, v) = kv?;
            decode(&k, &v)
        })
    }

    /// Every task key (`t/` without the prefix), ordered, without decoding a
    /// record: how the operator's bare `GET /v1/tasks/{id}` finds which
    /// tenants hold an id (keys are `tenant/id`).
    pub fn task_keys(&self) -> impl Iterator<Item = Result<String>> {
        crate::handle::entries(self.db().map(|db| db.scan_prefix(keys::TASK))).map(|kv| {
            let (k, _) = kv?;
            Ok(String::from_utf8_lossy(&k[keys::TASK.len()..]).into_owned())
        })
    }

    /// The live allocation ledger, ordered by allocation id.
    pub fn allocations(&self) -> impl Iterator<Item = Result<Allocation>> {
        self.scan(keys::ALLOCATION)
    }

    /// One allocation by id.
    pub fn allocation(&self, allocation_id: &str) -> Result<Option<Allocation>> {
        self.get(&keys::record(keys::ALLOCATION, allocation_id))
    }

    /// One tenant by name.
    pub fn tenant(&self, name: &str) -> Result<Option<TenantRecord>> {
        self.get(&keys::record(keys::TENANT, name))
    }

    /// Every tenant, ordered by name.
    pub fn tenants(&self) -> Result<Vec<TenantRecord>> {
        self.scan(keys::TENANT).collect()
    }

    /// Every node, ordered by name.
    pub fn nodes(&self) -> Result<Vec<NodeRecord>> {
        self.scan(keys::NODE).collect()
    }

    /// One node by name.
    pub fn node(&self, name: &str) -> Result<Option<NodeRecord>> {
        self.get(&keys::record(keys::NODE, name))
    }

    /// One model version by `name:version`.
    pub fn model_version(&self, key: &str) -> Result<Option<ModelVersionRecord>> {
        self.get(&keys::record(keys::MODEL, key))
    }

    /// Every model version, ordered by `name:version`.
    pub fn model_versions(&self) -> Result<Vec<ModelVersionRecord>> {
        self.scan(keys::MODEL).collect()
    }

    /// Events matching `filter` with seq > `after_seq`, ascending, at most
    /// `limit`. Pass the last seq returned as the next `after_seq` to page.
    /// A filter on task, node, tenant or kind walks that dimension's index,
    /// not the whole log.
    pub fn events(&self, filter: &EventFilter, after_seq: u64, limit: usize) -> Result<Vec<Event>> {
        let db = self.db()?;
        Ok(events::read(&db, filter, after_seq, limit, usize::MAX)?.events)
    }

    /// [`Store::events`] examining at most `max_examined` events: the page
    /// says where to resume when the budget ran out before `limit` matches.
    pub fn events_page(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: usize,
        max_examined: usize,
    ) -> Result<EventPage> {
        let db = self.db()?;
        events::read(&db, filter, after_seq, limit, max_examined)
    }

    /// A small setting written with [`WriteBatch::meta_put`].
    pub fn meta_get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .db()?
            .get(keys::record(keys::META, key))?
            .map(|v| v.to_vec()))
    }

    /// The seq of the newest committed event (0: none yet).
    pub fn last_event_seq(&self) -> u64 {
        self.shared.last_event_seq.load(Ordering::Acquire)
    }

    /// A new, empty batch.
    pub fn batch(&self) -> WriteBatch {
        WriteBatch::new()
    }

    /// Applies `batch` atomically: all of it is visible, or (after an error or
    /// a crash) none of it. Not durable until the next flush. Safe to call
    /// from several threads at once.
    pub fn commit(&self, batch: WriteBatch) -> Result<CommitInfo> {
        let WriteBatch {
            mut ops,
            events,
            error,
            ..
        } = batch;
        if let Some(e) = error {
            return Err(e);
        }
        if events.is_empty() {
            // No seq to assign: sled orders concurrent batches by itself.
            self.db()?.apply_batch(ops)?;
            return Ok(CommitInfo::default());
        }
        // A panic cannot happen while the lock is held (no unwrap below), so a
        // poisoned lock only means another thread died elsewhere: carry on.
        let _guard = self
            .shared
            .commit_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut seq = self.shared.last_event_seq.load(Ordering::Acquire);
        let mut event_seqs = Vec::with_capacity(events.len());
        for mut event in events {
            seq += 1;
            event.seq = seq;
            events::stage(&mut ops, &event)?;
            event_seqs.push(seq);
        }
        self.db()?.apply_batch(ops)?;
        self.shared.last_event_seq.store(seq, Ordering::Release);
        Ok(CommitInfo { event_seqs })
    }

    /// Makes everything committed so far durable; returns the bytes written.
    pub fn flush(&self) -> Result<usize> {
        Ok(self.db()?.flush()?)
    }

    /// [`Store::flush`] without blocking the executor: the durability point
    /// of a group commit.
    pub async fn flush_async(&self) -> Result<usize> {
        Ok(self.db()?.flush_async().await?)
    }

    /// `fdatasync` of sled's log after a flush, so an acknowledged write also
    /// survives power loss (blocking: call it off the executor, once per group).
    pub fn sync_log(&self) -> Result<()> {
        self.shared.handle.sync_log()
    }

    /// Drops the database handle and opens it again from its files: the way
    /// out of an I/O failure that sled latched (a disk that filled up and
    /// was freed). What was flushed is there; what was applied but never
    /// flushed is gone, so whoever acted on it must read it back. Event seqs
    /// never go back: the next one follows the highest ever handed out.
    pub fn reopen(&self) -> Result<()> {
        // No commit lock held: commits fail while the slot is empty, and one
        // blocked on the lock while holding the old handle would keep its
        // file locked for the reopen that waits for it.
        let db = self.shared.handle.reopen()?;
        let recovered = recover_last_event_seq(&db)?;
        self.shared
            .last_event_seq
            .fetch_max(recovered, Ordering::AcqRel);
        tracing::info!(last_event_seq = self.last_event_seq(), "storage reopened");
        Ok(())
    }

    /// Whether the database takes a write and its flush now (blocking).
    pub fn probe(&self) -> Result<()> {
        let db = self.db()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        db.insert(
            keys::record(keys::META, "probe"),
            now.to_string().as_bytes(),
        )?;
        db.flush()?;
        self.shared.handle.sync_log()
    }

    /// Whether the data directory's disk takes a write of 1 MiB again
    /// (written, synced and removed; blocking).
    pub fn room_to_write(&self) -> Result<()> {
        self.shared.handle.room_to_write()
    }

    /// Bytes the store occupies on disk.
    pub fn size_on_disk(&self) -> Result<u64> {
        Ok(self.db()?.size_on_disk()?)
    }

    /// Adds to `batch` the deletion of every key in `range`; returns how many.
    pub(crate) fn stage_range_removal(
        &self,
        batch: &mut WriteBatch,
        range: std::ops::Range<Vec<u8>>,
    ) -> Result<usize> {
        let mut n = 0;
        for k in self.db()?.range(range).keys() {
            batch.remove(k?.to_vec());
            n += 1;
        }
        Ok(n)
    }

    pub(crate) fn get<T: DeserializeOwned>(&self, key: &[u8]) -> Result<Option<T>> {
        match self.db()?.get(key)? {
            Some(v) => decode(key, &v).map(Some),
            None => Ok(None),
        }
    }

    pub(crate) fn scan<T: DeserializeOwned>(
        &self,
        prefix: &[u8],
    ) -> impl Iterator<Item = Result<T>> {
        crate::handle::entries(self.db().map(|db| db.scan_prefix(prefix))).map(|kv| {
            let (k, v) = kv?;
            decode(&k, &v)
        })
    }
}

/// The seq of the newest `e/` key. Events are never deleted, so this is the
/// highest seq ever handed out (a trim of the log must keep the newest event).
fn recover_last_event_seq(db: &sled::Db) -> Result<u64> {
    match db.scan_prefix(keys::EVENT).next_back() {
        Some(kv) => Ok(keys::seq_suffix(&kv?.0).unwrap_or(0)),
        None => Ok(0),
    }
}
