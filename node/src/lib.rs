//! caldera-node: the node agent. It probes the machine ([`probe`]), keeps one
//! WebSocket session with the control plane ([`session`]), and runs each
//! allocation's workload as a supervised process group ([`runtime`]).
pub mod config;
pub mod error;
pub mod probe;
pub mod sim_gpus;

pub use config::AgentConfig;
pub use error::{AgentError, StartError};
pub mod cgroup;
pub mod runtime;
