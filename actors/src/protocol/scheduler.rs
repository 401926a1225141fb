//! Messages the Scheduler answers.
pub use crate::scheduler::idle::TenantUsage;
pub use crate::scheduler::utilization::QueryUtilization;
pub use crate::scheduler::{
    AllocatedByNode, AllocationsOn, Checkpointed, Dequeue, Enqueue, Free, NodeDown,
    NodeMetricsUpdate, NodeUp, Restart, SchedulerStats, SetQuota, Stats,
};
