//! The allocation ledger: every live allocation, by id and by node. Only the
//! Scheduler holds one, so no two tasks are ever granted the same GPU memory.
use crate::placement::{Demand, GpuDemand, GpuSlot, NodeView as PoolNode};
use caldera_spec::{Allocation, NodeInventory, Usage};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// One granted allocation and the facts the scheduler reasons with.
#[derive(Debug, Clone)]
pub struct Entry {
    pub allocation: Allocation,
    pub demand: Demand,
    /// Declared run time; `None` = unknown (never assumed to end).
    pub duration_ms: Option<u64>,
    /// When work since the last checkpoint started (start, or latest checkpoint).
    pub checkpoint_ms: u64,
    /// A stop was requested to make room for another task.
    pub preempting: bool,
    /// Never reclaimed by the idle inspector.
    pub idle_exempt: bool,
    /// The task's attempt this allocation belongs to (1 = first start).
    pub attempt: u32,
}

impl Entry {
    /// When it is expected to end, if its duration was declared.
    pub fn expected_end_ms(&self) -> Option<u64> {
        self.duration_ms.map(|d| self.allocation.created_ms + d)
    }
}

#[derive(Default)]
pub struct Ledger {
    by_id: HashMap<String, Entry>,
    by_node: HashMap<String, BTreeSet<String>>,
    /// The one live allocation of each task that holds one.
    by_task: HashMap<String, String>,
}

/// Why the ledger refused an allocation: either would count the same room
/// twice (a replaced entry's room would never come back), or let one task
/// hold two grants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("allocation {0} is already in the ledger")]
    DuplicateId(String),
    #[error("task {task} already holds allocation {holds}")]
    TaskHoldsOne { task: String, holds: String },
}

impl Ledger {
    /// Whether `a` may enter the ledger: a new id, for a task holding none.
    pub fn admits(&self, a: &Allocation) -> Result<(), Refused> {
        if self.by_id.contains_key(&a.allocation_id) {
            return Err(Refused::DuplicateId(a.allocation_id.clone()));
        }
        if let Some(holds) = self.by_task.get(&a.task_id) {
            return Err(Refused::TaskHoldsOne {
                task: a.task_id.clone(),
                holds: holds.clone(),
            });
        }
        Ok(())
    }

    /// Records `e`, unless [`Ledger::admits`] refuses it (nothing changes then).
    pub fn insert(&mut self, e: Entry) -> Result<(), Refused> {
        self.admits(&e.allocation)?;
        self.by_node
            .entry(e.allocation.node.clone())
            .or_default()
            .insert(e.allocation.allocation_id.clone());
        self.by_task.insert(
            e.allocation.task_id.clone(),
            e.allocation.allocation_id.clone(),
        );
        self.by_id.insert(e.allocation.allocation_id.clone(), e);
        Ok(())
    }

    pub fn remove(&mut self, allocation_id: &str) -> Option<Entry> {
        let e = self.by_id.remove(allocation_id)?;
        if let Some(s) = self.by_node.get_mut(&e.allocation.node) {
            s.remove(allocation_id);
        }
        self.by_task.remove(&e.allocation.task_id);
        Some(e)
    }

    pub fn get(&self, allocation_id: &str) -> Option<&Entry> {
        self.by_id.get(allocation_id)
    }

    /// The one live allocation `task_id` holds, if any.
    pub fn of_task(&self, task_id: &str) -> Option<&Entry> {
        self.by_task.get(task_id).and_then(|id| self.by_id.get(id))
    }

    pub fn get_mut(&mut self, allocation_id: &str) -> Option<&mut Entry> {
        self.by_id.get_mut(allocation_id)
    }

    pub fn all(&self) -> impl Iterator<Item = &Entry> {
        self.by_id.values()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Allocations on `node`.
    pub fn on_node<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id))
    }

    /// Allocated totals on `node`.
    pub fn node_totals(&self, node: &str) -> NodeAllocated {
        let mut t = NodeAllocated::default();
        for e in self.on_node(node) {
            t.add(&e.allocation);
        }
        t
    }

    /// What `tenant` holds.
    pub fn tenant_usage(&self, tenant: &str) -> Usage {
        let mut u = Usage::default();
        for e in self
            .by_id
            .values()
            .filter(|e| e.allocation.tenant == tenant)
        {
            u += allocation_usage(e);
        }
        u
    }

    /// The pool's view of `node`: its inventory minus what the ledger holds there.
    pub fn pool_view(&self, name: &str, inv: &NodeInventory, healthy: bool) -> PoolNode {
        node_view(
            name,
            inv,
            healthy,
            self.on_node(name).map(|e| &e.allocation),
        )
    }
}

/// A node's view for placement with `held` allocations subtracted from its inventory.
pub fn node_view<'a>(
    name: &str,
    inv: &NodeInventory,
    healthy: bool,
    held: impl Iterator<Item = &'a Allocation>,
) -> PoolNode {
    let mut t = NodeAllocated::default();
    let mut exclusive = false;
    for a in held {
        t.add(a);
        exclusive |= a.exclusive;
    }
    PoolNode {
        name: name.to_string(),
        healthy,
        cordoned: false,
        gpus: inv
            .gpus
            .iter()
            .map(|g| GpuSlot {
                index: g.index,
                model: g.model.clone(),
                capacity: g.memory_total_mb,
                free: g
                    .memory_total_mb
                    .saturating_sub(t.gpu_memory_mb.get(&g.index).copied().unwrap_or(0)),
            })
            .collect(),
        cpu_capacity_milli: inv.cpu_cores as u64 * 1000,
        cpu_free_milli: (inv.cpu_cores as u64 * 1000).saturating_sub(t.cpu_milli),
        memory_capacity_mib: inv.memory_total_mb,
        memory_free_mib: inv.memory_total_mb.saturating_sub(t.memory_mb),
        disk_capacity_mib: inv.disk_offered_mb,
        disk_free_mib: inv.disk_offered_mb.saturating_sub(t.disk_mb),
        labels: inv.labels.clone(),
        exclusive_held: exclusive,
        allocations: t.count as u32,
        // The control plane fills this in from the node's cache report.
        weights: Default::default(),
        // And this, from the node's image report.
        images: Default::default(),
        container_runtime: caldera_spec::container::container_up(&inv.runtimes),
    }
}

/// Ids in a set, for "all but these" views.
pub type Excluded = HashSet<String>;

/// What one allocation counts against its tenant's quota: a shared GPU counts
/// as its fraction, whole GPUs as one each.
pub fn allocation_usage(e: &Entry) -> Usage {
    let a = &e.allocation;
    let gpus = match e.demand.gpu {
        GpuDemand::Share { milli } => milli as f64 / 1000.0,
        _ => a.gpus.len() as f64,
    };
    Usage {
        gpus,
        gpu_memory_gb: a.gpus.iter().map(|g| g.memory_mb as f64 / 1024.0).sum(),
        cpu_cores: a.cpu_milli as f64 / 1000.0,
        memory_gb: a.memory_mb as f64 / 1024.0,
        disk_gb: a.disk_mb as f64 / 1024.0,
    }
}

/// Allocated totals of one node, computed from the ledger.
#[derive(Debug, Clone, Default)]
pub struct NodeAllocated {
    pub gpu_memory_mb: BTreeMap<u32, u64>,
    pub cpu_milli: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
    pub count: usize,
}

impl NodeAllocated {
    pub fn add(&mut self, a: &Allocation) {
        for g in &a.gpus {
            *self.gpu_memory_mb.entry(g.index).or_default() += g.memory_mb;
        }
        self.cpu_milli += a.cpu_milli;
        self.memory_mb += a.memory_mb;
        self.disk_mb += a.disk_mb;
        self.count += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, task: &str) -> Entry {
        Entry {
            allocation: Allocation {
                allocation_id: id.into(),
                task_id: task.into(),
                tenant: "t".into(),
                node: "n".into(),
                gpus: Vec::new(),
                cpu_milli: 1000,
                memory_mb: 0,
                disk_mb: 0,
                exclusive: false,
                epoch: 0,
                created_ms: 0,
                borrowed: false,
                priority: 0,
                image_digest: None,
            },
            demand: Demand::default(),
            duration_ms: None,
            checkpoint_ms: 0,
            preempting: false,
            idle_exempt: false,
            attempt: 1,
        }
    }

    /// A duplicate id would replace an entry whose room then never comes
    /// back; a second live allocation would let one task hold two grants.
    /// Both are refused and leave the ledger as it was; once the first is
    /// removed, the task may hold a new one.
    #[test]
    fn refuses_a_duplicate_id_and_a_second_allocation_for_one_task() {
        let mut l = Ledger::default();
        assert_eq!(l.insert(entry("job.1", "job")), Ok(()));
        assert_eq!(
            l.insert(entry("job.1", "other")),
            Err(Refused::DuplicateId("job.1".into()))
        );
        assert_eq!(
            l.insert(entry("job.2", "job")),
            Err(Refused::TaskHoldsOne {
                task: "job".into(),
                holds: "job.1".into()
            })
        );
        assert_eq!(l.len(), 1);
        assert_eq!(l.node_totals("n").cpu_milli, 1000);
        assert!(l.remove("job.1").is_some());
        assert_eq!(l.insert(entry("job.2", "job")), Ok(()));
    }
}
