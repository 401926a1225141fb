//! [`ControlPlane`]: the one facade the gateway calls. Each method is one
//! operation of the API; which actor answers it, and what is read from sled
//! (always off the async workers), stays behind this file, so a route is
//! "parse, call, show" and never names a message, an address or the store.
mod chargeback;
mod dry_run;
pub mod earlier_runs;
mod endpoints;
pub mod estimates;
pub mod images;
mod model_from_task;
mod models;
mod node_cache;
mod portal;
pub mod registry_credentials;
pub mod scrape;
pub mod swap;
mod task_page;
mod webhooks;

pub use crate::protocol::model::PrewarmTarget;
pub use chargeback::{Curve, CurvePoint};
pub use dry_run::DryRun;
pub use model_from_task::{file_digest, FromTask};
pub use models::ModelView;

pub use crate::service::parse_replicas;
pub use task_page::{TaskPage, TaskQuery, SCAN_BUDGET};

use crate::cluster::{Booted, Cluster};
use crate::errors::{ActorError, Result};
use crate::protocol::cluster::{CreateTenant, NodeSession, Submit};
use crate::protocol::node::{
    AgentGone, AgentMessage, CordonNode, FetchLogs, LogChunk, NodeSnapshot, Revoke, RotateSecret,
    Uncordon,
};
use crate::protocol::scheduler::{
    AllocatedByNode, AllocationsOn, LedgerAllocations, QueryUtilization, QueuePositions, Stats,
};
use crate::protocol::service::Scale;
use crate::protocol::task::{Release, TaskSnapshot};
use crate::protocol::tenant::{ChangeQuota, TenantSnapshot};
use crate::protocol::NodeHandle;

use crate::shared::Shared;
use crate::tokens::Principal;
use crate::views::{NodeAllocated, NodeView, Utilization};
use actix::Addr;
use caldera_spec::wire::{Hello, NodeMessage, ServerMessage};
use caldera_spec::{Allocation, Quota, TaskRecord, TaskSpec, TenantRecord};
use caldera_storage::Store;
pub use caldera_storage::{EventFilter, EventPage};
use futures_util::future::{join, join_all};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;

/// Most events one `events` call examines (see [`SCAN_BUDGET`] for tasks).
pub const EVENT_SCAN_BUDGET: usize = 5_000;

/// What an operator asks of a node's placements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CordonChange {
    /// No new placements; what runs there stays.
    Cordon,
    /// Cordon, and move its work away as a planned stop.
    Drain,
    /// Placements there again.
    Uncordon,
}

/// A cheap, cloneable handle on a booted control plane.
#[derive(Clone)]
pub struct ControlPlane {
    cluster: Addr<Cluster>,
    sh: Arc<Shared>,
}

/// The pool's counters, for `/metrics`.
#[derive(Debug, Clone, Copy)]
pub struct PoolStats {
    pub queued: usize,
    pub allocations: usize,
    pub healthy_nodes: usize,
    pub live_tasks: usize,
}

/// Runs a blocking sled read on the blocking pool, never on an async worker.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> caldera_storage::Result<T> + Send + 'static,
) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(ActorError::Unavailable(format!("storage read failed: {e}"))),
    }
}

/// A request/response message to the root, whose answer is itself a `Result`.
async fn ask<A, M, T>(addr: &Addr<A>, m: M) -> Result<T>
where
    A: actix::Actor + actix::Handler<M>,
    A::Context: actix::dev::ToEnvelope<A, M>,
    M: actix::Message<Result = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    addr.send(m).await?
}

impl ControlPlane {
    pub fn new(booted: &Booted) -> Self {
        ControlPlane {
            cluster: booted.cluster.clone(),
            sh: booted.shared.clone(),
        }
    }

    fn store(&self) -> Store {
        self.sh.gate.store().clone()
    }

    /// Who holds `token`, if anyone.
    pub fn authenticate(&self, token: &str) -> Option<Principal> {
        self.sh.tokens.authenticate(token)
    }

    /// Submits a task; `true` when newly created (an identical resubmission: `false`).
    pub async fn submit(&self, tenant: String, spec: TaskSpec) -> Result<(TaskRecord, bool)> {
        ask(&self.cluster, Submit { tenant, spec }).await
    }

    /// What a submission of `spec` succeeded despite: its model version is
    /// deprecated (it still serves, but the operator means to retire it).
    /// Read after the submission was accepted, from sled.
    pub async fn submission_warnings(&self, spec: &TaskSpec) -> Result<Vec<String>> {
        let Some(model) = spec.model.clone() else {
            return Ok(Vec::new());
        };
        let store = self.store();
        let rec = blocking(move || {
            let key = caldera_spec::ModelRef::parse(&model, "model")
                .map(|r| r.to_string())
                .unwrap_or(model);
            store.model_version(&key)
        })
        .await?;
        Ok(rec
            .filter(|r| r.state == caldera_spec::ModelState::Deprecated)
            .map(|r| {
                vec![format!(
                    "model {} is deprecated: it still serves, but is to be retired; move to a newer version",
                    r.key()
                )]
            })
            .unwrap_or_default())
    }

    /// The record of task `id` as its live actor holds it (a service's
    /// ServiceActor, any other task's TaskActor), asked now; None when no
    /// actor lives for it.
    fn ask_snapshot(&self, id: &str) -> Option<crate::protocol::Reply<TaskRecord>> {
        if let Some(s) = self.sh.registry.service(id) {
            return Some(s.send(TaskSnapshot));
        }
        Some(self.sh.registry.task(id)?.send(TaskSnapshot))
    }

    /// The freshest record of a task: its live actor's, else sled's.
    pub async fn task(&self, id: &str) -> Result<Option<TaskRecord>> {
        if let Some(ask) = self.ask_snapshot(id) {
            if let Ok(r) = ask.await {
                return Ok(Some(r));
            }
        }
        let (store, id) = (self.store(), id.to_string());
        blocking(move || store.task(&id)).await
    }

    /// The keys of every task, of any tenant, whose own id is `id`: the
    /// operator's bare address names a task only when exactly one tenant
    /// holds the id. A scan of keys on the blocking pool (operator-only).
    pub async fn task_keys_named(&self, id: &str) -> Result<Vec<String>> {
        let (store, id) = (self.store(), id.to_string());
        blocking(move || {
            store
                .task_keys()
                .filter(|k| k.as_ref().map_or(true, |k| caldera_spec::local_id(k) == id))
                .collect()
        })
        .await
    }

    /// One page of tasks ordered by id, read on the blocking pool with a
    /// bounded scan. Live tasks show their actor's pending reason and start
    /// estimate (sled does not keep them), as `task` does.
    pub async fn tasks(&self, q: TaskQuery) -> Result<TaskPage> {
        let store = self.store();
        let mut page = blocking(move || task_page::read(&store, &q, SCAN_BUDGET)).await?;
        let (live, asks): (Vec<usize>, Vec<_>) = page
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.state.is_terminal())
            .filter_map(|(i, r)| Some((i, self.ask_snapshot(&r.spec.task_id)?)))
            .unzip();
        let snaps = join_all(asks).await;
        for (i, snap) in live.iter().zip(snaps) {
            if let (Ok(s), Some(r)) = (snap, page.tasks.get_mut(*i)) {
                r.pending_reason = s.pending_reason;
                r.estimated_start_ms = s.estimated_start_ms;
            }
        }
        Ok(page)
    }

    /// Releases a live task; `None` when it has no live actor (it has ended,
    /// and releasing it again changes nothing).
    pub async fn release(&self, id: &str, by: String) -> Result<Option<TaskRecord>> {
        if let Some(s) = self.sh.registry.service(id) {
            return s.send(Release { by }).await?.map(Some);
        }
        match self.sh.registry.task(id) {
            None => Ok(None),
            Some(a) => a.send(Release { by }).await?.map(Some),
        }
    }

    /// Scales an inference service to `replicas`.
    pub async fn scale(&self, id: &str, replicas: u32) -> Result<TaskRecord> {
        let Some(a) = self.sh.registry.service(id) else {
            if self.sh.registry.task(id).is_some() {
                return Err(ActorError::Conflict(format!(
                    "{id} is not an inference service; only services have replicas"
                )));
            }
            return Err(ActorError::Conflict("the service has ended".to_string()));
        };
        a.send(Scale { replicas }).await?
    }

    /// The tail of an allocation's log, fetched from its node, or (with
    /// `from_byte`) up to `tail_bytes` of it from that offset.
    pub async fn logs(
        &self,
        a: &Allocation,
        tail_bytes: u64,
        from_byte: Option<u64>,
    ) -> Result<LogChunk> {
        self.logs_on(&a.node, &a.allocation_id, &a.task_id, tail_bytes, from_byte)
            .await
    }

    /// The same, for an allocation named by its node and id (one the task
    /// held before: see `earlier_runs`).
    pub async fn logs_on(
        &self,
        node: &str,
        allocation_id: &str,
        task_id: &str,
        tail_bytes: u64,
        from_byte: Option<u64>,
    ) -> Result<LogChunk> {
        let Some(actor) = self.sh.registry.node(node) else {
            return Err(ActorError::not_found("node", node));
        };
        let m = FetchLogs {
            allocation_id: allocation_id.to_string(),
            task_id: task_id.to_string(),
            tail_bytes,
            from_byte,
        };
        actor.send(m).await?
    }

    /// Every node's view, ordered by name.
    pub async fn nodes(&self) -> Result<Vec<NodeView>> {
        let mut nodes = self.sh.registry.nodes();
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        // All snapshots are asked at once: a thousand nodes cost one round of
        // mailbox turns, not a thousand in a row.
        let snapshots = join_all(nodes.iter().map(|(_, a)| a.send(NodeSnapshot)));
        let (allocated, snapshots) = join(self.sh.scheduler.send(AllocatedByNode), snapshots).await;
        let allocated = allocated?;
        let mut out = Vec::with_capacity(nodes.len());
        for ((name, _), snap) in nodes.iter().zip(snapshots) {
            let (rec, connected, metrics) = snap?;
            let alloc = allocated.get(name).cloned().unwrap_or_default();
            let mut view = crate::views::node_view(&rec, connected, &metrics, &alloc);
            view.images = self.sh.images.report(name);
            out.push(view);
        }
        Ok(out)
    }

    /// One node's view: its snapshot and only its allocations (not the
    /// whole pool's totals).
    pub async fn node(&self, name: &str) -> Result<Option<NodeView>> {
        let Some(node) = self.sh.registry.node(name) else {
            return Ok(None);
        };
        let on = AllocationsOn {
            node: name.to_string(),
        };
        let (snap, allocations) = join(node.send(NodeSnapshot), self.sh.scheduler.send(on)).await;
        let (rec, connected, metrics) = snap?;
        let mut alloc = NodeAllocated::default();
        for a in &allocations? {
            alloc.add(a);
        }
        let mut view = crate::views::node_view(&rec, connected, &metrics, &alloc);
        view.cache = self.sh.fleet.get(name).map(|c| c.report);
        view.images = self.sh.images.report(name);
        Ok(Some(view))
    }

    /// Revokes a node (operators only): its secret stops working and its live
    /// session is closed. None when there is no such node.
    pub async fn revoke_node(&self, name: &str) -> Result<Option<NodeView>> {
        let Some(node) = self.sh.registry.node(name) else {
            return Ok(None);
        };
        node.send(Revoke).await??;
        self.node(name).await
    }

    /// Rotates a node's secret (operators only): a new one recorded (the
    /// old one stops opening sessions at once) and handed to the agent over
    /// its live session. None when there is no such node; 409 when it has
    /// no live session or is revoked.
    pub async fn rotate_node_secret(&self, name: &str) -> Result<Option<NodeView>> {
        let Some(node) = self.sh.registry.node(name) else {
            return Ok(None);
        };
        node.send(RotateSecret).await??;
        self.node(name).await
    }

    /// Cordons, drains or uncordons a node (operators only), once recorded.
    /// None when there is no such node.
    pub async fn change_cordon(
        &self,
        name: &str,
        change: CordonChange,
    ) -> Result<Option<NodeView>> {
        let Some(node) = self.sh.registry.node(name) else {
            return Ok(None);
        };
        match change {
            CordonChange::Cordon => node.send(CordonNode { drain: false }).await??,
            CordonChange::Drain => node.send(CordonNode { drain: true }).await??,
            CordonChange::Uncordon => node.send(Uncordon).await??,
        }
        self.node(name).await
    }

    /// The event measures `/metrics` serves (commit, cycle and wait times,
    /// decisions, preemptions, node losses).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        self.sh.metrics()
    }

    /// Actor rebuilds since the process started, as `(kind, count)`, for `/metrics`.
    pub fn actor_rebuilds(&self) -> Vec<(&'static str, u64)> {
        crate::supervision::REBUILDS.snapshot()
    }

    /// The commit fail points (test builds only: the `failpoints` feature).
    #[cfg(feature = "failpoints")]
    pub fn commit_faults(&self) -> &crate::commit_faults::CommitFaults {
        self.sh.gate.faults()
    }

    /// The disk fail point (test builds only): see [`FlushGate::fill_disk`](crate::durability::FlushGate::fill_disk).
    #[cfg(feature = "failpoints")]
    pub fn fill_disk(&self, full: bool) -> std::io::Result<u64> {
        self.sh.gate.fill_disk(full)
    }

    /// Refusals of what nodes said, as `(node, reason, count)`, for `/metrics`.
    pub fn node_refusals(&self) -> Vec<(String, &'static str, u64)> {
        self.sh.refusals.snapshot()
    }

    /// Every tenant, ordered by name.
    pub async fn tenants(&self) -> Result<Vec<TenantRecord>> {
        let tenants = self.sh.registry.tenants();
        let snaps = join_all(tenants.iter().map(|(_, a)| a.send(TenantSnapshot))).await;
        let mut out = snaps
            .into_iter()
            .collect::<std::result::Result<Vec<_>, _>>()?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One tenant, if it exists.
    pub async fn tenant(&self, name: &str) -> Result<Option<TenantRecord>> {
        match self.sh.registry.tenant(name) {
            None => Ok(None),
            Some(a) => Ok(Some(a.send(TenantSnapshot).await?)),
        }
    }

    /// Creates a tenant; answers its record and its token (shown once).
    pub async fn create_tenant(
        &self,
        name: String,
        quota: Quota,
        borrowing_limit: Quota,
    ) -> Result<(TenantRecord, String)> {
        let m = CreateTenant {
            name,
            quota,
            borrowing_limit,
        };
        ask(&self.cluster, m).await
    }

    /// Changes a tenant's guarantee and/or borrowing limit (`None` keeps it).
    pub async fn change_quota(
        &self,
        name: &str,
        quota: Option<Quota>,
        borrowing_limit: Option<Quota>,
    ) -> Result<TenantRecord> {
        let Some(t) = self.sh.registry.tenant(name) else {
            return Err(ActorError::not_found("tenant", name));
        };
        let m = ChangeQuota {
            quota,
            borrowing_limit,
        };
        t.send(m).await?
    }

    /// Capacity, allocation and measured use of the pool.
    pub async fn utilization(&self) -> Result<Utilization> {
        Ok(self.sh.scheduler.send(QueryUtilization).await?)
    }

    /// Events after `after_seq` matching `filter`, on the blocking pool, with
    /// at most [`EVENT_SCAN_BUDGET`] events examined.
    pub async fn events(
        &self,
        filter: EventFilter,
        after_seq: u64,
        limit: usize,
    ) -> Result<EventPage> {
        let store = self.store();
        blocking(move || store.events_page(&filter, after_seq, limit, EVENT_SCAN_BUDGET)).await
    }

    /// The allocation ledger twice: the Scheduler's in memory and sled's
    /// `a/` records, each ordered by id. Operator-only (the route checks): it
    /// is how an operator, or a chaos test, checks that every allocation
    /// belongs to a task that holds one and that the two copies agree.
    pub async fn allocations(&self) -> Result<(Vec<Allocation>, Vec<Allocation>)> {
        let ledger = self.sh.scheduler.send(LedgerAllocations).await?;
        let store = self.store();
        let stored = blocking(move || store.allocations().collect()).await?;
        Ok((ledger, stored))
    }

    /// The place in line (task key -> 1-based position) of each of
    /// `task_ids` that waits; the others are absent.
    pub async fn queue_positions(
        &self,
        task_ids: Vec<String>,
    ) -> Result<std::collections::HashMap<String, u32>> {
        if task_ids.is_empty() {
            return Ok(Default::default());
        }
        Ok(self.sh.scheduler.send(QueuePositions { task_ids }).await?)
    }

    /// The accuracy of first start estimates, over every task record (one
    /// scan, on the blocking pool: a stats page and `/metrics` call it).
    pub async fn estimate_accuracy(&self) -> Result<estimates::EstimateAccuracy> {
        let store = self.store();
        blocking(move || {
            let mut tally = estimates::Tally::default();
            for r in store.tasks() {
                tally.add(&r?);
            }
            Ok(tally.finish())
        })
        .await
    }

    /// The pool's counters.
    pub async fn stats(&self) -> Result<PoolStats> {
        let s = self.sh.scheduler.send(Stats).await?;
        Ok(PoolStats {
            queued: s.queued,
            allocations: s.allocations,
            healthy_nodes: s.healthy_nodes,
            live_tasks: self.sh.registry.live_tasks(),
        })
    }

    /// A node agent's hello: finds or creates its NodeActor and hands it the
    /// session; commands for the agent arrive on `tx`.
    pub async fn open_node_session(
        &self,
        hello: Hello,
        session_id: u64,
        tx: UnboundedSender<ServerMessage>,
    ) -> Result<NodeLink> {
        let m = NodeSession {
            hello,
            session_id,
            tx,
        };
        let node = ask(&self.cluster, m).await?;
        Ok(NodeLink { node, session_id })
    }

    /// Makes everything recorded so far durable (on shutdown).
    pub fn flush(&self) -> Result<()> {
        self.sh.gate.store().flush()?;
        Ok(())
    }
}

/// An open agent session: frames from the agent go to its NodeActor.
pub struct NodeLink {
    node: NodeHandle,
    session_id: u64,
}

impl NodeLink {
    /// Hands one frame from the agent to its NodeActor.
    pub fn forward(&self, msg: NodeMessage) {
        self.node.do_send(AgentMessage {
            session_id: self.session_id,
            msg,
        });
    }

    /// The agent's socket closed.
    pub fn close(self) {
        self.node.do_send(AgentGone {
            session_id: self.session_id,
        });
    }
}
