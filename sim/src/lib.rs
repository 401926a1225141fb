//! caldera-sim: `caldera sim`. Loads the Alibaba GPU traces (openb, FGD ATC'23),
//! replays them statically through the placement engine and dynamically through
//! the real scheduling core, measures GPU allocation and waste, and reports it
//! next to the paper's published numbers (tables, JSON, SVG plots).
//!
//! It depends on `caldera-scheduling` and `caldera-spec` only — the same code the
//! live Scheduler calls, never a copy. Nothing in the control plane depends on
//! it: `plotters` and the trace CSV code stay out of the server.
pub mod cache;
pub mod dynamic;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run;
pub mod tally;
pub mod trace;
pub mod waste;

pub use replay::{replay, SeedRun, Trace};
pub use report::{PolicyReport, Published};
pub use run::{run_policies, RunSpec};
pub use trace::{load_nodes, load_tasks, TraceError};
