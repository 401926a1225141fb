//! caldera-gateway: the HTTP face of the control plane — REST /v1, the node
//! WebSocket, health and metrics. It translates HTTP to actor messages.
pub mod auth;
pub mod body;
pub mod envelope;
pub mod routes;
pub mod server;
pub mod state;
pub mod ws;

pub use server::{run, GatewayError, Started};
