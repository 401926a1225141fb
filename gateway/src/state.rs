//! What every HTTP handler is handed: the control plane's facade and the
//! gateway's own settings. Routes reach the control plane only through it.
pub mod endpoint_revisions;
pub mod estimate_cache;

use crate::body::BodyLimit;
use caldera_actors::control_plane::ControlPlane;
use std::sync::atomic::AtomicU64;

pub struct AppState {
    pub cp: ControlPlane,
    pub next_session: AtomicU64,
    /// How large a request body may be, and how long it may take to arrive.
    pub body_limit: BodyLimit,
    /// The last start-estimate accuracy computed (a scan of every task).
    pub estimates: estimate_cache::EstimateCache,
    /// `/metrics`: the registered event measures and the HTTP ones.
    pub metrics: crate::metrics::Exposition,
    /// The endpoint lists last answered per service, and their revisions.
    pub endpoint_revisions: endpoint_revisions::EndpointRevisions,
    /// The portal's sessions (in memory: a restart logs everyone out).
    pub portal: crate::portal::Portal,
}
