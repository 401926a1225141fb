//! Stand-ins the shell tests share: a Scheduler that writes down what it is
//! told (any port will do behind a handle), and the `Shared` a shell is born
//! with, over a real sled store and a clock that starts at a known time.
use crate::clock::Clock;
use crate::config::ServerConfig;
use crate::durability::FlushGate;
use crate::protocol::scheduler::*;
use crate::protocol::{Reply, SchedulerHandle};
use crate::registry::Registry;
use crate::shared::Shared;
use crate::tokens::TokenBook;
use crate::views::{NodeAllocated, SchedulerStats, Utilization};
use caldera_spec::Allocation;
use caldera_storage::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A Scheduler that only writes down what it was told. Made `deaf`, it
/// answers no question (as a Scheduler being rebuilt does not). A grant it is
/// asked to record it records as the real one does (allocation and task
/// record in one batch) in the store `shared` gave it.
#[derive(Default, Clone)]
pub struct Heard(
    Arc<Mutex<Vec<String>>>,
    Arc<std::sync::atomic::AtomicBool>,
    Arc<std::sync::OnceLock<Arc<FlushGate>>>,
);

impl Heard {
    pub fn deaf() -> Heard {
        let h = Heard::default();
        h.1.store(true, std::sync::atomic::Ordering::SeqCst);
        h
    }
    pub fn note(&self, s: String) {
        if let Ok(mut v) = self.0.lock() {
            v.push(s);
        }
    }
    pub fn all(&self) -> Vec<String> {
        self.0.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

fn ready<T: Send + 'static>(v: T) -> Reply<T> {
    Box::pin(async move { Ok(v) })
}

impl SchedulerPort for Heard {
    fn restart(&self, _: Restart) {}
    fn enqueue(&self, m: Enqueue) {
        self.note(format!("enqueue {}", m.task_id))
    }
    fn dequeue(&self, m: Dequeue) {
        self.note(format!("dequeue {}", m.task_id))
    }
    fn free(&self, m: Free) {
        self.note(format!("free {}", m.allocation_id))
    }
    fn node_up(&self, m: NodeUp) {
        self.note(format!("node_up {}", m.name))
    }
    fn node_down(&self, m: NodeDown) {
        self.note(format!("node_down {}", m.name))
    }
    fn node_cordoned(&self, m: NodeCordoned) {
        self.note(format!("node_cordoned {} {}", m.name, m.cordoned))
    }
    fn node_metrics(&self, _: NodeMetricsUpdate) {}
    fn node_weights(&self, m: NodeWeightsUpdate) {
        self.note(format!("node_weights {} {:?}", m.name, m.weights.cached))
    }
    fn node_images(&self, m: NodeImagesUpdate) {
        self.note(format!("node_images {} {:?}", m.name, m.images.held.keys()))
    }
    fn model_weights(&self, m: ModelWeightsKnown) {
        self.note(format!("model_weights {}", m.need.model))
    }
    fn checkpointed(&self, _: Checkpointed) {}
    fn served_model(&self, _: ServedModel) {}
    fn set_quota(&self, m: SetQuota) {
        self.note(format!(
            "set_quota {} gpus={:?}",
            m.tenant, m.limits.guaranteed.gpus
        ))
    }
    fn record_grant(
        &self,
        m: RecordGrant,
    ) -> Reply<Result<crate::durability::Ticket, GrantNotRecorded>> {
        self.note(format!("record_grant {}", m.allocation.allocation_id));
        let allocation_id = m.allocation.allocation_id.clone();
        let Some(gate) = self.2.get() else {
            return ready(Err(GrantNotRecorded::Storage {
                allocation_id,
                error: caldera_storage::StorageError::Config("no store".into()),
            }));
        };
        let mut b = gate.store().batch();
        b.put_allocation(&m.allocation);
        b.put_task(&m.record);
        b.append_event(m.event);
        ready(
            gate.commit(crate::commit_site::CommitSite::Grant, b)
                .map_err(|error| GrantNotRecorded::Storage {
                    allocation_id,
                    error,
                }),
        )
    }
    fn ledger_allocations(&self, _: LedgerAllocations) -> Reply<Vec<Allocation>> {
        ready(Vec::new())
    }
    fn allocations_on(&self, _: AllocationsOn) -> Reply<Vec<Allocation>> {
        if self.1.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(async { Err(actix::MailboxError::Closed) });
        }
        ready(Vec::new())
    }
    fn allocated_by_node(&self, _: AllocatedByNode) -> Reply<HashMap<String, NodeAllocated>> {
        ready(HashMap::new())
    }
    fn stats(&self, _: Stats) -> Reply<SchedulerStats> {
        ready(SchedulerStats {
            queued: 0,
            allocations: 0,
            healthy_nodes: 0,
        })
    }
    fn queue_positions(&self, _: QueuePositions) -> Reply<HashMap<String, u32>> {
        ready(HashMap::new())
    }
    fn dry_run(&self, _: DryRunPlacement) -> Reply<caldera_scheduling::queue::dry_run::DryRun> {
        Box::pin(async { Err(actix::MailboxError::Closed) })
    }
    fn utilization(&self, _: QueryUtilization) -> Reply<Utilization> {
        Box::pin(async { Err(actix::MailboxError::Closed) })
    }
    fn pool_metrics(&self, _: QueryPoolMetrics) -> Reply<crate::views::PoolMetrics> {
        Box::pin(async { Err(actix::MailboxError::Closed) })
    }
    fn use_trail(&self, _: QueryUseTrail) -> Reply<Vec<crate::views::UsePoint>> {
        ready(Vec::new())
    }
}

pub fn shared(store: Store, heard: &Heard) -> Arc<Shared> {
    let gate = FlushGate::start(store, Default::default());
    let _ = heard.2.set(gate.clone());
    Arc::new(Shared {
        clock: Clock::starting_at(1_700_000_000_000),
        gate,
        registry: Arc::new(Registry::default()),
        scheduler: SchedulerHandle::new(heard.clone()),
        config: ServerConfig::default(),
        tokens: Arc::new(TokenBook::default()),
        offers: Arc::default(),
        refusals: Default::default(),
        fleet: Default::default(),
        origin_budget: Default::default(),
        images: Default::default(),
        webhook_subscribing: Default::default(),
    })
}
