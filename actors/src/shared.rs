//! What every control-plane actor is handed at birth: the durable store behind
//! its flush gate, the actor directory, the scheduler's address and the config.
use crate::commit_site::CommitSite;
use crate::config::ServerConfig;
use crate::durability::{FlushGate, Ticket};
use crate::protocol::SchedulerHandle;
use crate::registry::Registry;
use crate::tokens::TokenBook;
use caldera_scheduling::queue::offers::Offers;
use caldera_spec::Event;
use caldera_storage::WriteBatch;
use std::sync::{Arc, RwLock};

pub struct Shared {
    /// The one clock of the shells (monotonic; paused and advanced in tests).
    pub clock: crate::clock::Clock,
    pub gate: Arc<FlushGate>,
    pub registry: Arc<Registry>,
    pub scheduler: SchedulerHandle,
    pub config: ServerConfig,
    pub tokens: Arc<TokenBook>,
    /// What nodes said that was refused, per node and reason (for `/metrics`).
    pub refusals: crate::refusals::Refusals,
    /// What the registered nodes offer (kept by the Scheduler), for the
    /// checks at submission: the inference cap, requests no node could hold.
    pub offers: Arc<PoolOffers>,
    /// Every node's weight cache as last reported (the NodeActors write it).
    pub fleet: Arc<crate::model::fleet::Fleet>,
    /// Origin reads under way across all model versions (`models.max-origin-pulls`).
    pub origin_budget: Arc<crate::model::budget::OriginBudget>,
    /// Every node's images as last reported, and the image pulls under way
    /// (`scheduling.max-image-pulls`); the NodeActors write it.
    pub images: Arc<crate::images::Images>,
    /// Held from counting a tenant's webhook subscriptions to committing a
    /// new one, so parallel requests cannot pass `webhooks.max-per-tenant`
    /// together.
    pub webhook_subscribing: tokio::sync::Mutex<()>,
}

/// The Scheduler's latest [`Offers`], readable without asking it.
#[derive(Debug, Default)]
pub struct PoolOffers(RwLock<Arc<Offers>>);

impl PoolOffers {
    /// The offers as last published.
    pub fn current(&self) -> Arc<Offers> {
        match self.0.read() {
            Ok(o) => o.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Publishes new offers (the Scheduler, when a node's inventory changes).
    pub fn publish(&self, offers: Arc<Offers>) {
        match self.0.write() {
            Ok(mut o) => *o = offers,
            Err(poisoned) => *poisoned.into_inner() = offers,
        }
    }
}

impl Shared {
    /// A new write batch.
    pub fn batch(&self) -> WriteBatch {
        self.gate.store().batch()
    }

    /// Commits `b`; a storage failure is logged and reported as `None` (the
    /// caller does not act on a transition that was not recorded).
    pub fn commit(&self, site: CommitSite, b: WriteBatch) -> Option<Ticket> {
        self.gate.commit_logged(site, b)
    }

    /// Milliseconds since the Unix epoch, from the injected clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Records one event on its own.
    pub fn record(&self, e: Event) {
        self.gate.record(e)
    }

    /// The event measures of `/metrics` (kept with the flush gate, which
    /// every actor holds and which times the commits itself).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        self.gate.metrics()
    }
}
