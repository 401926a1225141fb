//! Messages a TaskActor answers (a service's TaskActor also answers the replica ones).
pub use crate::service::{ReplicaState, Scale, ScaleInIdle};
pub use crate::task::{
    NodeLost, Pending, Placed, Preempt, Reclaim, Release, Remarked, TaskSnapshot, Workload,
    WorkloadMissing,
};
