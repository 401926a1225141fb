//! The control plane's protocol: every message an actor answers, grouped by the
//! actor that receives it, and the typed handles actors hold of each other.
//! This module is a leaf: it names no actor type, so shells depend on it and
//! never on each other. A new message goes in the file of its receiver, plus
//! one line in that file's `handle!` block.
mod handle;

pub mod cluster;
pub mod lifecycle;
pub mod model;
pub mod node;
pub mod scheduler;
pub mod service;
pub mod task;
pub mod tenant;

pub use handle::{Ask, Reply, Tell};
pub use model::ModelHandle;
pub use node::NodeHandle;
pub use scheduler::SchedulerHandle;
pub use service::ServiceHandle;
pub use task::TaskHandle;
pub use tenant::TenantHandle;
