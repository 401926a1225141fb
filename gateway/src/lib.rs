//! caldera-gateway: the HTTP face of the control plane — REST /v1, the node
//! WebSocket, health and metrics. It translates HTTP to actor messages.
// Handler helpers return the finished error response as their `Err`: it is the
// value the handler answers with, built once, on a path that is not hot.
#![allow(clippy::result_large_err)]
pub mod auth;
pub mod body;
pub mod envelope;
pub mod routes;
pub mod server;
pub mod state;
pub mod ws;

pub use server::{run, GatewayError, Started};
