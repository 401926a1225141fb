//! Messages the Scheduler answers, and [`SchedulerHandle`].
use super::handle::handle;
use crate::views::{NodeAllocated, SchedulerStats, Utilization};
use actix::prelude::*;
use caldera_scheduling::queue::core::TenantLimits;
use caldera_spec::wire::AllocationUse;
use caldera_spec::{Allocation, Event, NodeInventory, NodeMetrics, TaskRecord, TaskSpec};
use std::collections::HashMap;

/// Stops the scheduler as a fatal error would; its supervisor restarts it and it
/// rebuilds from sled. The operator's last resort, and how tests prove the
/// supervision works.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Restart;

/// A task waits for room (new, requeued, or rebuilt after a restart).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Enqueue {
    pub task_id: String,
    pub tenant: String,
    pub spec: TaskSpec,
    pub seq: u64,
    pub attempt: u32,
    /// Since when it waits (Unix ms; [`crate::task::queued_since`]).
    pub queued_ms: u64,
}

/// A queued task leaves the queue (cancelled or released).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Dequeue {
    pub task_id: String,
}

/// An allocation ends: its room returns to the pool.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Free {
    pub allocation_id: String,
    pub reason: String,
}

/// A node's agent said hello: its room joins the pool. `epoch` is the lease
/// epoch of its session: every grant on the node is stamped with it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeUp {
    pub name: String,
    pub inventory: NodeInventory,
    pub epoch: u64,
    /// Cordoned (or drained): known, but no new placements there.
    pub cordoned: bool,
}

/// A node was cordoned (no new placements) or uncordoned.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeCordoned {
    pub name: String,
    pub cordoned: bool,
}

/// A task still waiting takes the grant it was sent (`Placed`): `record` is
/// its planned record (Scheduled, holding `allocation`, one more attempt) and
/// `event` that transition's event. The Scheduler records the allocation, the
/// record and both events in ONE batch and answers its ticket; or refuses
/// (the allocation is no longer in its ledger — a rebuild dropped it, or the
/// task asked for room again) and the task stays queued, re-enqueued.
#[derive(Message)]
#[rtype(result = "std::result::Result<crate::durability::Ticket, GrantNotRecorded>")]
pub struct RecordGrant {
    pub allocation: Allocation,
    pub record: TaskRecord,
    pub event: Event,
}

/// Why the Scheduler did not record a grant; the task logs it and stays as
/// it was.
#[derive(Debug, thiserror::Error)]
pub enum GrantNotRecorded {
    /// A rebuild dropped the allocation, or it was freed: the task waits again.
    #[error("allocation {allocation_id} is no longer in the ledger")]
    NoLongerHeld { allocation_id: String },
    /// Storage refused the batch; the Scheduler stops and is rebuilt from sled.
    #[error("the grant of {allocation_id} could not be recorded: {error}")]
    Storage {
        allocation_id: String,
        error: caldera_storage::StorageError,
    },
}

/// Nothing more is placed on a node until its agent says hello again
/// (`NodeUp`): it was lost, or its session ended (a start sent there now
/// would find no one to run it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeDown {
    pub name: String,
}

/// The ledger's allocations on one node (for the hello reconciliation).
#[derive(Message)]
#[rtype(result = "Vec<Allocation>")]
pub struct AllocationsOn {
    pub node: String,
}

/// Live metrics from a node's heartbeat.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeMetricsUpdate {
    pub name: String,
    pub metrics: NodeMetrics,
    pub usage: Vec<(String, AllocationUse)>,
}

/// A node's weight cache as placement sees it (from its last cache report).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeWeightsUpdate {
    pub name: String,
    pub weights: caldera_scheduling::placement::NodeWeights,
}

/// The images a node holds as placement sees them (from its last image report).
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeImagesUpdate {
    pub name: String,
    pub images: caldera_scheduling::placement::NodeImages,
}

/// A model version's weights, for the demand of tasks that name it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ModelWeightsKnown {
    /// Keyed by its `model` (`name:version`).
    pub need: caldera_scheduling::placement::WeightsNeed,
}

/// The workload of an allocation saved a checkpoint.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Checkpointed {
    pub allocation_id: String,
    pub at_ms: u64,
}

/// A held allocation's workload now serves another model version (an
/// in-place swap on the slice it holds): its billing record bills the
/// time from `at_ms` to `model`.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ServedModel {
    pub allocation_id: String,
    pub model: String,
    pub at_ms: u64,
}

/// A tenant's limits changed (or a tenant was created).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetQuota {
    pub tenant: String,
    pub limits: TenantLimits,
}

/// Allocated totals per node, for node views.
#[derive(Message)]
#[rtype(result = "HashMap<String, NodeAllocated>")]
pub struct AllocatedByNode;

#[derive(Message)]
#[rtype(result = "SchedulerStats")]
pub struct Stats;

/// The place in line (1 = first) of each of `task_ids` (task keys) that
/// waits: a page's worth, so the answer costs one pass over the queue and
/// carries no copy of it.
#[derive(Message)]
#[rtype(result = "HashMap<String, u32>")]
pub struct QueuePositions {
    pub task_ids: Vec<String>,
}

#[derive(Message)]
#[rtype(result = "Utilization")]
pub struct QueryUtilization;

/// The pool as `/metrics` shows it: utilisation, each tenant's borrowed and
/// idle holdings, the queue by priority.
#[derive(Message)]
#[rtype(result = "crate::views::PoolMetrics")]
pub struct QueryPoolMetrics;

/// One live allocation's measured use against what it was granted, one
/// sample per idle-inspector pass, oldest first (empty once it is freed):
/// the task page's use curve.
#[derive(Message)]
#[rtype(result = "Vec<crate::views::UsePoint>")]
pub struct QueryUseTrail {
    pub allocation_id: String,
}

/// Every allocation of the ledger in memory, ordered by id: the operator's
/// view for checking the ledger against the tasks' states.
#[derive(Message)]
#[rtype(result = "Vec<Allocation>")]
pub struct LedgerAllocations;

/// Where a task would go now, or why not: the pass's stages against the
/// live pool, binding nothing (`caldera_scheduling::queue::dry_run`).
/// `task_id` is the task's key (`tenant/id`).
#[derive(Message)]
#[rtype(result = "caldera_scheduling::queue::dry_run::DryRun")]
pub struct DryRunPlacement {
    pub task_id: String,
    pub tenant: String,
    pub spec: TaskSpec,
}

handle! {
    /// The Scheduler (supervised: the handle survives its rebuilds).
    SchedulerHandle: SchedulerPort {
        tell {
            restart: Restart,
            enqueue: Enqueue,
            dequeue: Dequeue,
            free: Free,
            node_up: NodeUp,
            node_down: NodeDown,
            node_cordoned: NodeCordoned,
            node_metrics: NodeMetricsUpdate,
            node_weights: NodeWeightsUpdate,
            node_images: NodeImagesUpdate,
            model_weights: ModelWeightsKnown,
            checkpointed: Checkpointed,
            served_model: ServedModel,
            set_quota: SetQuota,
        }
        ask {
            record_grant: RecordGrant,
            allocations_on: AllocationsOn,
            allocated_by_node: AllocatedByNode,
            stats: Stats,
            utilization: QueryUtilization,
            pool_metrics: QueryPoolMetrics,
            ledger_allocations: LedgerAllocations,
            queue_positions: QueuePositions,
            dry_run: DryRunPlacement,
            use_trail: QueryUseTrail,
        }
    }
}
