//! The one resync between a node and the control plane. Whenever the two
//! may disagree about what runs on the node — a hello opening a new epoch,
//! a gap in the session's workload events, a task rebuilt from sled that
//! may have missed what its workload did — the node says what it holds
//! under the epoch (its hello's reports, or a [`Digest`] it is asked for)
//! and [`plan`] compares that with the books: the same rules every time,
//! applied in one place (`NodeActor`'s `resync`). Between resyncs the
//! events carry what happens, numbered so that a lost one is noticed
//! ([`gap`]), and heartbeats carry metrics, usage and the lease — never
//! replays of events.
//!
//! [`Digest`]: caldera_spec::wire::Digest
pub mod gap;
pub mod plan;

pub use gap::{Ask, SessionEvents};
pub use plan::{plan, MissingWorkload, Occasion, Plan, TaskNews};
