//! What every HTTP handler is handed.
use actix::Addr;
use caldera_actors::cluster::Cluster;
use caldera_actors::shared::Shared;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub struct AppState {
    pub cluster: Addr<Cluster>,
    pub shared: Arc<Shared>,
    pub next_session: AtomicU64,
    pub max_body_bytes: usize,
}
