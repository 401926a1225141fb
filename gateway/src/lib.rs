//! caldera-gateway: the HTTP face of the control plane — REST /v1, the node
//! WebSocket, health and metrics, and the API's own description
//! (`/openapi.json`, `/docs`), and the portal's pages. REST handlers
//! (`routes`) and pages (`portal`) both call one typed layer, [`api`], which
//! holds who may see or change what and calls the control plane's facade
//! (`caldera_actors::control_plane::ControlPlane`). It may not read sled,
//! name an actor or a message (the facade is its one door into the control
//! plane), nor depend on `caldera-sim`.
pub mod api;
pub mod body;
pub mod client_limit;
pub mod envelope;
pub mod error;
pub mod error_envelope;
pub mod metrics;
pub mod openapi;
pub mod parser_errors;
pub mod portal;
pub mod principal;
pub mod routes;
pub mod security_headers;
pub mod server;
pub mod state;
pub mod ws;

pub use error::ApiError;
pub use server::{run, run_without_signals, GatewayError, Started};
