//! caldera-scheduling: the pure heart of Caldera's scheduler.
//!
//! - [`placement`]: filter -> score -> select over a per-GPU pool index. The
//!   live Scheduler actor and `caldera sim` call the same [`placement::Placer`].
//! - [`queue`]: the scheduling core — queue order, admission against quotas,
//!   fair share, backfill, start estimates, preemption, the allocation ledger,
//!   and the demand a task spec turns into.
//!
//! What it may not depend on: actix, tokio, tracing, sled, a clock or any I/O.
//! That is a fact of its Cargo.toml (spec, serde and thiserror only): time is an
//! argument (`now_ms`), randomness is a seed, and results are values the caller
//! acts on. A new score term goes in `placement/score/`, a new filter in
//! `placement/filter/`, a new queue rule in the stage of `queue/core/stages/` it
//! belongs to.
pub mod placement;
pub mod queue;
