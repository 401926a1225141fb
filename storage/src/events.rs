//! The event log: numbering on commit, secondary indexes, filtered reads.
use crate::errors::{Result, StorageError};
use crate::keys::{self, IndexDim};
use caldera_spec::{Event, EventKind};

/// Which events [`Store::events`](crate::Store::events) returns: all set
/// fields must match (an empty filter matches every event).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub task: Option<String>,
    pub tenant: Option<String>,
    pub node: Option<String>,
    pub kind: Option<EventKind>,
}

impl EventFilter {
    /// Whether `event` passes every set field.
    pub fn matches(&self, event: &Event) -> bool {
        fn eq(want: &Option<String>, got: &Option<String>) -> bool {
            want.is_none() || want == got
        }
        eq(&self.task, &event.task)
            && eq(&self.tenant, &event.tenant)
            && eq(&self.node, &event.node)
            && self.kind.is_none_or(|k| k == event.kind)
    }

    /// The index to walk: the most selective dimension set (a task has few
    /// events, a tenant many); the other fields are checked per event. A
    /// filter on kind alone walks the log itself: kinds are few and common,
    /// so an index per kind would cost every commit a key for little gain.
    pub(crate) fn primary_index(&self) -> Option<(IndexDim, String)> {
        let by = |dim, name: &Option<String>| name.as_ref().map(|n| (dim, n.clone()));
        by(IndexDim::Task, &self.task)
            .or_else(|| by(IndexDim::Node, &self.node))
            .or_else(|| by(IndexDim::Tenant, &self.tenant))
    }
}

/// Adds `event` (already numbered) and its index entries to `ops`.
pub(crate) fn stage(ops: &mut sled::Batch, event: &Event) -> Result<()> {
    let key = keys::event(event.seq);
    let bytes = serde_json::to_vec(event).map_err(|source| StorageError::Encode {
        key: keys::display(&key),
        source,
    })?;
    ops.insert(key, bytes);
    let dims = [
        (IndexDim::Task, event.task.as_deref()),
        (IndexDim::Tenant, event.tenant.as_deref()),
        (IndexDim::Node, event.node.as_deref()),
    ];
    for (dim, name) in dims {
        if let Some(name) = name {
            ops.insert(keys::index_entry(dim, name, event.seq), &[]);
        }
    }
    Ok(())
}

/// Events matching `filter` with seq > `after_seq`, ascending, at most `limit`.
pub(crate) fn read(
    tree: &sled::Tree,
    filter: &EventFilter,
    after_seq: u64,
    limit: usize,
) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    let Some(first) = after_seq.checked_add(1) else {
        return Ok(out);
    };
    if limit == 0 {
        return Ok(out);
    }
    match filter.primary_index() {
        None => {
            for kv in tree.range(keys::event(first)..) {
                let (k, v) = kv?;
                if !k.starts_with(keys::EVENT) {
                    break;
                }
                let event: Event = crate::store::decode(&k, &v)?;
                if filter.matches(&event) {
                    out.push(event);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
        Some((dim, name)) => {
            let prefix = keys::index_prefix(dim, &name);
            let mut start = prefix.clone();
            start.extend_from_slice(&first.to_be_bytes());
            for kv in tree.range(start..) {
                let (k, _) = kv?;
                if !k.starts_with(&prefix) {
                    break;
                }
                let Some(seq) = keys::seq_suffix(&k) else {
                    continue;
                };
                let ek = keys::event(seq);
                // Index entry and event are written in one batch; an entry
                // without its event cannot exist, but a read must not fail on it.
                let Some(v) = tree.get(&ek)? else {
                    continue;
                };
                let event: Event = crate::store::decode(&ek, &v)?;
                if filter.matches(&event) {
                    out.push(event);
                    if out.len() >= limit {
                        break;
                    }
                }
            }
        }
    }
    Ok(out)
}
