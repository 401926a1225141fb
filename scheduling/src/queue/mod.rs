//! The scheduling core: what runs next and where, as pure functions over the
//! pool, the ledger and the queue. [`core::Core`] holds the state; the cycle's
//! [`stages`] (order, admit, place, backfill, preempt, bind) decide; the
//! Scheduler actor in `caldera-actors` records and carries out the decisions.
mod borrow_marks;
pub mod core;
#[cfg(test)]
mod core_tests;
pub mod demand;
pub mod dry_run;
pub mod estimate_accuracy;
#[cfg(test)]
mod fixtures;
mod images;
pub mod ledger;
pub mod offers;
pub mod outcomes;
pub mod weights;

/// Start-time estimates and the cycle's stages are part of the core's
/// implementation (they read and change its state); they stay reachable here.
pub use self::core::{estimate, stages};

/// Choosing victims; the preempt stage.
pub use self::core::stages::preempt;
