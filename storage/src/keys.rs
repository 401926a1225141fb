//! Key layout of the one sled tree.
//!
//! Every record lives in the default tree under a one-letter prefix, so that a
//! [`WriteBatch`](crate::WriteBatch) is one atomic `sled::Batch`:
//!
//! | key | value |
//! |---|---|
//! | `t/<tenant>/<task_id>` | `TaskRecord` JSON (the task key, `caldera_spec::task_key`) |
//! | `i/<state tag>/<tenant>/<task_id>` | empty: the task index by state, tenant and id (`task_index.rs`) |
//! | `a/<allocation_id>` | `Allocation` JSON |
//! | `u/<tenant>` | `TenantRecord` JSON |
//! | `n/<node>` | `NodeRecord` JSON |
//! | `v/<name>:<version>` | `ModelVersionRecord` JSON (a registered model version) |
//! | `m/<key>` | raw bytes (operator settings, counters) |
//! | `e/<seq: u64 BE>` | `Event` JSON |
//! | `x/<dim><len: u32 BE><name><seq: u64 BE>` | empty: event index per task (`t`), tenant (`u`), node (`n`) |
//! | `s/<name>` | storage's own bookkeeping (format version) |
//! | `w/<webhook id>` | `WebhookRecord` JSON (a webhook subscription) |
//! | `d/r/<webhook id>/<seq: u64 BE>` | `DeliveryRecord` JSON (one event to one subscription) |
//! | `d/q/<webhook id>/<due ms: u64 BE><seq: u64 BE>` | empty: a pending delivery's place in its subscription's queue, by due time |
//! | `b/o/<allocation_id>` | `BillingRecord` JSON of a held allocation (open) |
//! | `b/c/<len: u32 BE><tenant><end_ms: u64 BE><allocation_id>` | `BillingRecord` JSON of a freed allocation (closed), by tenant and end |
//! | `h/<tier: u8>p<at_ms: u64 BE>` | pool usage history point (binary, `history.rs`) |
//! | `h/<tier: u8>t<len: u32 BE><tenant><at_ms: u64 BE>` | tenant usage history point (binary) |
//! | `r/<len: u32 BE><tenant><registry>` | `RegistryCredential` JSON (a tenant's credentials for one image registry) |
//!
//! Index names are length-prefixed so that the index of task `a` never
//! matches the entries of task `a/b` or `ab`.

pub(crate) const TASK: &[u8] = b"t/";
pub(crate) const TASK_INDEX: &[u8] = b"i/";
pub(crate) const ALLOCATION: &[u8] = b"a/";
pub(crate) const TENANT: &[u8] = b"u/";
pub(crate) const NODE: &[u8] = b"n/";
pub(crate) const MODEL: &[u8] = b"v/";
pub(crate) const META: &[u8] = b"m/";
pub(crate) const EVENT: &[u8] = b"e/";
pub(crate) const FORMAT: &[u8] = b"s/format";
pub(crate) const WEBHOOK: &[u8] = b"w/";
pub(crate) const DELIVERY: &[u8] = b"d/r/";
pub(crate) const DELIVERY_QUEUE: &[u8] = b"d/q/";
pub(crate) const BILLING_OPEN: &[u8] = b"b/o/";
pub(crate) const BILLING_CLOSED: &[u8] = b"b/c/";
pub(crate) const HISTORY: &[u8] = b"h/";
pub(crate) const REGISTRY_CREDENTIAL: &[u8] = b"r/";

/// `prefix`, the length of `name` (u32 BE), then `name`: so that the range
/// of `a` never holds the entries of `ab`.
pub(crate) fn length_prefixed(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 4 + name.len());
    k.extend_from_slice(prefix);
    // Names longer than 4 GiB cannot reach here: records are far smaller.
    k.extend_from_slice(&(name.len() as u32).to_be_bytes());
    k.extend_from_slice(name.as_bytes());
    k
}

/// The first key after every key that starts with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut e = prefix.to_vec();
    while let Some(last) = e.pop() {
        if last < u8::MAX {
            e.push(last + 1);
            return e;
        }
    }
    vec![u8::MAX; prefix.len() + 1]
}

/// Which dimension an event index covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexDim {
    Task,
    Tenant,
    Node,
}

impl IndexDim {
    fn tag(self) -> u8 {
        match self {
            IndexDim::Task => b't',
            IndexDim::Tenant => b'u',
            IndexDim::Node => b'n',
        }
    }
}

/// `prefix` followed by `name`.
pub(crate) fn record(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + name.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(name.as_bytes());
    k
}

/// `e/<seq>`.
pub(crate) fn event(seq: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(EVENT.len() + 8);
    k.extend_from_slice(EVENT);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The prefix shared by every index entry of `name` in `dim`.
pub(crate) fn index_prefix(dim: IndexDim, name: &str) -> Vec<u8> {
    length_prefixed(&[b'x', b'/', dim.tag()], name)
}

/// One index entry: `index_prefix(dim, name)` followed by the event's seq.
pub(crate) fn index_entry(dim: IndexDim, name: &str, seq: u64) -> Vec<u8> {
    let mut k = index_prefix(dim, name);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The seq at the end of an `e/` or index key.
pub(crate) fn seq_suffix(key: &[u8]) -> Option<u64> {
    let tail = key.len().checked_sub(8).map(|at| &key[at..])?;
    tail.try_into().ok().map(u64::from_be_bytes)
}

/// A key as a person reads it: `e/42` rather than eight raw bytes.
pub(crate) fn display(key: &[u8]) -> String {
    if key.starts_with(EVENT) && key.len() == EVENT.len() + 8 {
        if let Some(seq) = seq_suffix(key) {
            return format!("e/{seq}");
        }
    }
    String::from_utf8_lossy(key).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_keys_sort_by_seq() {
        assert!(event(255) < event(256));
        assert!(event(1) < event(u64::MAX));
        assert_eq!(seq_suffix(&event(77)), Some(77));
        assert_eq!(display(&event(42)), "e/42");
    }

    #[test]
    fn index_of_one_name_never_matches_another() {
        let a = index_prefix(IndexDim::Task, "a");
        assert!(!index_entry(IndexDim::Task, "a/b", 1).starts_with(&a));
        assert!(!index_entry(IndexDim::Task, "ab", 1).starts_with(&a));
        assert!(index_entry(IndexDim::Task, "a", 1).starts_with(&a));
        assert!(!index_entry(IndexDim::Node, "a", 1).starts_with(&a));
    }
}
