//! The node's weight cache: content-addressed (SHA-256) copies of model
//! versions under `<data-dir>/cache/` (see [`layout`]), with a capacity
//! (`--cache-gb`), LRU eviction that deletes files and never touches a copy
//! that is pinned, in use by a live allocation or being fetched, and
//! fetches ([`fetch`]) that only ever rename a verified file into place.
//! A copy serves only the audiences it was obtained for ([`access`]): the
//! operator's shared versions, or the tenant whose private version brought
//! it; a digest alone never opens another audience's copy.
//!
//! What is verified when:
//! - a fetch: size and SHA-256 of the whole partial, after it is synced and
//!   before the rename (a mismatch deletes it: `weights_corrupt`);
//! - a start that finds its copy cached: size and SHA-256 of the whole file
//!   again, before the workload gets its path (a truncated or flipped copy is
//!   deleted, counted in `corrupt_found`, reported evicted, and fetched
//!   again like a miss);
//! - a warm command for a copy already there: nothing (it was verified when
//!   it arrived and is checked again before its next use).
//!
//! The cache is owned by the agent's loop; fetches and checks run as tasks
//! that report back as [`CacheNote`]s. Its peer server ([`peer`]) serves
//! verified copies from `weights/`, and a copy still being fetched only as
//! a stream to a receiver that checks the whole copy's SHA-256 itself.
pub mod access;
pub mod digest;
pub mod exposure;
pub mod fetch;
pub mod index;
pub mod layout;
pub mod lru;
pub mod peer;
pub mod stamp;
mod store;
#[cfg(test)]
mod store_tests;
mod warm;

pub use store::{InUse, WeightCache};
pub use warm::Want;

use caldera_spec::weights::WarmupProgress;

/// Something the cache has to tell the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum CacheEvent {
    /// A report for the control plane about `sha256`'s copy, for a
    /// version owned by `owner` (None: shared, or about every version with
    /// the digest, as an eviction is).
    Report {
        sha256: String,
        owner: Option<String>,
        progress: WarmupProgress,
    },
    /// A verified (and, for a start, re-checked) copy of `sha256` is in
    /// place: the allocations waiting for it may start.
    Ready { sha256: String },
}

/// A fetch's or a check's result, for [`WeightCache::on_note`].
#[derive(Debug)]
pub enum CacheNote {
    Fetch(fetch::FetchNote),
    /// The check before use of `sha256` ended.
    Checked {
        sha256: String,
        seconds: f64,
        outcome: Result<(), digest::Mismatch>,
    },
}
