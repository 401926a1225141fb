//! The Scheduler actor: the ONE writer of the allocation ledger. It holds the
//! in-memory pool index, the queue, and runs the placement cycle
//! (admit -> filter -> score -> bind -> dispatch) whenever something changes.
pub mod demand;
pub mod ledger;
pub mod queue;
pub mod utilization;

use crate::clock::now_ms;
use crate::config::ServerConfig;
use crate::durability::FlushGate;
use crate::placement::{GpuUnit, Placer, PolicyName, Pool, WorkloadMix};
use crate::registry::Registry;
use crate::task::{Pending, Placed};
use actix::prelude::*;
use caldera_spec::wire::AllocationUse;
use caldera_spec::Usage;
use caldera_spec::{
    Allocation, Event, EventKind, GpuGrant, NodeInventory, NodeMetrics, Quota, TaskSpec,
};
use ledger::{Entry, Ledger};
use queue::{Queue, QueueKey, Waiting};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Delay that lets a burst of submissions share one placement cycle.
const CYCLE_DEBOUNCE: Duration = Duration::from_millis(2);

pub struct Scheduler {
    gate: Arc<FlushGate>,
    registry: Arc<Registry>,
    pool: Pool,
    placer: Placer,
    ledger: Ledger,
    queue: Queue,
    inventories: HashMap<String, NodeInventory>,
    healthy: HashSet<String>,
    quotas: HashMap<String, Quota>,
    metrics: HashMap<String, NodeMetrics>,
    usage: HashMap<String, AllocationUse>,
    cycle_pending: bool,
    /// Room was freed (or a node joined, or a quota rose) since the last pass:
    /// every waiting task gets another try. Otherwise only new arrivals do,
    /// since the tasks that found no room before still find none.
    room_grew: bool,
    arrivals: Vec<QueueKey>,
}

impl Scheduler {
    /// Rebuilds the scheduler from sled: the ledger, node inventories and quotas.
    /// Nodes count as unhealthy until their agents say hello again.
    pub fn load(
        gate: Arc<FlushGate>,
        registry: Arc<Registry>,
        config: &ServerConfig,
    ) -> Result<Scheduler, crate::errors::ActorError> {
        let policy: PolicyName =
            config
                .placement_policy
                .parse()
                .map_err(|e: crate::placement::UnknownPolicy| {
                    crate::errors::ActorError::Conflict(e.to_string())
                })?;
        let store = gate.store().clone();
        let mut s = Scheduler {
            placer: Placer::new(policy, WorkloadMix::default(), config.placement_seed),
            gate,
            registry,
            pool: Pool::new(GpuUnit::MiB),
            ledger: Ledger::default(),
            queue: Queue::default(),
            inventories: HashMap::new(),
            healthy: HashSet::new(),
            quotas: HashMap::new(),
            metrics: HashMap::new(),
            usage: HashMap::new(),
            cycle_pending: false,
            room_grew: true,
            arrivals: Vec::new(),
        };
        for n in store.nodes()? {
            s.inventories.insert(n.name.clone(), n.inventory);
        }
        for t in store.tenants()? {
            s.quotas.insert(t.name, t.quota);
        }
        for a in store.allocations() {
            let a = a?;
            let Some(task) = store.task(&a.task_id)? else {
                tracing::warn!(allocation = %a.allocation_id, "allocation without task record; dropped from the ledger");
                continue;
            };
            let demand = demand::demand_for(
                &task.spec,
                s.inventories
                    .values()
                    .flat_map(|i| i.gpus.iter().map(|g| g.model.as_str())),
            );
            s.ledger.insert(Entry {
                allocation: a,
                demand,
                placement: None,
            });
        }
        Ok(s)
    }

    fn known_models(&self) -> Vec<String> {
        let mut m: Vec<String> = self
            .inventories
            .values()
            .flat_map(|i| i.gpus.iter().map(|g| g.model.clone()))
            .collect();
        m.sort();
        m.dedup();
        m
    }

    fn refresh_node(&mut self, name: &str) {
        if let Some(inv) = self.inventories.get(name) {
            let view = self
                .ledger
                .pool_view(name, inv, self.healthy.contains(name));
            self.pool.upsert_node(view);
        }
    }

    fn request_cycle(&mut self, ctx: &mut Context<Self>) {
        if !self.cycle_pending {
            self.cycle_pending = true;
            ctx.run_later(CYCLE_DEBOUNCE, |s, _| s.cycle());
        }
    }

    /// One pass over the queue in order. A demand shape that found no room is
    /// not tried again in the same pass (the pool only shrinks during a pass).
    fn cycle(&mut self) {
        self.cycle_pending = false;
        let keys = if std::mem::take(&mut self.room_grew) {
            self.arrivals.clear();
            self.queue.keys()
        } else {
            let mut k = std::mem::take(&mut self.arrivals);
            k.sort();
            k
        };
        let mut no_room: HashMap<String, String> = HashMap::new();
        // Tenant usage is summed once per pass, and kept current as the pass grants.
        let mut usage_of: HashMap<String, Usage> = HashMap::new();
        for key in keys {
            let Some(w) = self.queue.get_mut(&key) else {
                continue;
            };
            let usage = *usage_of
                .entry(w.tenant.clone())
                .or_insert_with(|| self.ledger.tenant_usage(&w.tenant));
            let reason = match self.quotas.get(&w.tenant) {
                Some(q) => {
                    let mut after = usage;
                    after += w.usage;
                    q.exceeded_by(&after).map(|(dim, limit, would)| {
                        format!("over quota: {dim} would be {would:.2} of {limit:.2} allowed for tenant {}", w.tenant)
                    })
                }
                None => None,
            };
            if let Some(r) = reason {
                self.tell_pending(&key, r);
                continue;
            }
            let shape = w.shape.clone();
            if let Some(r) = no_room.get(&shape) {
                let r = r.clone();
                self.tell_pending(&key, r);
                continue;
            }
            match self.placer.place(&self.pool, &w.demand) {
                Ok(p) => {
                    let tenant = w.tenant.clone();
                    if let Some(u) = self.grant(key, p) {
                        *usage_of.entry(tenant).or_default() += u;
                    }
                }
                Err(rej) => {
                    let r = rej.summary(&w.demand);
                    no_room.insert(shape, r.clone());
                    self.tell_pending(&key, r);
                }
            }
        }
    }

    fn tell_pending(&mut self, key: &QueueKey, reason: String) {
        let Some(w) = self.queue.get_mut(key) else {
            return;
        };
        if w.told_reason.as_deref() == Some(reason.as_str()) {
            return;
        }
        w.told_reason = Some(reason.clone());
        if let Some(t) = self.registry.task(&w.task_id) {
            t.do_send(Pending { reason });
        }
    }

    /// Puts a task back where it was after a bind failed.
    fn requeue_front(&mut self, key: QueueKey, w: Waiting) {
        let k = self.queue.push(key.1, w);
        self.arrivals.push(k);
    }

    /// Binds a placement: ledger + pool + durable record, then tells the task.
    fn grant(&mut self, key: QueueKey, p: crate::placement::Placement) -> Option<Usage> {
        let Some(w) = self.queue.take(&key) else {
            return None;
        };
        let Some(task) = self.registry.task(&w.task_id) else {
            return None;
        };
        let Some(node_name) = self.pool.node(p.node).map(|n| n.name.clone()) else {
            return None;
        };
        let Some(inv) = self.inventories.get(&node_name) else {
            return None;
        };
        let gpus = p
            .gpus
            .iter()
            .filter_map(|(idx, units)| {
                inv.gpus.iter().find(|g| g.index == *idx).map(|g| GpuGrant {
                    index: g.index,
                    uuid: g.uuid.clone(),
                    model: g.model.clone(),
                    memory_mb: *units,
                    simulated: g.simulated,
                })
            })
            .collect();
        let now = now_ms();
        let allocation = Allocation {
            allocation_id: format!("{}.{}", w.task_id, w.attempt),
            task_id: w.task_id.clone(),
            tenant: w.tenant.clone(),
            node: node_name.clone(),
            gpus,
            cpu_milli: w.demand.cpu_milli,
            memory_mb: w.demand.memory_mib,
            disk_mb: w.demand.disk_mib,
            exclusive: w.demand.exclusive,
            epoch: 0,
            created_ms: now,
        };
        if let Err(e) = self.pool.commit(&w.demand, &p) {
            tracing::error!(task = %w.task_id, error = %e, "placement did not fit at bind; requeued");
            self.requeue_front(key, w);
            return None;
        }
        let mut b = self.gate.store().batch();
        b.put_allocation(&allocation);
        b.append_event(
            Event::new(
                now,
                EventKind::AllocationGranted,
                grant_message(&allocation),
            )
            .task(&w.task_id)
            .tenant(&w.tenant)
            .node(&node_name),
        );
        let ticket = match self.gate.commit(b) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(task = %w.task_id, error = %e, "could not record allocation; requeued");
                self.refresh_node(&node_name);
                self.requeue_front(key, w);
                return None;
            }
        };
        self.placer.observe(&w.demand);
        let entry = Entry {
            allocation: allocation.clone(),
            demand: w.demand,
            placement: Some(p),
        };
        let usage = ledger::allocation_usage(&entry);
        self.ledger.insert(entry);
        self.refresh_node(&node_name);
        task.do_send(Placed { allocation, ticket });
        Some(usage)
    }
}

fn grant_message(a: &Allocation) -> String {
    let gpus: Vec<String> = a
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{}#{} {} MiB{}",
                g.model,
                g.index,
                g.memory_mb,
                if g.simulated { " (simulated)" } else { "" }
            )
        })
        .collect();
    format!(
        "allocation {} on {}: gpus [{}], cpu {} m, memory {} MiB, disk {} MiB",
        a.allocation_id,
        a.node,
        gpus.join(", "),
        a.cpu_milli,
        a.memory_mb,
        a.disk_mb
    )
}

impl Actor for Scheduler {
    type Context = Context<Self>;
}

/// A task waits for room (new, requeued, or rebuilt after a restart).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Enqueue {
    pub task_id: String,
    pub tenant: String,
    pub spec: TaskSpec,
    pub seq: u64,
    pub attempt: u32,
}

impl Handler<Enqueue> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Enqueue, ctx: &mut Context<Self>) {
        let models = self.known_models();
        let demand = demand::demand_for(&m.spec, models.iter().map(String::as_str));
        let usage = demand::requested_usage(&m.spec, &demand);
        let shape = format!("{demand:?}");
        let key = self.queue.push(
            m.seq,
            Waiting {
                task_id: m.task_id,
                tenant: m.tenant,
                spec: m.spec,
                demand,
                usage,
                attempt: m.attempt,
                told_reason: None,
                shape,
            },
        );
        self.arrivals.push(key);
        self.request_cycle(ctx);
    }
}

/// A queued task leaves the queue (cancelled or released).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Dequeue {
    pub task_id: String,
}

impl Handler<Dequeue> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Dequeue, _: &mut Context<Self>) {
        self.queue.remove(&m.task_id);
    }
}

/// An allocation ends: its room returns to the pool.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Free {
    pub allocation_id: String,
    pub reason: String,
}

impl Handler<Free> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Free, ctx: &mut Context<Self>) {
        let Some(e) = self.ledger.remove(&m.allocation_id) else {
            return;
        };
        self.usage.remove(&m.allocation_id);
        let a = &e.allocation;
        let mut b = self.gate.store().batch();
        b.remove_allocation(&a.allocation_id);
        b.append_event(
            Event::new(
                now_ms(),
                EventKind::AllocationReleased,
                format!(
                    "allocation {} on {} released: {}",
                    a.allocation_id, a.node, m.reason
                ),
            )
            .task(&a.task_id)
            .tenant(&a.tenant)
            .node(&a.node),
        );
        if let Err(err) = self.gate.commit(b) {
            tracing::error!(allocation = %a.allocation_id, error = %err, "could not record release");
        }
        let node = a.node.clone();
        self.refresh_node(&node);
        self.room_grew = true;
        self.request_cycle(ctx);
    }
}

/// A node's agent said hello: its room joins the pool.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeUp {
    pub name: String,
    pub inventory: NodeInventory,
}

impl Handler<NodeUp> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeUp, ctx: &mut Context<Self>) {
        self.inventories.insert(m.name.clone(), m.inventory);
        self.healthy.insert(m.name.clone());
        self.refresh_node(&m.name);
        self.room_grew = true;
        self.request_cycle(ctx);
    }
}

/// A node was lost: nothing more is placed there.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeDown {
    pub name: String,
}

impl Handler<NodeDown> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeDown, _: &mut Context<Self>) {
        self.healthy.remove(&m.name);
        self.metrics.remove(&m.name);
        self.refresh_node(&m.name);
    }
}

/// The ledger's allocations on one node (for the hello reconciliation).
#[derive(Message)]
#[rtype(result = "Vec<Allocation>")]
pub struct AllocationsOn {
    pub node: String,
}

impl Handler<AllocationsOn> for Scheduler {
    type Result = MessageResult<AllocationsOn>;
    fn handle(&mut self, m: AllocationsOn, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.ledger
                .on_node(&m.node)
                .map(|e| e.allocation.clone())
                .collect(),
        )
    }
}

/// Live metrics from a node's heartbeat.
#[derive(Message)]
#[rtype(result = "()")]
pub struct NodeMetricsUpdate {
    pub name: String,
    pub metrics: NodeMetrics,
    pub usage: Vec<(String, AllocationUse)>,
}

impl Handler<NodeMetricsUpdate> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeMetricsUpdate, _: &mut Context<Self>) {
        self.metrics.insert(m.name, m.metrics);
        for (id, u) in m.usage {
            if self.ledger.get(&id).is_some() {
                self.usage.insert(id, u);
            }
        }
    }
}

/// A tenant's quota changed (or a tenant was created).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetQuota {
    pub tenant: String,
    pub quota: Quota,
}

impl Handler<SetQuota> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: SetQuota, ctx: &mut Context<Self>) {
        self.quotas.insert(m.tenant, m.quota);
        self.room_grew = true;
        self.request_cycle(ctx);
    }
}

/// Allocated totals per node, for node views.
#[derive(Message)]
#[rtype(result = "HashMap<String, crate::views::NodeAllocated>")]
pub struct AllocatedByNode;

impl Handler<AllocatedByNode> for Scheduler {
    type Result = MessageResult<AllocatedByNode>;
    fn handle(&mut self, _: AllocatedByNode, _: &mut Context<Self>) -> Self::Result {
        let mut out = HashMap::new();
        for e in self.ledger.all() {
            out.entry(e.allocation.node.clone())
                .or_insert_with(crate::views::NodeAllocated::default)
                .add(&e.allocation);
        }
        MessageResult(out)
    }
}

/// Counters for /metrics and tests.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct SchedulerStats {
    pub queued: usize,
    pub allocations: usize,
    pub healthy_nodes: usize,
}

#[derive(Message)]
#[rtype(result = "SchedulerStats")]
pub struct Stats;

impl Handler<Stats> for Scheduler {
    type Result = MessageResult<Stats>;
    fn handle(&mut self, _: Stats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(SchedulerStats {
            queued: self.queue.len(),
            allocations: self.ledger.all().count(),
            healthy_nodes: self.healthy.len(),
        })
    }
}
