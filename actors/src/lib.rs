//! caldera-actors: the control plane. Supervised actix actors (Cluster,
//! Scheduler, NodeActor, TenantActor, TaskActor) and the placement engine.
pub mod clock;
pub mod cluster;
pub mod config;
pub mod durability;
pub mod errors;
pub mod node;
pub mod placement;
pub mod registry;
pub mod scheduler;
pub mod service;
pub mod shared;
pub mod sim;
pub mod task;
pub mod tenant;
pub mod tokens;
pub mod views;
