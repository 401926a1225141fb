//! Stage 6, bind: a placement becomes an allocation. The pool commits it
//! (and may refuse, if the placer and the pool disagree), the task leaves the
//! queue, the ledger records the allocation, and the placer learns the demand
//! for its typical mix. Only then is the allocation a decision.
use super::super::{Core, WaitingTask};
use crate::placement::{Demand, Placement, PlacementError};
use crate::queue::ledger::{Entry, Refused};
use caldera_spec::{Allocation, GpuGrant, NodeInventory};
use std::sync::Arc;

/// Why a placement was not bound: the placer, the pool and the ledger
/// disagree. The words are the task's pending reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("no longer waiting")]
    NoLongerWaiting,
    #[error("placed on an unknown node")]
    UnknownNode,
    #[error("placed on a node without inventory")]
    NoInventory,
    #[error("refused by the ledger: {0}")]
    Ledger(#[source] Refused),
    #[error("placement did not fit at bind: {0}")]
    DidNotFit(#[source] PlacementError),
}

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
    ) -> Result<Allocation, BindError> {
        let w = self.waiting.get(id).ok_or(BindError::NoLongerWaiting)?;
        let node = self
            .pool
            .node(p.node)
            .ok_or(BindError::UnknownNode)?
            .name
            .clone();
        let inventory = self.inventories.get(&node).ok_or(BindError::NoInventory)?;
        let allocation =
            build_allocation(inventory, &node, &w.task, &w.demand, &p, borrowed, now_ms);
        self.ledger.admits(&allocation).map_err(BindError::Ledger)?;
        self.pool
            .commit(&w.demand, &p)
            .map_err(BindError::DidNotFit)?;
        let w = self.waiting.remove(id).ok_or(BindError::NoLongerWaiting)?;
        if self.head.as_ref().is_some_and(|h| h.task_id == id) {
            self.head = None;
        }
        self.estimates.remove(id);
        self.placer.observe(&w.demand);
        // Admitted above, and nothing changed the ledger since.
        self.ledger
            .insert(Entry {
                allocation: allocation.clone(),
                demand: Arc::unwrap_or_clone(w.demand),
                duration_ms: w.task.spec.duration_ms(),
                checkpoint_ms: now_ms,
                preempting: false,
                idle_exempt: w.task.spec.idle_exempt,
                attempt: w.task.attempt,
            })
            .map_err(BindError::Ledger)?;
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
        image_digest: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{GpuDemand, NodeId};
    use crate::queue::fixtures::{core_with, node, spec, submit, waiting};

    #[test]
    fn an_allocation_names_the_placed_gpus_from_the_inventory() {
        // Node of 4 A100s, indices 0..3, uuids G0..G3, 81920 MiB each.
        let inv = node(4);
        let t = waiting("t", spec("job", 2, "high", None), 7, 3);
        let whole = Demand {
            gpu: GpuDemand::Whole { count: 2 },
            cpu_milli: 1000,
            ..Demand::default()
        };
        let memory = Demand {
            gpu: GpuDemand::Memory {
                count: 1,
                per_gpu: 20480,
            },
            ..whole.clone()
        };
        // (demand, placed (index, MiB), granted (index, uuid, MiB))
        let rows = [
            // Two whole GPUs 1 and 3: all 81920 MiB of each.
            (
                &whole,
                vec![(1, 81920), (3, 81920)],
                vec![(1, "G1", 81920), (3, "G3", 81920)],
            ),
            // 20 GiB = 20480 MiB of GPU 2.
            (&memory, vec![(2, 20480)], vec![(2, "G2", 20480)]),
            // Index 9 is not in the inventory: nothing is granted for it.
            (&memory, vec![(9, 20480)], vec![]),
        ];
        for (d, placed, granted) in rows {
            let p = Placement {
                node: NodeId(0),
                gpus: placed,
            };
            let a = build_allocation(&inv, "a", &t, d, &p, true, 5_000);
            let got: Vec<(u32, &str, u64)> = a
                .gpus
                .iter()
                .map(|g| (g.index, g.uuid.as_str(), g.memory_mb))
                .collect();
            assert_eq!(got, granted);
            assert!(a.gpus.iter().all(|g| g.model == "A100" && g.simulated));
            // Id "task.attempt", priority high = 900, the demand's 1 core,
            // borrowed as admitted, created at the bind's time.
            assert_eq!(
                (a.allocation_id.as_str(), a.tenant.as_str(), a.node.as_str()),
                ("job.3", "t", "a")
            );
            assert_eq!(
                (a.priority, a.cpu_milli, a.borrowed, a.created_ms),
                (900, 1000, true, 5_000)
            );
        }
    }

    #[test]
    fn binding_takes_the_room_in_the_pool_and_the_ledger_or_leaves_the_task_queued() {
        let mut c = core_with(&[("a", 4)]);
        submit(&mut c, "t", spec("job", 2, "medium", None), 1, 1);
        submit(&mut c, "t", spec("again", 1, "medium", None), 2, 1);
        let a = c.pool.node_id("a").expect("node a");
        let p = |gpus: Vec<(u32, u64)>| Placement { node: a, gpus };
        let free = |c: &Core| -> Vec<u64> {
            c.pool
                .node(a)
                .expect("node a")
                .gpus
                .iter()
                .map(|g| g.free)
                .collect()
        };
        // GPUs 1 and 3 of 4 for "job": 81920 - 81920 = 0 MiB left on each.
        let got = c.bind("job", p(vec![(1, 81920), (3, 81920)]), false, 1_000);
        assert_eq!(got.map(|a| a.allocation_id), Ok("job.1".to_string()));
        assert_eq!(free(&c), [81920, 0, 81920, 0]);
        assert_eq!(c.ledger.tenant_usage("t").gpus, 2.0);
        assert_eq!(c.queued(), 1, "job left the queue");
        // GPU 1 again for "again": the pool refuses (0 MiB free) and nothing
        // changes: same room, same ledger, still queued.
        let got = c.bind("again", p(vec![(1, 81920)]), false, 2_000);
        assert!(
            matches!(
                &got,
                Err(BindError::DidNotFit(PlacementError::NoRoom { .. }))
            ),
            "{got:?}"
        );
        let words = got.unwrap_err().to_string();
        assert!(
            words.starts_with("placement did not fit at bind: node"),
            "{words}"
        );
        assert_eq!(free(&c), [81920, 0, 81920, 0]);
        assert_eq!((c.ledger.len(), c.queued()), (1, 1));
        // A node the pool does not know, a task no longer waiting.
        let nowhere = Placement {
            node: NodeId(7),
            gpus: vec![(0, 81920)],
        };
        assert_eq!(
            c.bind("again", nowhere, false, 2_000),
            Err(BindError::UnknownNode)
        );
        assert_eq!(
            c.bind("job", p(vec![(0, 81920)]), false, 2_000),
            Err(BindError::NoLongerWaiting)
        );
    }
}
