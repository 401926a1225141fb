//! caldera-gateway: the HTTP face of the control plane — REST /v1, the node
//! WebSocket, health and metrics. It translates HTTP to actor messages.
pub mod server;

pub use server::{run, GatewayError, Started};
