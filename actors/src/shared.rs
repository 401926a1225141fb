//! What every control-plane actor is handed at birth: the durable store behind
//! its flush gate, the actor directory, the scheduler's address and the config.
use crate::config::ServerConfig;
use crate::durability::{FlushGate, Ticket};
use crate::registry::Registry;
use crate::scheduler::Scheduler;
use crate::tokens::TokenBook;
use actix::Addr;
use caldera_spec::Event;
use caldera_storage::WriteBatch;
use std::sync::Arc;

pub struct Shared {
    pub gate: Arc<FlushGate>,
    pub registry: Arc<Registry>,
    pub scheduler: Addr<Scheduler>,
    pub config: ServerConfig,
    pub tokens: Arc<TokenBook>,
    /// Largest GPU in the pool, MiB (kept by the Scheduler), for the inference cap.
    pub largest_gpu_mb: Arc<std::sync::atomic::AtomicU64>,
}

impl Shared {
    /// A new write batch.
    pub fn batch(&self) -> WriteBatch {
        self.gate.store().batch()
    }

    /// Commits `b`; a storage failure is logged and reported as `None` (the
    /// caller does not act on a transition that was not recorded).
    pub fn commit(&self, b: WriteBatch) -> Option<Ticket> {
        self.gate.commit_logged(b)
    }

    /// Records one event on its own.
    pub fn record(&self, e: Event) {
        self.gate.record(e)
    }
}
