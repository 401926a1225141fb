//! Harness for tests that run Caldera as real processes: a control plane and
//! node agents as separate OS processes, talking over real sockets, with real
//! sled files. Faults are real too: SIGKILL, SIGSTOP/SIGCONT, restarts.
//! It links no control-plane crate: it drives the built `caldera` binary the
//! way a user and an operator would.
pub mod bench;
pub mod cluster;
pub mod container_host;
pub mod exposition;
pub mod failpoints;
pub mod fake_node;
pub mod http;
pub mod images;
pub mod keepalive;
pub mod ledger;
pub mod models;
pub mod origin;
pub mod portal;
pub mod process;
pub mod promql;
pub mod proxy;
pub mod registry_standin;
pub mod schema;
pub mod shims;
pub mod swap;
pub mod task_view;
pub mod ticks;
pub mod tls;
pub mod webdriver;
pub mod webhook_receiver;
pub mod weights;

pub use bench::stats::wall_ms;
pub use cluster::{cluster, start_agents, two_nodes, AgentSpec};
pub use http::Api;
pub use process::{file_lines, free_port, nodes_connected, wait_until, Agent, ControlPlane};
pub use task_view::history_states;

/// Operator token the harness configures (tests only).
pub const OPERATOR_TOKEN: &str = "test-operator-token-0123456789";
/// Join token the harness configures (tests only).
pub const JOIN_TOKEN: &str = "test-join-token-0123456789abcdef";
