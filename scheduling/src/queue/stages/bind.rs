//! Stage 6, bind: a placement becomes an allocation. The pool commits it
//! (and may refuse, if the placer and the pool disagree), the task leaves the
//! queue, the ledger records the allocation, and the placer learns the demand
//! for its typical mix. Only then is the allocation a decision.
use super::super::core::{Core, WaitingTask};
use super::super::ledger::Entry;
use crate::placement::{Demand, Placement};
use caldera_spec::{Allocation, GpuGrant, NodeInventory};
use std::sync::Arc;

impl Core {
    /// Binds placement `p` of waiting task `id` into the pool and the ledger.
    /// An `Err` is an internal inconsistency (the pool refused what the placer
    /// chose); the task stays queued and the reason is shown as its pending
    /// reason, not logged here — this crate has no logger.
    pub(in crate::queue) fn bind(
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
}

/// The allocation a placement grants: per placed GPU its uuid and model from
/// the inventory and the units (MiB) taken on it; the id is `task.attempt`, so
/// a restarted task's allocation is a new one.
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
