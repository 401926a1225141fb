//! The scheduling core: pure decisions, no actors, no I/O, no clock (time is
//! passed in). The Scheduler actor applies its decisions (records them, tells
//! tasks and nodes); `caldera sim --dynamic` drives the very same code with a
//! virtual clock.
//!
//! A pass: order the waiting tasks (priority, then the tenant's dominant share
//! of its guarantee in use, then arrival), admit each against its tenant's
//! guarantee and borrowing limit, place it (filter -> score -> select), and
//! keep the first task that found no room as the queue's head: later tasks may
//! only start if they do not delay the head's estimated start (EASY backfill).
//! A task that outranks running work (higher priority, or within its guarantee
//! against borrowed allocations) preempts the cheapest set of victims on one node.
use super::demand;
use super::estimate::{self, Planned};
use super::ledger::{allocation_usage, Entry, Ledger};
use super::preempt;
use crate::placement::{Demand, GpuUnit, Placement, Placer, PolicyName, Pool, WorkloadMix};
use caldera_spec::{
    Allocation, GpuGrant, NodeInventory, Quota, Standing, TaskSpec, TaskType, Usage,
};
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Knobs of the core. Defaults in the doc of each field.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Preempt lower-priority or borrowed work for tasks that outrank it. Default true.
    pub preemption: bool,
    /// Grace a victim gets to checkpoint before it is killed, ms (also the
    /// estimated wait of the task that preempts). Default 10000.
    pub stop_grace_ms: u64,
    /// How many queued tasks get a start-time estimate per pass. Default 16.
    pub estimate_depth: usize,
    /// Recompute estimates at most this often, ms. Default 1000.
    pub estimate_every_ms: u64,
    /// A task restarted after a preemption or node loss cannot be preempted
    /// again until it has run this long, ms. Default 60000.
    pub min_runtime_ms: u64,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            preemption: true,
            stop_grace_ms: 10_000,
            estimate_depth: 16,
            estimate_every_ms: 1000,
            min_runtime_ms: 60_000,
        }
    }
}

/// A tenant's guarantee and how much more it may borrow.
#[derive(Debug, Clone, Default)]
pub struct TenantLimits {
    pub guaranteed: Quota,
    pub borrowing_limit: Quota,
}

/// A task entering the queue.
#[derive(Debug, Clone)]
pub struct WaitingTask {
    pub task_id: String,
    pub tenant: String,
    pub spec: TaskSpec,
    /// Arrival order (FIFO within priority and share).
    pub seq: u64,
    /// Attempt number its next allocation will carry.
    pub attempt: u32,
}

/// A waiting task. Shared parts are behind `Arc` so a pass over a long queue
/// copies pointers, not specs.
#[derive(Debug, Clone)]
struct Waiting {
    task: Arc<WaitingTask>,
    demand: Arc<Demand>,
    usage: Usage,
    shape: Arc<str>,
    told: Option<(String, Option<u64>)>,
}

/// What a pass decided. The caller records and carries out each one in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The allocation is in the ledger; record it and start the workload.
    Place { allocation: Allocation },
    /// Stop `victim` (checkpoint first) to make room for `for_task`.
    Preempt {
        victim: Allocation,
        for_task: String,
        reason: String,
    },
    /// Still waiting: why, and when it is expected to start.
    Pending {
        task_id: String,
        reason: String,
        estimated_start_ms: Option<u64>,
    },
}

/// Room held for one task: the queue head (backfill must not delay it) or a
/// task whose victims are being stopped.
#[derive(Debug, Clone)]
struct Reservation {
    task_id: String,
    priority: u16,
    node: String,
    start_ms: Option<u64>,
    preempting: bool,
}

pub struct Core {
    pub(crate) pool: Pool,
    placer: Placer,
    /// Best-fit placer for hypothetical node states (estimates, victim sets).
    pub(crate) checker: Placer,
    pub(crate) ledger: Ledger,
    waiting: HashMap<String, Waiting>,
    pub(crate) inventories: HashMap<String, NodeInventory>,
    /// Distinct GPU models of `inventories`, kept with them.
    models: Vec<String>,
    pub(crate) healthy: HashSet<String>,
    limits: HashMap<String, TenantLimits>,
    room_grew: bool,
    arrivals: Vec<String>,
    head: Option<Reservation>,
    estimates: HashMap<String, Option<u64>>,
    last_estimate_ms: Option<u64>,
    /// The time of the pass in progress.
    now_ms: u64,
    pub config: CoreConfig,
}

impl Core {
    /// The allocation ledger, read-only: the Scheduler actor's views and the
    /// idle inspector read it; only the core's own stages change it.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Names of the nodes that are up and placeable.
    pub fn healthy_nodes(&self) -> &HashSet<String> {
        &self.healthy
    }

    /// The inventory a node last reported, healthy or not.
    pub fn inventory(&self, node: &str) -> Option<&NodeInventory> {
        self.inventories.get(node)
    }

    pub fn new(policy: PolicyName, seed: u64, config: CoreConfig) -> Core {
        Core {
            pool: Pool::new(GpuUnit::MiB),
            placer: Placer::new(policy, WorkloadMix::default(), seed),
            checker: Placer::new(PolicyName::BestFit, WorkloadMix::default(), seed),
            ledger: Ledger::default(),
            waiting: HashMap::new(),
            inventories: HashMap::new(),
            models: Vec::new(),
            healthy: HashSet::new(),
            limits: HashMap::new(),
            room_grew: true,
            arrivals: Vec::new(),
            head: None,
            estimates: HashMap::new(),
            last_estimate_ms: None,
            now_ms: 0,
            config,
        }
    }

    /// GPU models present in the pool (sorted, distinct).
    pub fn known_models(&self) -> &[String] {
        &self.models
    }

    /// Records `inv` and recomputes the model list: once per node change, not
    /// once per submission.
    fn remember(&mut self, name: &str, inv: NodeInventory) {
        self.inventories.insert(name.to_string(), inv);
        let mut m: Vec<String> = self
            .inventories
            .values()
            .flat_map(|i| i.gpus.iter().map(|g| g.model.clone()))
            .collect();
        m.sort();
        m.dedup();
        self.models = m;
    }

    /// Largest GPU memory of any node, MiB (for the inference cap).
    pub fn largest_gpu_mb(&self) -> u64 {
        self.inventories
            .values()
            .flat_map(|i| i.gpus.iter().map(|g| g.memory_total_mb))
            .max()
            .unwrap_or(0)
    }

    pub fn demand_for(&self, spec: &TaskSpec) -> Demand {
        demand::demand_for(spec, self.models.iter().map(String::as_str))
    }

    fn refresh_node(&mut self, name: &str) {
        if let Some(inv) = self.inventories.get(name) {
            let view = self
                .ledger
                .pool_view(name, inv, self.healthy.contains(name));
            self.pool.upsert_node(view);
        }
    }

    /// A node joined (or rejoined) with this inventory.
    pub fn node_up(&mut self, name: &str, inv: NodeInventory) {
        self.remember(name, inv);
        self.healthy.insert(name.to_string());
        self.refresh_node(name);
        self.room_grew = true;
    }

    /// A node was lost: nothing more is placed there.
    pub fn node_down(&mut self, name: &str) {
        self.healthy.remove(name);
        self.refresh_node(name);
    }

    /// Remembers a node from storage without making it placeable.
    pub fn node_known(&mut self, name: &str, inv: NodeInventory) {
        self.remember(name, inv);
    }

    pub fn set_limits(&mut self, tenant: &str, limits: TenantLimits) {
        self.limits.insert(tenant.to_string(), limits);
        self.room_grew = true;
    }

    /// An allocation recorded before a restart.
    pub fn restore(
        &mut self,
        allocation: Allocation,
        spec: &TaskSpec,
        checkpoint_ms: Option<u64>,
        attempt: u32,
    ) {
        let demand = self.demand_for(spec);
        let node = allocation.node.clone();
        let created = allocation.created_ms;
        self.ledger.insert(Entry {
            allocation,
            demand,
            duration_ms: spec.duration_ms(),
            checkpoint_ms: checkpoint_ms.unwrap_or(created),
            preempting: false,
            idle_exempt: spec.idle_exempt,
            attempt,
        });
        self.refresh_node(&node);
    }

    pub fn enqueue(&mut self, t: WaitingTask) {
        let demand = self.demand_for(&t.spec);
        let usage = demand::requested_usage(&t.spec, &demand);
        let shape = format!("{demand:?}/{}", t.spec.priority.0);
        let id = t.task_id.clone();
        self.waiting.insert(
            id.clone(),
            Waiting {
                task: Arc::new(t),
                demand: Arc::new(demand),
                usage,
                shape: shape.into(),
                told: None,
            },
        );
        self.arrivals.push(id);
    }

    /// Leaves the queue (cancelled, released).
    pub fn dequeue(&mut self, task_id: &str) {
        if self.waiting.remove(task_id).is_some()
            && self.head.as_ref().is_some_and(|h| h.task_id == task_id)
        {
            self.head = None;
            self.room_grew = true;
        }
    }

    pub fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// An allocation ends: its room returns to the pool.
    pub fn release(&mut self, allocation_id: &str) -> Option<Entry> {
        let e = self.ledger.remove(allocation_id)?;
        let node = e.allocation.node.clone();
        self.refresh_node(&node);
        self.room_grew = true;
        Some(e)
    }

    /// The workload saved a checkpoint: less work is lost if it is preempted now.
    pub fn checkpointed(&mut self, allocation_id: &str, at_ms: u64) {
        if let Some(e) = self.ledger.get_mut(allocation_id) {
            e.checkpoint_ms = at_ms;
        }
    }

    fn usage_of(&self, tenant: &str) -> Usage {
        self.ledger.tenant_usage(tenant)
    }

    fn share_of(&self, tenant: &str, usage: &Usage) -> f64 {
        self.limits
            .get(tenant)
            .map_or(0.0, |l| caldera_spec::dominant_share(&l.guaranteed, usage))
    }

    /// Whether `tenant` may hold `after` (guaranteed or borrowing).
    pub(crate) fn admits(&self, tenant: &str, after: &Usage) -> bool {
        !matches!(self.standing(tenant, after), Standing::OverQuota { .. })
    }

    fn standing(&self, tenant: &str, after: &Usage) -> Standing {
        match self.limits.get(tenant) {
            None => Standing::Guaranteed,
            Some(l) => caldera_spec::standing(&l.guaranteed, &l.borrowing_limit, after),
        }
    }

    /// Queue order: priority, then fair share, then arrival.
    fn ordered(&self, ids: Vec<String>) -> Vec<String> {
        let mut shares: HashMap<&str, f64> = HashMap::new();
        for w in self.waiting.values() {
            let t = w.task.tenant.as_str();
            if !shares.contains_key(t) {
                shares.insert(t, self.share_of(t, &self.usage_of(t)));
            }
        }
        let mut keyed: Vec<(Reverse<u16>, u64, u64, String)> = ids
            .into_iter()
            .filter_map(|id| {
                let w = self.waiting.get(&id)?;
                let share = shares.get(w.task.tenant.as_str()).copied().unwrap_or(0.0);
                // f64 shares as ordered integers (micro-units) so the sort is total.
                Some((
                    Reverse(w.task.spec.priority.0),
                    (share * 1e6).min(u64::MAX as f64) as u64,
                    w.task.seq,
                    id,
                ))
            })
            .collect();
        keyed.sort();
        keyed.into_iter().map(|k| k.3).collect()
    }

    /// One pass over the queue.
    pub fn cycle(&mut self, now_ms: u64) -> Vec<Decision> {
        self.now_ms = now_ms;
        let full = std::mem::take(&mut self.room_grew);
        let ids = if full {
            self.arrivals.clear();
            self.waiting.keys().cloned().collect()
        } else {
            std::mem::take(&mut self.arrivals)
        };
        if full {
            // A preemption in flight keeps its room; any other head is recomputed.
            self.head = self
                .head
                .take()
                .filter(|h| h.preempting && self.waiting.contains_key(&h.task_id));
        }
        let order = self.ordered(ids);
        let refresh_estimates = full
            && self
                .last_estimate_ms
                .is_none_or(|t| now_ms >= t + self.config.estimate_every_ms);
        let mut out = Vec::new();
        let mut usage_of: HashMap<String, Usage> = HashMap::new();
        let mut no_room: HashMap<Arc<str>, String> = HashMap::new();
        let mut quota_est: HashMap<Arc<str>, Option<u64>> = HashMap::new();
        let mut blocked: Vec<String> = Vec::new();
        for id in order {
            let Some(w) = self.waiting.get(&id) else {
                continue;
            };
            let w = Waiting {
                told: None,
                ..w.clone()
            };
            let tenant = w.task.tenant.clone();
            let usage = *usage_of
                .entry(tenant.clone())
                .or_insert_with(|| self.ledger.tenant_usage(&tenant));
            let mut after = usage;
            after += w.usage;
            let standing = self.standing(&tenant, &after);
            if let Standing::OverQuota { dim, limit, would } = standing {
                let key: Arc<str> = format!("{tenant}/{}", w.shape).into();
                let est = match quota_est.get(&key) {
                    Some(e) => *e,
                    None => {
                        let e = estimate::quota_start(self, &tenant, &w.usage, now_ms);
                        quota_est.insert(key, e);
                        e
                    }
                };
                let reason = format!("over quota: {dim} would be {would:.2}, tenant {tenant} may use {limit:.2} (guarantee + borrowing limit)");
                self.pending(&mut out, &id, reason, est);
                continue;
            }
            let borrowed = standing == Standing::Borrowing;
            let seen_no_room = no_room.contains_key(&w.shape);
            let placed = match no_room.get(&w.shape) {
                Some(r) => Err(r.clone()),
                None => self
                    .placer
                    .place(&self.pool, &w.demand)
                    .map_err(|rej| rej.summary(&w.demand)),
            };
            match placed {
                Ok(p) => {
                    let node = self
                        .pool
                        .node(p.node)
                        .map(|n| n.name.clone())
                        .unwrap_or_default();
                    let (model_over, model_borrowed) =
                        self.model_standing(&tenant, &node, &w.demand, &p);
                    if let Some(why) = model_over {
                        self.pending(&mut out, &id, why, None);
                        continue;
                    }
                    let borrowed = borrowed || model_borrowed;
                    if let Some(why) = self.blocks(&id, &node, now_ms) {
                        let est = self.estimates.get(&id).copied().flatten();
                        self.pending(&mut out, &id, why, est);
                        continue;
                    }
                    match self.grant(&id, p, borrowed, now_ms) {
                        Ok(a) => {
                            *usage_of.entry(tenant).or_default() +=
                                allocation_usage_of(&a, &self.ledger);
                            out.push(Decision::Place { allocation: a });
                        }
                        Err(why) => self.pending(&mut out, &id, why, None),
                    }
                }
                Err(reason) => {
                    no_room.insert(w.shape.clone(), reason.clone());
                    // One preemption attempt per shape and pass: the same shape
                    // finds the same victims (or none).
                    if !seen_no_room
                        && self.try_preempt(&id, standing == Standing::Guaranteed, now_ms, &mut out)
                    {
                        continue;
                    }
                    blocked.push(id.clone());
                    if self.head.is_none() {
                        let dur = w.task.spec.duration_ms();
                        let demand = (*w.demand).clone();
                        let est = estimate::queue_starts(self, &[(demand, dur)], now_ms);
                        let (start, node) = est
                            .into_iter()
                            .next()
                            .flatten()
                            .map_or((None, String::new()), |(t, n)| (Some(t), n));
                        self.head = Some(Reservation {
                            task_id: id.clone(),
                            priority: w.task.spec.priority.0,
                            node,
                            start_ms: start,
                            preempting: false,
                        });
                        self.estimates.insert(id.clone(), start);
                    }
                    let est = self.estimates.get(&id).copied().flatten();
                    self.pending(&mut out, &id, reason, est);
                }
            }
        }
        if refresh_estimates && !blocked.is_empty() {
            self.refresh_estimates(&blocked, now_ms, &mut out);
        }
        out
    }

    /// Per-GPU-model quota of a placement: `(over the limit: why, beyond the guarantee)`.
    fn model_standing(
        &self,
        tenant: &str,
        node: &str,
        demand: &Demand,
        p: &Placement,
    ) -> (Option<String>, bool) {
        let Some(l) = self.limits.get(tenant) else {
            return (None, false);
        };
        if l.guaranteed.gpus_by_model.is_empty() && l.borrowing_limit.gpus_by_model.is_empty() {
            return (None, false);
        }
        let Some(inv) = self.inventories.get(node) else {
            return (None, false);
        };
        let fraction = match demand.gpu {
            crate::placement::GpuDemand::Share { milli } => milli as f64 / 1000.0,
            _ => 1.0,
        };
        let mut borrowed = false;
        let keys: std::collections::BTreeSet<&String> = l
            .guaranteed
            .gpus_by_model
            .keys()
            .chain(l.borrowing_limit.gpus_by_model.keys())
            .collect();
        for key in keys {
            let matches = |model: &str| {
                model
                    .to_ascii_lowercase()
                    .contains(&key.to_ascii_lowercase())
            };
            let asked: f64 = p
                .gpus
                .iter()
                .filter(|(i, _)| inv.gpus.iter().any(|g| g.index == *i && matches(&g.model)))
                .count() as f64
                * fraction;
            if asked == 0.0 {
                continue;
            }
            let held: f64 = self
                .ledger
                .all()
                .filter(|e| e.allocation.tenant == tenant)
                .map(|e| {
                    let f = match e.demand.gpu {
                        crate::placement::GpuDemand::Share { milli } => milli as f64 / 1000.0,
                        _ => 1.0,
                    };
                    e.allocation
                        .gpus
                        .iter()
                        .filter(|g| matches(&g.model))
                        .count() as f64
                        * f
                })
                .sum();
            let would = held + asked;
            let guaranteed = l.guaranteed.gpus_by_model.get(key).copied();
            if let (Some(g), Some(b)) = (guaranteed, l.borrowing_limit.gpus_by_model.get(key)) {
                if would > g + b + 1e-9 {
                    return (Some(format!("over quota for GPU model {key}: would hold {would:.2}, tenant {tenant} may hold {:.2}", g + b)), false);
                }
            }
            borrowed |= guaranteed.is_some_and(|g| would > g + 1e-9);
        }
        (None, borrowed)
    }

    /// Whether placing `id` on `node` now would delay the head's reserved start.
    fn blocks(&self, id: &str, node: &str, now_ms: u64) -> Option<String> {
        let h = self.head.as_ref()?;
        if h.task_id == id || h.node != node {
            return None;
        }
        let w = self.waiting.get(id)?;
        if w.task.spec.priority.0 > h.priority {
            return None;
        }
        if h.preempting {
            return Some(format!("room on {node} is being freed for {}", h.task_id));
        }
        let start = h.start_ms?;
        match w.task.spec.duration_ms() {
            Some(d) if now_ms + d <= start => None,
            _ => Some(format!(
                "waiting behind {} (earlier in the queue): starting now on {node} would delay it; backfill needs a declared duration that ends before {}",
                h.task_id,
                caldera_spec::time::rfc3339(start)
            )),
        }
    }

    fn pending(&mut self, out: &mut Vec<Decision>, id: &str, reason: String, est: Option<u64>) {
        // An estimate that has passed is stale (it is recomputed for the first
        // tasks in line each second); better none than a time in the past.
        let est = est.filter(|t| *t >= self.now_ms);
        let Some(w) = self.waiting.get_mut(id) else {
            return;
        };
        let told = (reason, est);
        if w.told.as_ref() == Some(&told) {
            return;
        }
        w.told = Some(told.clone());
        out.push(Decision::Pending {
            task_id: id.to_string(),
            reason: told.0,
            estimated_start_ms: told.1,
        });
    }

    fn refresh_estimates(&mut self, blocked: &[String], now_ms: u64, out: &mut Vec<Decision>) {
        self.last_estimate_ms = Some(now_ms);
        let take: Vec<String> = blocked
            .iter()
            .take(self.config.estimate_depth)
            .cloned()
            .collect();
        let tasks: Vec<(Demand, Option<u64>)> = take
            .iter()
            .filter_map(|id| {
                self.waiting
                    .get(id)
                    .map(|w| ((*w.demand).clone(), w.task.spec.duration_ms()))
            })
            .collect();
        let est = estimate::queue_starts(self, &tasks, now_ms);
        for (id, e) in take.iter().zip(est) {
            let start = e.map(|(t, _)| t);
            self.estimates.insert(id.clone(), start);
            if let Some((reason, _)) = self.waiting.get(id).and_then(|w| w.told.clone()) {
                self.pending(out, id, reason, start);
            }
        }
    }

    fn try_preempt(
        &mut self,
        id: &str,
        within_guarantee: bool,
        now_ms: u64,
        out: &mut Vec<Decision>,
    ) -> bool {
        if !self.config.preemption || self.head.as_ref().is_some_and(|h| h.preempting) {
            return false;
        }
        let Some(w) = self.waiting.get(id).cloned() else {
            return false;
        };
        // Cheap gate before the search: is there any possible victim at all?
        let prio = w.task.spec.priority.0;
        let tenant = w.task.tenant.as_str();
        let any_victim = self.ledger.all().any(|e| {
            !e.preempting
                && (e.allocation.priority < prio
                    || (within_guarantee && e.allocation.borrowed && e.allocation.tenant != tenant))
        });
        if !any_victim {
            return false;
        }
        let Some((node, victims)) = preempt::choose_victims(
            self,
            &w.demand,
            w.task.spec.priority.0,
            &w.task.tenant,
            within_guarantee,
            now_ms,
        ) else {
            return false;
        };
        let (prio, tenant) = (w.task.spec.priority.0, w.task.tenant.clone());
        for v in &victims {
            if let Some(e) = self.ledger.get_mut(v) {
                e.preempting = true;
                let why = if e.allocation.priority < prio {
                    format!("priority {} outranks {}", prio, e.allocation.priority)
                } else {
                    format!("tenant {tenant} reclaims its guarantee from borrowed capacity")
                };
                out.push(Decision::Preempt {
                    victim: e.allocation.clone(),
                    for_task: id.to_string(),
                    reason: why,
                });
            }
        }
        let start = now_ms + self.config.stop_grace_ms;
        self.head = Some(Reservation {
            task_id: id.to_string(),
            priority: prio,
            node: node.clone(),
            start_ms: Some(start),
            preempting: true,
        });
        self.estimates.insert(id.to_string(), Some(start));
        let reason = format!(
            "preempting {} allocation(s) on {node} to make room",
            victims.len()
        );
        self.pending(out, id, reason, Some(start));
        true
    }

    /// Binds a placement into the ledger and the pool. An `Err` is an internal
    /// inconsistency (the pool refused what the placer chose); the task stays
    /// queued and the reason is shown as its pending reason, not logged here —
    /// this crate has no logger.
    fn grant(
        &mut self,
        id: &str,
        p: Placement,
        borrowed: bool,
        now_ms: u64,
    ) -> Result<Allocation, String> {
        let w = self.waiting.get(id).ok_or("no longer waiting")?;
        let node = self
            .pool
            .node(p.node)
            .ok_or("placed on an unknown node")?
            .name
            .clone();
        let inventory = self
            .inventories
            .get(&node)
            .ok_or("placed on a node without inventory")?;
        let allocation =
            build_allocation(inventory, &node, &w.task, &w.demand, &p, borrowed, now_ms);
        if let Err(e) = self.pool.commit(&w.demand, &p) {
            return Err(format!("placement did not fit at bind: {e}"));
        }
        let w = self.waiting.remove(id).ok_or("no longer waiting")?;
        if self.head.as_ref().is_some_and(|h| h.task_id == id) {
            self.head = None;
        }
        self.estimates.remove(id);
        self.placer.observe(&w.demand);
        self.ledger.insert(Entry {
            allocation: allocation.clone(),
            demand: Arc::unwrap_or_clone(w.demand),
            duration_ms: w.task.spec.duration_ms(),
            checkpoint_ms: now_ms,
            preempting: false,
            idle_exempt: w.task.spec.idle_exempt,
            attempt: w.task.attempt,
        });
        self.refresh_node(&node);
        Ok(allocation)
    }

    /// Re-marks `tenant`'s allocations after a quota change: the oldest stay
    /// guaranteed, what no longer fits the guarantee becomes borrowed (and so
    /// preemptible). Returns the allocations whose mark changed.
    pub fn remark_borrowed(&mut self, tenant: &str) -> Vec<Allocation> {
        let Some(l) = self.limits.get(tenant).cloned() else {
            return Vec::new();
        };
        let mut mine: Vec<(u64, String)> = self
            .ledger
            .all()
            .filter(|e| e.allocation.tenant == tenant)
            .map(|e| (e.allocation.created_ms, e.allocation.allocation_id.clone()))
            .collect();
        mine.sort();
        let mut used = Usage::default();
        let mut changed = Vec::new();
        for (_, id) in mine {
            let Some(e) = self.ledger.get_mut(&id) else {
                continue;
            };
            used += allocation_usage(e);
            let borrowed = l.guaranteed.exceeded_by(&used).is_some();
            if e.allocation.borrowed != borrowed {
                e.allocation.borrowed = borrowed;
                changed.push(e.allocation.clone());
            }
        }
        changed
    }

    /// Task type of a waiting task (for tests and the sim).
    pub fn waiting_type(&self, id: &str) -> Option<TaskType> {
        self.waiting.get(id).map(|w| w.task.spec.task_type)
    }

    /// Planned occupations for estimates: nothing yet beyond the ledger.
    pub(crate) fn planned_none() -> Vec<Planned> {
        Vec::new()
    }
}

fn allocation_usage_of(a: &Allocation, ledger: &Ledger) -> Usage {
    ledger
        .get(&a.allocation_id)
        .map(allocation_usage)
        .unwrap_or_default()
}

/// The allocation a placement grants (GPU ids and models from the inventory).
pub fn build_allocation(
    inv: &NodeInventory,
    node: &str,
    t: &WaitingTask,
    d: &Demand,
    p: &Placement,
    borrowed: bool,
    now_ms: u64,
) -> Allocation {
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
    Allocation {
        allocation_id: format!("{}.{}", t.task_id, t.attempt),
        task_id: t.task_id.clone(),
        tenant: t.tenant.clone(),
        node: node.to_string(),
        gpus,
        cpu_milli: d.cpu_milli,
        memory_mb: d.memory_mib,
        disk_mb: d.disk_mib,
        exclusive: d.exclusive,
        epoch: 0,
        created_ms: now_ms,
        borrowed,
        priority: t.spec.priority.0,
    }
}
