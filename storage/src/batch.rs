//! The write path: every mutation is a [`WriteBatch`] applied atomically.
use crate::errors::StorageError;
use crate::keys;
use caldera_spec::{Allocation, Event, ModelVersionRecord, NodeRecord, TaskRecord, TenantRecord};
use serde::Serialize;

/// A set of writes that [`Store::commit`](crate::Store::commit) applies all
/// together or not at all — a crash never leaves half of one behind.
///
/// Records are encoded when they are added, so the commit itself only assigns
/// event seqs and hands one `sled::Batch` to sled.
#[derive(Debug, Default)]
pub struct WriteBatch {
    pub(crate) ops: sled::Batch,
    pub(crate) events: Vec<Event>,
    pub(crate) writes: usize,
    /// The first record that failed to encode; commit returns it.
    pub(crate) error: Option<StorageError>,
}

impl WriteBatch {
    /// An empty batch (same as [`Store::batch`](crate::Store::batch)).
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// Inserts or replaces the task under its `spec.task_id`, and moves its
    /// entry of the task index to its state in the same batch.
    pub fn put_task(&mut self, task: &TaskRecord) {
        self.put_json(keys::record(keys::TASK, &task.spec.task_id), task);
        self.stage_task_index(task);
    }

    /// Deletes a task record and its index entry (its events stay in the log).
    pub fn remove_task(&mut self, task_id: &str) {
        self.remove(keys::record(keys::TASK, task_id));
        self.unstage_task_index(task_id);
    }

    /// Inserts or replaces an allocation of the live ledger.
    pub fn put_allocation(&mut self, allocation: &Allocation) {
        self.put_json(
            keys::record(keys::ALLOCATION, &allocation.allocation_id),
            allocation,
        );
    }

    /// Takes an allocation out of the live ledger (absent: no-op).
    pub fn remove_allocation(&mut self, allocation_id: &str) {
        self.remove(keys::record(keys::ALLOCATION, allocation_id));
    }

    /// Inserts or replaces a tenant.
    pub fn put_tenant(&mut self, tenant: &TenantRecord) {
        self.put_json(keys::record(keys::TENANT, &tenant.name), tenant);
    }

    /// Inserts or replaces a node.
    pub fn put_node(&mut self, node: &NodeRecord) {
        self.put_json(keys::record(keys::NODE, &node.name), node);
    }

    /// Inserts or replaces a model version under `name:version`.
    pub fn put_model_version(&mut self, version: &ModelVersionRecord) {
        self.put_json(keys::record(keys::MODEL, &version.key()), version);
    }

    /// Deletes the version stored under `key` (`name:version`; absent:
    /// no-op). Only a rename does this: versions are otherwise never deleted.
    pub fn remove_model_version(&mut self, key: &str) {
        self.remove(keys::record(keys::MODEL, key));
    }

    /// Sets a small setting (token hash, counter) to raw bytes.
    pub fn meta_put(&mut self, key: &str, value: &[u8]) {
        self.writes += 1;
        self.ops.insert(keys::record(keys::META, key), value);
    }

    /// Inserts an empty-valued key (an index or queue entry).
    pub(crate) fn put_marker(&mut self, key: Vec<u8>) {
        self.writes += 1;
        self.ops.insert(key, &[]);
    }

    /// Deletes a setting (absent: no-op).
    pub fn meta_remove(&mut self, key: &str) {
        self.remove(keys::record(keys::META, key));
    }

    /// Appends to the event log. `event.seq` is ignored: the commit assigns
    /// the next seq, strictly increasing and never reused, also across
    /// restarts ([`CommitInfo::event_seqs`](crate::CommitInfo)).
    pub fn append_event(&mut self, event: Event) {
        self.events.push(event);
    }

    /// True when committing this batch would change nothing.
    pub fn is_empty(&self) -> bool {
        self.writes == 0 && self.events.is_empty() && self.error.is_none()
    }

    pub(crate) fn put_json<T: Serialize>(&mut self, key: Vec<u8>, value: &T) {
        self.writes += 1;
        match serde_json::to_vec(value) {
            Ok(bytes) => self.ops.insert(key, bytes),
            Err(source) => {
                if self.error.is_none() {
                    self.error = Some(StorageError::Encode {
                        key: keys::display(&key),
                        source,
                    });
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: Vec<u8>) {
        self.writes += 1;
        self.ops.remove(key);
    }
}
