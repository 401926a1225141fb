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

/// A page of events and, when the read stopped at its budget, where to resume.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// The seq of the last event examined when the read ran out of budget
    /// before `limit` matches: pass it as the next `after_seq`. `None` when the
    /// read ended at `limit` matches or at the end of the log.
    pub resume_after: Option<u64>,
}

/// Events matching `filter` with seq > `after_seq`, ascending, at most
/// `limit`, examining at most `max_examined` events (so a filter that matches
/// rarely costs a bounded read per call, not a walk of the whole log).
pub(crate) fn read(
    tree: &sled::Tree,
    filter: &EventFilter,
    after_seq: u64,
    limit: usize,
    max_examined: usize,
) -> Result<EventPage> {
    let mut page = EventPage::default();
    let Some(first) = after_seq.checked_add(1) else {
        return Ok(page);
    };
    if limit == 0 {
        return Ok(page);
    }
    let mut examined = 0usize;
    // One examined event: keep it if it matches; `true` when the read is done.
    let mut examine = |page: &mut EventPage, event: Event| {
        examined += 1;
        let seq = event.seq;
        if filter.matches(&event) {
            page.events.push(event);
        }
        if page.events.len() >= limit {
            return true;
        }
        if examined >= max_examined {
            page.resume_after = Some(seq);
            return true;
        }
        false
    };
    match filter.primary_index() {
        None => {
            for kv in tree.range(keys::event(first)..) {
                let (k, v) = kv?;
                if !k.starts_with(keys::EVENT) {
                    break;
                }
                if examine(&mut page, crate::codec::decode(&k, &v)?) {
                    break;
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
                if examine(&mut page, crate::codec::decode(&ek, &v)?) {
                    break;
                }
            }
        }
    }
    Ok(page)
}
