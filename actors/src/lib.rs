//! caldera-actors: the control plane. Supervised actix actors (Cluster,
//! Scheduler, NodeActor, TenantActor, TaskActor). The pure placement engine and
//! queue live in `caldera-scheduling`; the simulator in `caldera-sim`.
pub mod clock;
pub mod cluster;
pub mod config;
pub mod control_plane;
pub mod durability;
pub mod errors;
#[cfg(test)]
mod fixtures;
pub mod lifecycle;
pub mod node;
pub mod node_loss;
pub mod protocol;
pub mod reconcile;
pub mod registry;
pub mod scheduler;
pub mod service;
pub mod shared;
#[cfg(test)]
mod stand_ins;
pub mod supervision;
#[cfg(test)]
mod supervision_tests;
pub mod task;
#[cfg(test)]
mod task_tests;
pub mod tenant;
pub mod tokens;
pub mod views;
