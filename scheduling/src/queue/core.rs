//! The scheduling core: pure decisions, no actors, no I/O, no clock (time is
//! passed in). The Scheduler actor applies its decisions (records them, tells
//! tasks and nodes); `caldera sim --dynamic` drives the very same code with a
//! virtual clock.
//!
//! A pass ([`Core::cycle`]) runs the stages of [`stages`] for each
//! waiting task: order the queue (priority, then the tenant's dominant share
//! of its guarantee in use, then arrival), admit each task against its
//! tenant's guarantee and borrowing limit, place it (filter -> score ->
//! select), and keep the first task that found no room as the queue's head:
//! later tasks may only start if they do not delay the head's estimated start
//! (EASY backfill). A task that outranks running work (higher priority, or
//! within its guarantee against borrowed allocations) preempts the cheapest
//! set of victims on one node. What starts is bound into the pool and ledger.
pub mod estimate;
pub mod stages;

use self::estimate::Planned;
use self::stages::backfill::Reservation;
use self::stages::place::{self, NoRoom};
use self::stages::Pass;
use super::demand;
use super::ledger::{allocation_usage, Entry, Ledger};
use super::offers::Offers;
use crate::placement::{
    Demand, GpuUnit, NodeWeights, Placement, Placer, PolicyName, Pool, Spread, WeightsNeed,
    WorkloadMix,
};
use caldera_spec::{Allocation, NodeInventory, Quota, Standing, TaskSpec, TaskType, Usage};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use self::stages::bind::build_allocation;

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
    /// Since when it waits (Unix ms): its submission, or its requeue after
    /// a preemption or a lost node. Only the queue's age figures read it.
    pub queued_ms: u64,
}

/// The tasks waiting at one priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    pub priority: caldera_spec::Priority,
    pub tasks: usize,
    /// The earliest `queued_ms` among them.
    pub oldest_queued_ms: u64,
}

/// A waiting task. Shared parts are behind `Arc` so a pass over a long queue
/// copies pointers, not specs.
#[derive(Debug, Clone)]
pub(in crate::queue) struct Waiting {
    pub task: Arc<WaitingTask>,
    pub demand: Arc<Demand>,
    /// What it counts against its tenant's quota once placed.
    pub usage: Usage,
    /// Its demand and priority: tasks of one shape find the same room.
    pub shape: Arc<str>,
    /// The pending reason and estimate it was last told (told once, not every pass).
    told: Option<(String, Option<u64>)>,
    /// Why no registered node could ever hold it (kept with the offers).
    never_fits: Option<Arc<str>>,
}

impl Waiting {
    /// A copy for the pass to hold while it changes the queue (pointers, not specs).
    fn snapshot(&self) -> Waiting {
        Waiting {
            task: self.task.clone(),
            demand: self.demand.clone(),
            usage: self.usage,
            shape: self.shape.clone(),
            told: None,
            never_fits: self.never_fits.clone(),
        }
    }
}

/// What a pass decided. The caller records and carries out each one in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The allocation is in the ledger; record it and start the workload.
    /// `note`: what else the placement is explained by (`weights cached`).
    Place {
        allocation: Allocation,
        note: Option<&'static str>,
    },
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

/// The queue, the pool, the ledger and the tenants' limits; its stages (in
/// `stages`) read and change them, one pass at a time.
pub struct Core {
    pub(crate) pool: Pool,
    pub(in crate::queue) placer: Placer,
    /// Best-fit placer for hypothetical node states (estimates, victim sets).
    pub(crate) checker: Placer,
    pub(crate) ledger: Ledger,
    pub(in crate::queue) waiting: HashMap<String, Waiting>,
    pub(crate) inventories: HashMap<String, NodeInventory>,
    /// Distinct GPU models of `inventories`, kept with them.
    models: Vec<String>,
    /// What `inventories` offer empty, kept with them.
    offers: Arc<Offers>,
    pub(crate) healthy: HashSet<String>,
    /// Nodes that take no new placements (cordoned or drained).
    pub(crate) cordoned: HashSet<String>,
    pub(in crate::queue) limits: HashMap<String, TenantLimits>,
    /// Room was freed or limits changed: the next pass looks at the whole queue.
    room_grew: bool,
    /// Tasks enqueued since the last pass (all a pass looks at otherwise).
    arrivals: Vec<String>,
    pub(in crate::queue) head: Option<Reservation>,
    pub(in crate::queue) estimates: HashMap<String, Option<u64>>,
    last_estimate_ms: Option<u64>,
    /// The time of the pass in progress.
    now_ms: u64,
    /// Weights of the registered model versions, by `name:version`.
    pub(in crate::queue) model_weights: HashMap<String, WeightsNeed>,
    /// Each node's weight cache, as its last cache report says (fed by the
    /// control plane, possibly before the node is up; each refresh of the
    /// node's pool view carries it).
    pub(in crate::queue) node_weights: HashMap<String, NodeWeights>,
    /// Each node's images, as its last image report says (kept like
    /// `node_weights`).
    pub(in crate::queue) node_images: HashMap<String, crate::placement::NodeImages>,
    /// What the passes decided since the caller last took the tally.
    outcomes: super::outcomes::Outcomes,
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
            offers: Arc::default(),
            healthy: HashSet::new(),
            cordoned: HashSet::new(),
            limits: HashMap::new(),
            room_grew: true,
            arrivals: Vec::new(),
            head: None,
            estimates: HashMap::new(),
            last_estimate_ms: None,
            now_ms: 0,
            model_weights: HashMap::new(),
            node_weights: HashMap::new(),
            node_images: HashMap::new(),
            outcomes: Default::default(),
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
        let kind_kept = self.offers.has_kind_of(&inv);
        let previous = self.inventories.insert(name.to_string(), inv.clone());
        let kind_kept = kind_kept && previous.is_none_or(|p| Offers::same_kind(&p, &inv));
        let mut m: Vec<String> = self
            .inventories
            .values()
            .flat_map(|i| i.gpus.iter().map(|g| g.model.clone()))
            .collect();
        m.sort();
        m.dedup();
        self.models = m;
        if !kind_kept {
            self.offers = Arc::new(Offers::of(self.inventories.values()));
            for w in self.waiting.values_mut() {
                w.never_fits = self.offers.never_fits(&w.task.spec).map(Into::into);
            }
        }
    }

    /// What the registered nodes (lost ones included) offer empty.
    pub fn offers(&self) -> &Arc<Offers> {
        &self.offers
    }

    /// The placement demand of `spec`, with the weights of its model
    /// version when the version is known (see [`Core::set_model_weights`]).
    pub fn demand_for(&self, spec: &TaskSpec) -> Demand {
        Demand {
            weights: self.weights_for(spec),
            image: self.image_for(spec),
            ..demand::demand_for(spec, self.models.iter().map(String::as_str))
        }
    }

    pub(in crate::queue) fn refresh_node(&mut self, name: &str) {
        if let Some(inv) = self.inventories.get(name) {
            let mut view = self
                .ledger
                .pool_view(name, inv, self.healthy.contains(name));
            view.cordoned = self.cordoned.contains(name);
            // The ledger knows nothing of caches: the last report does.
            view.weights = self.node_weights.get(name).cloned().unwrap_or_default();
            view.images = self.node_images(name);
            self.pool.upsert_node(view);
        }
    }

    /// Something that may let a waiting task in happened outside the
    /// ledger: the next pass looks at the whole queue.
    pub(in crate::queue) fn room_grew(&mut self) {
        self.room_grew = true;
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

    /// Cordons a node (no new placements; what runs there stays) or lifts it.
    pub fn set_cordoned(&mut self, name: &str, cordoned: bool) {
        let changed = if cordoned {
            self.cordoned.insert(name.to_string())
        } else {
            self.cordoned.remove(name)
        };
        if changed {
            self.refresh_node(name);
            self.room_grew |= !cordoned;
        }
    }

    /// Whether new work may go to `name`: up and not cordoned.
    pub fn placeable(&self, name: &str) -> bool {
        self.healthy.contains(name) && !self.cordoned.contains(name)
    }

    /// Remembers a node from storage without making it placeable.
    pub fn node_known(&mut self, name: &str, inv: NodeInventory) {
        self.remember(name, inv);
    }

    pub fn set_limits(&mut self, tenant: &str, limits: TenantLimits) {
        self.limits.insert(tenant.to_string(), limits);
        self.room_grew = true;
    }

    /// An allocation recorded before a restart. Refused (and not counted) when
    /// its id is already in the ledger or its task already holds one.
    pub fn restore(
        &mut self,
        allocation: Allocation,
        spec: &TaskSpec,
        checkpoint_ms: Option<u64>,
        attempt: u32,
    ) -> Result<(), crate::queue::ledger::Refused> {
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
        })?;
        self.refresh_node(&node);
        Ok(())
    }

    pub fn enqueue(&mut self, t: WaitingTask) {
        let demand = self.demand_for(&t.spec);
        let usage = demand::requested_usage(&t.spec, &demand);
        let shape = format!("{demand:?}/{}", t.spec.priority.0);
        let id = t.task_id.clone();
        let never_fits = self.offers.never_fits(&t.spec).map(Into::into);
        self.waiting.insert(
            id.clone(),
            Waiting {
                never_fits,
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

    /// The queue by priority, highest first: how many wait and since when
    /// the oldest of them waits.
    pub fn queue_depths(&self) -> Vec<QueueDepth> {
        let mut by: std::collections::BTreeMap<std::cmp::Reverse<u16>, QueueDepth> =
            Default::default();
        for w in self.waiting.values() {
            let p = w.task.spec.priority;
            let d = by.entry(std::cmp::Reverse(p.0)).or_insert(QueueDepth {
                priority: p,
                tasks: 0,
                oldest_queued_ms: u64::MAX,
            });
            d.tasks += 1;
            d.oldest_queued_ms = d.oldest_queued_ms.min(w.task.queued_ms);
        }
        by.into_values().collect()
    }

    /// What the passes decided since the last call (placed, turned down by
    /// reason, preempting), and a fresh tally.
    pub fn take_outcomes(&mut self) -> super::outcomes::Outcomes {
        self.outcomes.take()
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

    /// Stamps the lease epoch of the allocation's node (known to the shell,
    /// not to the core) into the ledger's copy, as granted.
    pub fn stamp_epoch(&mut self, allocation_id: &str, epoch: u64) {
        if let Some(e) = self.ledger.get_mut(allocation_id) {
            e.allocation.epoch = epoch;
        }
    }

    /// One pass over the queue: the tasks it looks at, in queue order, each
    /// admitted, placed, and then started or held (see [`stages`]).
    /// A pass after room grew looks at the whole queue; otherwise only at the
    /// tasks that arrived since the last one (room only shrank, so the tasks
    /// that waited then still wait).
    pub fn cycle(&mut self, now_ms: u64) -> Vec<Decision> {
        self.now_ms = now_ms;
        let full = std::mem::take(&mut self.room_grew);
        let ids = if full {
            self.arrivals.clear();
            self.reconsider_head();
            self.waiting.keys().cloned().collect()
        } else {
            std::mem::take(&mut self.arrivals)
        };
        let refresh_estimates = full
            && self
                .last_estimate_ms
                .is_none_or(|t| now_ms >= t + self.config.estimate_every_ms);
        let mut pass = Pass::default();
        for id in self.order(ids) {
            let Some(w) = self.waiting.get(&id).map(Waiting::snapshot) else {
                continue;
            };
            let Some(standing) = self.admit(&id, &w, &mut pass, now_ms) else {
                self.outcomes.rejected(super::outcomes::OVER_QUOTA);
                continue;
            };
            let spread = place::spread_of(&self.ledger, &self.pool, &id, &w.task.spec);
            let placed = match &spread {
                Some(spread) => {
                    place::place_replica(&mut self.placer, &mut self.pool, &w.demand, spread)
                }
                None => pass
                    .no_room
                    .place(&mut self.placer, &self.pool, &w.shape, &w.demand)
                    .map(|p| (p, Spread::Spread)),
            };
            match placed {
                Ok((p, spread)) => self.start(&id, &w, p, spread, standing, &mut pass, now_ms),
                Err(no_room) => self.hold(&id, &w, no_room, standing, &mut pass, now_ms),
            }
        }
        if refresh_estimates && !pass.blocked.is_empty() {
            self.refresh_estimates(&pass.blocked, now_ms, &mut pass.out);
        }
        pass.out
    }

    /// `w` found room: it starts, unless a GPU model's quota refuses it or it
    /// would delay the head (backfill), and then it is bound.
    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        id: &str,
        w: &Waiting,
        p: Placement,
        spread: Spread,
        standing: Standing,
        pass: &mut Pass,
        now_ms: u64,
    ) {
        let tenant = w.task.tenant.as_str();
        let node = self
            .pool
            .node(p.node)
            .map(|n| n.name.clone())
            .unwrap_or_default();
        let model_borrowed = match self.model_admission(tenant, &node, &w.demand, &p) {
            Ok(borrowed) => borrowed,
            Err(why) => {
                self.outcomes.rejected(super::outcomes::GPU_MODEL_QUOTA);
                return self.pending(&mut pass.out, id, why.to_string(), None);
            }
        };
        if let Some(why) = self.backfill_blocks(id, w, &node, now_ms) {
            self.outcomes.rejected(super::outcomes::BACKFILL);
            let est = self.estimates.get(id).copied().flatten();
            return self.pending(&mut pass.out, id, why, est);
        }
        let borrowed = standing == Standing::Borrowing || model_borrowed;
        let note = joined_note(self.placer.explain(&self.pool, &w.demand, &p), spread);
        match self.bind(id, p, borrowed, now_ms) {
            Ok(a) => {
                self.outcomes.placed += 1;
                pass.granted(tenant, allocation_usage_of(&a, &self.ledger));
                pass.out.push(Decision::Place {
                    allocation: a,
                    note,
                });
            }
            Err(why) => {
                self.outcomes.rejected(super::outcomes::BIND);
                self.pending(&mut pass.out, id, why.to_string(), None)
            }
        }
    }

    /// `w` found no room: it preempts if it may (the first of its shape this
    /// pass), else it waits, as the head if there is none yet.
    fn hold(
        &mut self,
        id: &str,
        w: &Waiting,
        no_room: NoRoom,
        standing: Standing,
        pass: &mut Pass,
        now_ms: u64,
    ) {
        if self
            .head
            .as_ref()
            .is_some_and(|h| h.preempting && h.task_id == id)
        {
            // Its victims are stopping for it: "preempting ... to make room"
            // stays what it is told, not the room it lacks meanwhile (counted
            // as turned down, as every pass that finds it no room is).
            self.outcomes.rejected(no_room.top);
            return;
        }
        let within_guarantee = standing == Standing::Guaranteed;
        if no_room.first_of_shape && self.preempt(id, w, within_guarantee, now_ms, &mut pass.out) {
            self.outcomes.preempting += 1;
            return;
        }
        self.outcomes.rejected(no_room.top);
        pass.blocked.push(id.to_string());
        self.reserve_head(id, w, now_ms);
        let est = self.estimates.get(id).copied().flatten();
        self.pending(&mut pass.out, id, no_room.reason, est);
    }

    /// Tells `id` why it still waits and when it should start, unless it was
    /// told exactly that already.
    pub(in crate::queue) fn pending(
        &mut self,
        out: &mut Vec<Decision>,
        id: &str,
        reason: String,
        est: Option<u64>,
    ) {
        // An estimate that has passed is stale (it is recomputed for the first
        // tasks in line each second); better none than a time in the past.
        let est = est.filter(|t| *t >= self.now_ms);
        let Some(w) = self.waiting.get_mut(id) else {
            return;
        };
        let reason = match &w.never_fits {
            Some(why) => format!("unschedulable: {why}"),
            None => reason,
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

    /// Each waiting task's place in line (1 = considered first), in the
    /// order a pass considers them: priority, then the tenant's dominant
    /// share, then arrival. What `caldera tasks` shows as POS.
    pub fn queue_positions(&self) -> HashMap<String, u32> {
        let ids = self.waiting.keys().cloned().collect();
        self.order(ids).into_iter().zip(1u32..).collect()
    }

    /// [`Core::queue_positions`] of `ids` only (those waiting): what a page
    /// of a listing shows. One pass over the queue counting who is ahead,
    /// without sorting it or copying an id of it.
    pub fn queue_positions_of(&self, ids: &[String]) -> HashMap<String, u32> {
        self.positions_of(ids)
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

/// A placement's note: the cache's (`weights cached`) and the spread's
/// (`placed without spread`), both when both apply.
fn joined_note(weights: Option<&'static str>, spread: Spread) -> Option<&'static str> {
    match (weights, spread.note()) {
        (Some("weights cached"), Some(_)) => Some("weights cached, placed without spread"),
        (Some("weights warming"), Some(_)) => Some("weights warming, placed without spread"),
        (w, None) => w,
        (_, s) => s,
    }
}
