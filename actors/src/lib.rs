//! caldera-actors: the control plane. The supervised actix shells that own
//! state and exchange messages (Cluster, Scheduler, NodeActor, TenantActor,
//! TaskActor for one task's lifecycle, ServiceActor for an inference service
//! and its replicas), their protocol ([`protocol`]: every message and the typed
//! handles they hold of each other) and the facade the gateway calls
//! ([`control_plane`]). The pure placement engine and queue live in
//! `caldera-scheduling`; decisions are made there and carried out here.
//!
//! It may depend on spec, storage and scheduling, never on the gateway (HTTP is
//! not its concern) nor on `caldera-sim` (no plots or trace code in the server).
//! How the pieces fit, and where a new message or actor goes:
//! `docs/concepts/architecture.md`.
pub mod chargeback;
pub mod clock;
pub mod cluster;
#[cfg(any(test, feature = "failpoints"))]
pub mod commit_faults;
pub mod commit_site;
pub mod config;
pub mod container;
pub mod control_plane;
pub mod durability;
pub mod errors;
#[cfg(test)]
mod fixtures;
pub mod images;
pub mod lifecycle;
pub mod metrics;
pub mod migrate;
pub mod model;
pub mod node;
pub mod node_loss;
pub mod node_trust;
pub mod protocol;
pub mod refusals;
pub mod registry;
pub mod resync;
pub mod scheduler;
pub mod service;
pub mod shared;
#[cfg(test)]
mod stand_ins;
pub mod storage_health;
pub mod storage_reopen;
pub mod supervision;
#[cfg(test)]
mod supervision_tests;
pub mod task;
mod task_reaction;
mod task_record;
#[cfg(test)]
mod task_tests;
pub mod tenant;
pub mod tenant_cap;
pub mod token_key;
pub mod tokens;
pub mod usage_history;
pub mod views;
pub mod webhook;
