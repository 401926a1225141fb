//! `caldera sim`: replays the Alibaba GPU trace (openb, FGD ATC'23) through the
//! placement engine, measures GPU allocation, and reports it next to the
//! paper's published numbers.
pub mod dynamic;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run;
pub mod trace;
pub mod waste;

pub use replay::{replay, SeedRun, Trace};
pub use report::{PolicyReport, Published};
pub use run::{run_policies, RunSpec};
pub use trace::{load_nodes, load_tasks, TraceError};
