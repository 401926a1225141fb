//! The Scheduler actor: the ONE writer of the allocation ledger. It owns the
//! scheduling [`caldera_scheduling::queue::core::Core`] (pool index, ledger, queue, quotas) and carries out
//! the core's decisions: offers each grant to its task (`Placed`, in memory
//! only) and records it when the task takes it (`RecordGrant`: the allocation,
//! the task's `scheduled` record and the epoch in one batch), tells victims to
//! checkpoint and stop, tells waiting tasks why they wait.
mod billing;
mod borrow_marks;
#[cfg(test)]
mod free_tests;
pub mod idle;
mod idle_clock;
mod model_marks;
mod pool_metrics;
mod usage_record;
pub mod utilization;

use crate::clock::Clock;
use crate::commit_site::CommitSite;
use crate::config::ServerConfig;
use crate::durability::FlushGate;
use crate::protocol::scheduler::{
    AllocatedByNode, AllocationsOn, Checkpointed, Dequeue, DryRunPlacement, Enqueue, Free,
    GrantNotRecorded, LedgerAllocations, ModelWeightsKnown, NodeCordoned, NodeDown,
    NodeMetricsUpdate, NodeUp, NodeWeightsUpdate, QueuePositions, RecordGrant, Restart, Stats,
};
use crate::protocol::task::{Pending, Placed, Preempt};
use crate::registry::Registry;
use crate::shared::PoolOffers;
use crate::views::SchedulerStats;
use actix::prelude::*;
use borrow_marks::Remark;
use caldera_scheduling::placement::PolicyName;
use caldera_scheduling::queue::core::{Core, CoreConfig, Decision, WaitingTask};
use caldera_spec::wire::AllocationUse;
use caldera_spec::{Allocation, Event, EventKind, NodeMetrics};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Delay that lets a burst of submissions share one placement pass.
const CYCLE_DEBOUNCE: Duration = Duration::from_millis(2);
/// Passes also run on this period, so estimates and reservations age.
const CYCLE_PERIOD: Duration = Duration::from_secs(1);

pub struct Scheduler {
    /// The shells' one clock: timestamps and the cycle's `now` come from it.
    clock: Clock,
    gate: Arc<FlushGate>,
    registry: Arc<Registry>,
    config: ServerConfig,
    pub(crate) core: Core,
    pub(crate) metrics: HashMap<String, NodeMetrics>,
    pub(crate) usage: HashMap<String, AllocationUse>,
    pub(crate) idle: idle::Inspector,
    /// Each node's lease epoch (from sled at load, then `NodeUp`): stamped
    /// into every allocation granted there.
    epochs: HashMap<String, u64>,
    /// Grants offered (`Placed`) and not yet recorded (`RecordGrant`).
    unrecorded: std::collections::HashSet<String>,
    /// What the registered nodes offer, published for the checks at submission.
    offers: Arc<PoolOffers>,
    cycle_pending: bool,
    /// A decision could not be recorded: stop after this pass and be rebuilt.
    fatal: bool,
}

impl Scheduler {
    /// Rebuilds the scheduler from sled: the ledger, node inventories and quotas.
    /// Nodes count as unhealthy until their agents say hello again.
    pub fn load(
        clock: Clock,
        gate: Arc<FlushGate>,
        registry: Arc<Registry>,
        config: &ServerConfig,
        offers: Arc<PoolOffers>,
    ) -> Result<Scheduler, crate::errors::ActorError> {
        let policy: PolicyName = config.scheduling.placement_policy.parse().map_err(
            |e: caldera_scheduling::placement::UnknownPolicy| {
                crate::errors::ActorError::Conflict(e.to_string())
            },
        )?;
        let store = gate.store().clone();
        let core_config = CoreConfig {
            stop_grace_ms: config.nodes.stop_grace_ms,
            min_runtime_ms: config.scheduling.preemption_min_runtime_ms,
            ..CoreConfig::default()
        };
        let mut core = Core::new(policy, config.scheduling.placement_seed, core_config);
        let mut epochs = HashMap::new();
        for n in store.nodes()? {
            epochs.insert(n.name.clone(), n.epoch);
            core.set_cordoned(&n.name, n.cordon.is_some());
            core.node_known(&n.name, n.inventory);
        }
        offers.publish(core.offers().clone());
        for v in store.model_versions()? {
            core.set_model_weights(crate::model::register::weights_need(&v));
        }
        for t in store.tenants()? {
            core.set_limits(&t.name, crate::tenant::limits(&t));
        }
        reconcile_ledger(&gate, &mut core, clock.now_ms())?;
        Ok(Scheduler {
            clock,
            gate,
            registry,
            config: config.clone(),
            core,
            metrics: HashMap::new(),
            usage: HashMap::new(),
            idle: idle::Inspector::new(config, &store),
            epochs,
            unrecorded: Default::default(),
            offers,
            cycle_pending: false,
            fatal: false,
        })
    }

    fn request_cycle(&mut self, ctx: &mut Context<Self>) {
        if !self.cycle_pending {
            self.cycle_pending = true;
            ctx.run_later(CYCLE_DEBOUNCE, |s, ctx| s.cycle(ctx));
        }
    }

    fn cycle(&mut self, ctx: &mut Context<Self>) {
        self.cycle_pending = false;
        // Wall time, not the injected clock: this measures the pass itself.
        let began = std::time::Instant::now();
        let now = self.clock.now_ms();
        for d in self.core.cycle(now) {
            self.apply(d);
        }
        let metrics = self.gate.metrics();
        metrics.cycle_took(began.elapsed());
        metrics.pass_decided(&self.core.take_outcomes());
        if self.fatal {
            ctx.stop();
        }
    }

    /// Rebuilds everything from sled after a fatal error: the ledger, quotas and
    /// node inventories, then the queue (every waiting task), then node health
    /// (each connected node announces itself again).
    fn rebuild(&mut self) {
        match Scheduler::load(
            self.clock,
            self.gate.clone(),
            self.registry.clone(),
            &self.config,
            self.offers.clone(),
        ) {
            Ok(fresh) => *self = fresh,
            Err(e) => {
                // Memory may hold what sled does not (an allocation whose
                // free was not recorded): try again at the next pass rather
                // than carry on with it for good.
                tracing::error!(error = %e, "scheduler rebuild failed; retrying at the next pass");
                self.fatal = true;
                return;
            }
        }
        for t in self.gate.store().tasks().flatten() {
            let service_parent =
                t.spec.task_type == caldera_spec::TaskType::Inference && t.service.is_none();
            if matches!(
                t.state,
                caldera_spec::TaskState::Queued | caldera_spec::TaskState::Preempted
            ) && !service_parent
            {
                self.core.enqueue(WaitingTask {
                    task_id: t.spec.task_id.clone(),
                    tenant: t.tenant.clone(),
                    seq: t.seq,
                    attempt: t.attempts + 1,
                    queued_ms: crate::task::queued_since(&t),
                    spec: t.spec,
                });
            }
        }
        // A change whose marks were not recorded: mark them now.
        for t in self.gate.store().tenants().unwrap_or_default() {
            self.remark(&t.name, Remark::Rebuilt);
        }
        for (_, n) in self.registry.nodes() {
            n.do_send(crate::protocol::node::Reannounce);
        }
    }

    /// Frees an allocation of the ledger: recorded in sled (with an event)
    /// first, then let go in memory. Not recorded: the ledger keeps it, and
    /// the next pass stops the Scheduler to be rebuilt from sled (where the
    /// reconciliation with the task records frees it if its task is done).
    fn free(&mut self, allocation_id: &str, reason: &str) {
        let Some(e) = self.core.ledger().get(allocation_id) else {
            return;
        };
        let a = &e.allocation;
        let now = self.clock.now_ms();
        let mut b = self.gate.store().batch();
        b.remove_allocation(&a.allocation_id);
        // Never recorded (offered, not taken): nothing to bill.
        if !self.unrecorded.contains(allocation_id) {
            self.stage_billing_close(&mut b, a, now, reason);
        }
        b.append_event(released(a, now, &format!(": {reason}")));
        if let Err(err) = self.gate.commit(CommitSite::Free, b) {
            tracing::error!(allocation = %a.allocation_id, error = %err, "could not record release; restarting the scheduler");
            self.fatal = true;
            return;
        }
        let tenant = a.tenant.clone();
        self.core.release(allocation_id);
        self.unrecorded.remove(allocation_id);
        self.usage.remove(allocation_id);
        self.idle.forget(allocation_id);
        // What the tenant holds changed: a younger allocation may be back
        // within its guarantee.
        self.remark(&tenant, Remark::HoldingsChanged);
    }

    /// Records a grant its task took, or says why not. What is recorded is
    /// the ledger's allocation under the epoch the task names (the one it was
    /// stamped with at grant, or the one a later dispatch was answered under),
    /// in one batch with the task's planned record and the events.
    fn record_grant(
        &mut self,
        m: RecordGrant,
        ctx: &mut Context<Self>,
    ) -> Result<crate::durability::Ticket, GrantNotRecorded> {
        let id = m.allocation.allocation_id.clone();
        let a = &m.allocation;
        let held = self.core.ledger().get(&id).is_some_and(|e| {
            e.allocation
                == Allocation {
                    epoch: e.allocation.epoch,
                    ..a.clone()
                }
                && m.record.spec.task_id == a.task_id
                && m.record.allocation.as_ref() == Some(a)
                && m.record.state == caldera_spec::TaskState::Scheduled
        });
        if !held {
            // A rebuild dropped it, or it was freed (the task asked for room
            // again): the task stays queued, and waits in the queue.
            self.keep_waiting(&m.record, ctx);
            return Err(GrantNotRecorded::NoLongerHeld { allocation_id: id });
        }
        let mut b = self.gate.store().batch();
        b.put_allocation(a);
        b.put_task(&m.record);
        if self.unrecorded.contains(&id) {
            b.put_open_billing(&self.open_billing(a, &m.record));
            b.append_event(
                Event::new(
                    self.clock.now_ms(),
                    EventKind::AllocationGranted,
                    grant_message(a),
                )
                .task(&a.task_id)
                .tenant(&a.tenant)
                .node(&a.node),
            );
        }
        b.append_event(m.event);
        match self.gate.commit(CommitSite::Grant, b) {
            Ok(ticket) => {
                self.unrecorded.remove(&id);
                self.core.stamp_epoch(&id, a.epoch);
                // Recorded, it may now be re-marked (it kept its offered mark
                // while a change happened), and so may what it counts before.
                self.remark(&a.tenant, Remark::HoldingsChanged);
                Ok(ticket)
            }
            Err(e) => {
                // The ledger in memory is ahead of sled: fatal. Stop, and the
                // supervisor rebuilds the scheduler (and its queue) from sled.
                tracing::error!(task = %a.task_id, error = %e, "could not record a grant; restarting the scheduler");
                self.fatal = true;
                ctx.stop();
                Err(GrantNotRecorded::Storage {
                    allocation_id: id,
                    error: e,
                })
            }
        }
    }

    /// A task whose grant was refused waits again: enqueued, unless it is
    /// queued already or another grant of it is on its way.
    fn keep_waiting(&mut self, planned: &caldera_spec::TaskRecord, ctx: &mut Context<Self>) {
        let id = &planned.spec.task_id;
        if self.core.waiting_type(id).is_some() || self.core.ledger().of_task(id).is_some() {
            return;
        }
        self.core.enqueue(WaitingTask {
            task_id: id.clone(),
            tenant: planned.tenant.clone(),
            seq: planned.seq,
            // The planned record counted the attempt it did not get.
            attempt: planned.attempts,
            queued_ms: crate::task::queued_since(planned),
            spec: planned.spec.clone(),
        });
        self.request_cycle(ctx);
    }

    fn apply(&mut self, d: Decision) {
        match d {
            Decision::Place {
                mut allocation,
                note,
            } => {
                let Some(task) = self.registry.task(&allocation.task_id) else {
                    self.core.release(&allocation.allocation_id);
                    return;
                };
                // Nothing is recorded yet: the task records its grant with
                // `RecordGrant` if it still waits (else it hands it back).
                let epoch = self.epochs.get(&allocation.node).copied().unwrap_or(0);
                allocation.epoch = epoch;
                self.core.stamp_epoch(&allocation.allocation_id, epoch);
                self.unrecorded.insert(allocation.allocation_id.clone());
                task.do_send(Placed { allocation, note });
            }
            Decision::Preempt {
                victim,
                for_task,
                reason,
            } => {
                self.gate.metrics().preempted();
                if let Some(t) = self.registry.task(&victim.task_id) {
                    t.do_send(Preempt {
                        allocation_id: victim.allocation_id,
                        by: for_task,
                        reason,
                    });
                }
            }
            Decision::Pending {
                task_id,
                reason,
                estimated_start_ms,
            } => {
                if let Some(t) = self.registry.task(&task_id) {
                    t.do_send(Pending {
                        reason,
                        estimated_start_ms,
                    });
                }
            }
        }
    }
}

/// Restores the ledger from sled, reconciled with the task records (and
/// gives a kept allocation without a billing record its open one): an
/// allocation is kept only when its task holds exactly it (a state that holds
/// room, and the record names that allocation) and the ledger admits it (a
/// new id, the task's only one). Any other — of an ended task, of one that
/// waits again, of a vanished record, a duplicate — is freed in sled with an
/// event saying why: nothing would ever free it later (an ended task has no
/// actor), so keeping it would leak its room for good, and a waiting task
/// would be granted a second allocation.
fn reconcile_ledger(
    gate: &FlushGate,
    core: &mut Core,
    now: u64,
) -> Result<(), crate::errors::ActorError> {
    let store = gate.store();
    let mut freed = store.batch();
    let mut n = 0;
    for a in store.allocations() {
        let a = a?;
        let task = store.task(&a.task_id)?;
        let why = match &task {
            None => Some("its task has no record".to_string()),
            Some(t) if !t.state.holds_allocation() => {
                Some(format!("its task is {}", t.state.as_str()))
            }
            Some(t)
                if t.allocation.as_ref().map(|x| x.allocation_id.as_str())
                    != Some(a.allocation_id.as_str()) =>
            {
                Some("its task holds another allocation".to_string())
            }
            Some(t) => core
                .restore(a.clone(), &t.spec, t.checkpoint_ms, t.attempts.max(1))
                .err()
                .map(|e| format!("the ledger refused it: {e}")),
        };
        if let Some(why) = why {
            tracing::warn!(allocation = %a.allocation_id, %why, "allocation freed at boot");
            freed.remove_allocation(&a.allocation_id);
            billing::stage_close(store, &mut freed, &a, now, &why, 0);
            freed.append_event(released(&a, now, &format!(" at boot: {why}")));
            n += 1;
        } else if let Some(t) = &task {
            // Kept, and granted before billing existed: bill it from now on.
            billing::stage_missing_open(store, &mut freed, core, &a, t);
        }
    }
    if n > 0 || !freed.is_empty() {
        gate.commit(CommitSite::LedgerReconcile, freed)?;
    }
    Ok(())
}

/// The `allocation_released` event of `a`; `why` follows "released".
fn released(a: &Allocation, at_ms: u64, why: &str) -> Event {
    let msg = format!("allocation {} on {} released{why}", a.allocation_id, a.node);
    Event::new(at_ms, EventKind::AllocationReleased, msg)
        .task(&a.task_id)
        .tenant(&a.tenant)
        .node(&a.node)
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
        "allocation {} on {}: gpus [{}], cpu {} m, memory {} MiB, disk {} MiB{}",
        a.allocation_id,
        a.node,
        gpus.join(", "),
        a.cpu_milli,
        a.memory_mb,
        a.disk_mb,
        if a.borrowed {
            ", borrowed (preemptible)"
        } else {
            ""
        }
    )
}

impl actix::Supervised for Scheduler {
    fn restarting(&mut self, _: &mut Context<Self>) {
        tracing::warn!("scheduler restarting: rebuilding from storage");
        crate::supervision::REBUILDS.count("scheduler");
        self.rebuild();
    }
}

impl Handler<Restart> for Scheduler {
    type Result = ();
    fn handle(&mut self, _: Restart, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Actor for Scheduler {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(CYCLE_PERIOD, |s, ctx| s.cycle(ctx));
        let every = self.idle.sample_every();
        ctx.run_interval(every, |s, _| s.inspect_idle());
    }
}

impl Handler<Enqueue> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Enqueue, ctx: &mut Context<Self>) {
        // A task that asks for room holds none: an allocation the ledger still
        // has for it (a grant it never recorded, or its actor was rebuilt from
        // sled after a failed commit) is stale, and freed.
        if let Some(stale) = self.core.ledger().of_task(&m.task_id) {
            let stale = stale.allocation.allocation_id.clone();
            self.free(&stale, "its task asks for room again, so it holds none");
        }
        self.core.enqueue(WaitingTask {
            task_id: m.task_id,
            tenant: m.tenant,
            spec: m.spec,
            seq: m.seq,
            attempt: m.attempt,
            queued_ms: m.queued_ms,
        });
        self.request_cycle(ctx);
    }
}

impl Handler<Dequeue> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Dequeue, ctx: &mut Context<Self>) {
        self.core.dequeue(&m.task_id);
        self.request_cycle(ctx);
    }
}

impl Handler<Free> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Free, ctx: &mut Context<Self>) {
        self.free(&m.allocation_id, &m.reason);
        self.request_cycle(ctx);
    }
}

impl Handler<RecordGrant> for Scheduler {
    type Result = Result<crate::durability::Ticket, GrantNotRecorded>;
    fn handle(&mut self, m: RecordGrant, ctx: &mut Context<Self>) -> Self::Result {
        self.record_grant(m, ctx)
    }
}

impl Handler<NodeUp> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeUp, ctx: &mut Context<Self>) {
        self.epochs.insert(m.name.clone(), m.epoch);
        self.core.set_cordoned(&m.name, m.cordoned);
        self.core.node_up(&m.name, m.inventory);
        self.offers.publish(self.core.offers().clone());
        self.request_cycle(ctx);
    }
}

impl Handler<NodeDown> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeDown, _: &mut Context<Self>) {
        self.core.node_down(&m.name);
        self.metrics.remove(&m.name);
    }
}

impl Handler<NodeCordoned> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeCordoned, ctx: &mut Context<Self>) {
        self.core.set_cordoned(&m.name, m.cordoned);
        self.request_cycle(ctx);
    }
}

impl Handler<AllocationsOn> for Scheduler {
    type Result = MessageResult<AllocationsOn>;
    fn handle(&mut self, m: AllocationsOn, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            self.core
                .ledger()
                .on_node(&m.node)
                .map(|e| e.allocation.clone())
                .collect(),
        )
    }
}

impl Handler<NodeMetricsUpdate> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeMetricsUpdate, _: &mut Context<Self>) {
        self.metrics.insert(m.name, m.metrics);
        for (id, u) in m.usage {
            if self.core.ledger().get(&id).is_some() {
                self.usage.insert(id, u);
            }
        }
    }
}

impl Handler<NodeWeightsUpdate> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: NodeWeightsUpdate, _: &mut Context<Self>) {
        self.core.set_node_weights(&m.name, m.weights);
    }
}

impl Handler<crate::protocol::scheduler::NodeImagesUpdate> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: crate::protocol::scheduler::NodeImagesUpdate, _: &mut Context<Self>) {
        self.core.set_node_images(&m.name, m.images);
    }
}

impl Handler<ModelWeightsKnown> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: ModelWeightsKnown, _: &mut Context<Self>) {
        self.core.set_model_weights(m.need);
    }
}

impl Handler<Checkpointed> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: Checkpointed, _: &mut Context<Self>) {
        self.core.checkpointed(&m.allocation_id, m.at_ms);
    }
}

impl Handler<AllocatedByNode> for Scheduler {
    type Result = MessageResult<AllocatedByNode>;
    fn handle(&mut self, _: AllocatedByNode, _: &mut Context<Self>) -> Self::Result {
        let mut out = HashMap::new();
        for e in self.core.ledger().all() {
            out.entry(e.allocation.node.clone())
                .or_insert_with(crate::views::NodeAllocated::default)
                .add(&e.allocation);
        }
        MessageResult(out)
    }
}

impl Handler<Stats> for Scheduler {
    type Result = MessageResult<Stats>;
    fn handle(&mut self, _: Stats, _: &mut Context<Self>) -> Self::Result {
        MessageResult(SchedulerStats {
            queued: self.core.queued(),
            allocations: self.core.ledger().len(),
            healthy_nodes: self.core.healthy_nodes().len(),
        })
    }
}

impl Handler<QueuePositions> for Scheduler {
    type Result = MessageResult<QueuePositions>;
    fn handle(&mut self, m: QueuePositions, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.core.queue_positions_of(&m.task_ids))
    }
}

impl Handler<DryRunPlacement> for Scheduler {
    type Result = MessageResult<DryRunPlacement>;
    /// Answered between passes, so it sees the pool a pass would; it binds
    /// nothing and leaves the placer's seeded draws as they were.
    fn handle(&mut self, m: DryRunPlacement, _: &mut Context<Self>) -> Self::Result {
        let now = self.clock.now_ms();
        MessageResult(self.core.dry_run(&m.task_id, &m.tenant, &m.spec, now))
    }
}

impl Handler<LedgerAllocations> for Scheduler {
    type Result = MessageResult<LedgerAllocations>;
    fn handle(&mut self, _: LedgerAllocations, _: &mut Context<Self>) -> Self::Result {
        let mut all: Vec<Allocation> = self
            .core
            .ledger()
            .all()
            .map(|e| e.allocation.clone())
            .collect();
        all.sort_by(|a, b| a.allocation_id.cmp(&b.allocation_id));
        MessageResult(all)
    }
}
