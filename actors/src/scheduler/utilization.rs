//! `GET /v1/utilization`: capacity, allocated and measured use per dimension,
//! for the pool, by node, by tenant and by GPU model.
//!
//! One accounting rule for every view, so the views add up: a GPU counts as
//! allocated by the fraction of its memory the ledger holds on it
//! ([`gpu_fraction`]), whoever asks — so by tenant, by node, by model and the
//! total add up to the same figure. Measured use on a node with simulated
//! hardware is its workloads' own process trees (what each allocation reports),
//! never the host's totals scaled onto simulated cores: two simulated nodes on
//! one host would otherwise each count the whole host.
use super::Scheduler;
use crate::protocol::scheduler::QueryUtilization;
use crate::views::{Dim, Dims, Keyed, Utilization};
use actix::prelude::*;
use caldera_spec::wire::AllocationUse;
use caldera_spec::{Allocation, GpuInfo, NodeInventory, NodeMetrics, Usage};
use std::collections::{BTreeMap, HashMap};

impl Handler<QueryUtilization> for Scheduler {
    type Result = MessageResult<QueryUtilization>;
    fn handle(&mut self, _: QueryUtilization, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.utilization())
    }
}

/// The share of one GPU that `allocated_mb` of its memory is: the one figure
/// every view sums.
pub fn gpu_fraction(allocated_mb: u64, gpu: &GpuInfo) -> f64 {
    (allocated_mb as f64 / gpu.memory_total_mb.max(1) as f64).min(1.0)
}

/// What one allocation holds, by the one accounting rule: each GPU it holds
/// by the fraction of that GPU's memory ([`gpu_fraction`]), the rest as
/// granted. Every per-allocation view sums this — utilisation by tenant and
/// the idle inspector's usage samples (`GET /v1/tenants/{name}/usage`) — so
/// they agree with each other and with the per-node and per-model figures.
/// A GPU `inv` does not list (its node is unknown) counts whole.
pub(super) fn allocated_use(a: &Allocation, inv: Option<&NodeInventory>) -> Usage {
    let gpus = a
        .gpus
        .iter()
        .map(|g| {
            inv.and_then(|inv| gpu_of(inv, g.index))
                .map_or(1.0, |info| gpu_fraction(g.memory_mb, info))
        })
        .sum();
    Usage {
        gpus,
        gpu_memory_gb: a.gpus.iter().map(|g| g.memory_mb).sum::<u64>() as f64 / 1024.0,
        cpu_cores: a.cpu_milli as f64 / 1000.0,
        memory_gb: a.memory_mb as f64 / 1024.0,
        disk_gb: a.disk_mb as f64 / 1024.0,
    }
}

/// What an allocation measurably uses, in the dimensions of its grant: its
/// GPU fraction scaled by utilisation, the GPU memory, cores and memory used.
/// The one rule for "used" that the utilisation views and the idle
/// inspector's usage samples share.
pub(super) fn measured_use(granted: &Usage, m: &AllocationUse) -> Usage {
    Usage {
        gpus: granted.gpus * (m.gpu_utilization_pct as f64 / 100.0).min(1.0),
        gpu_memory_gb: m.gpu_memory_used_mb as f64 / 1024.0,
        cpu_cores: m.cpu_pct as f64 / 100.0,
        memory_gb: m.memory_mb as f64 / 1024.0,
        disk_gb: 0.0,
    }
}

/// The GPU of `inv` with `index`.
fn gpu_of(inv: &NodeInventory, index: u32) -> Option<&GpuInfo> {
    inv.gpus.iter().find(|g| g.index == index)
}

impl Scheduler {
    pub(super) fn utilization(&self) -> Utilization {
        let mut total = Dims::default();
        let mut by_node: BTreeMap<String, Dims> = BTreeMap::new();
        let mut by_model: BTreeMap<String, Dims> = BTreeMap::new();
        let mut by_tenant: BTreeMap<String, Dims> = BTreeMap::new();
        let mut simulated = false;
        for name in self.core.healthy_nodes() {
            let Some(inv) = self.core.inventory(name) else {
                continue;
            };
            simulated |= inv.gpus.iter().any(|g| g.simulated);
            let allocations: Vec<&Allocation> = self
                .core
                .ledger()
                .on_node(name)
                .map(|e| &e.allocation)
                .collect();
            let m = self.metrics.get(name).cloned().unwrap_or_default();
            let d = self.node_dims(inv, &m, &allocations, &mut by_model);
            add(&mut total, &d);
            by_node.insert(name.clone(), d);
            for a in allocations {
                let t = by_tenant.entry(a.tenant.clone()).or_default();
                add(
                    t,
                    &allocation_dims(a, inv, self.usage.get(&a.allocation_id)),
                );
            }
        }
        let keyed = |m: BTreeMap<String, Dims>| {
            m.into_iter()
                .map(|(key, dims)| Keyed { key, dims })
                .collect()
        };
        Utilization {
            total,
            by_node: keyed(by_node),
            by_tenant: keyed(by_tenant),
            by_gpu_model: keyed(by_model),
            simulated_gpus: simulated,
        }
    }

    /// One node: capacity from its inventory, allocated from the ledger, used
    /// from its metrics (real hosts) or its workloads (simulated hosts). Adds
    /// each GPU to `by_model` as it goes.
    fn node_dims(
        &self,
        inv: &NodeInventory,
        m: &NodeMetrics,
        allocations: &[&Allocation],
        by_model: &mut BTreeMap<String, Dims>,
    ) -> Dims {
        let mut alloc_mb: HashMap<u32, u64> = HashMap::new();
        for a in allocations {
            for g in &a.gpus {
                *alloc_mb.entry(g.index).or_default() += g.memory_mb;
            }
        }
        let mut d = Dims::default();
        for g in &inv.gpus {
            let live = m.gpus.iter().find(|l| l.index == g.index);
            let mb = alloc_mb.get(&g.index).copied().unwrap_or(0);
            let gd = Dims {
                gpus: Dim {
                    capacity: 1.0,
                    allocated: gpu_fraction(mb, g),
                    used: live.map_or(0.0, |l| l.utilization_pct as f64 / 100.0),
                },
                gpu_memory_mb: Dim {
                    capacity: g.memory_total_mb as f64,
                    allocated: mb as f64,
                    used: live.map_or(0.0, |l| l.memory_used_mb as f64),
                },
                ..Dims::default()
            };
            add(&mut d, &gd);
            add(by_model.entry(g.model.clone()).or_default(), &gd);
        }
        let (cpu_used, memory_used) = if inv.simulated_host {
            let mut cpu = 0.0;
            let mut mem = 0.0;
            for u in allocations
                .iter()
                .filter_map(|a| self.usage.get(&a.allocation_id))
            {
                cpu += u.cpu_pct as f64 / 100.0;
                mem += u.memory_mb as f64;
            }
            (cpu, mem)
        } else {
            (
                m.cpu_used_pct as f64 / 100.0 * inv.cpu_cores as f64,
                m.memory_used_mb as f64,
            )
        };
        d.cpu_cores = Dim {
            capacity: inv.cpu_cores as f64,
            allocated: allocations.iter().map(|a| a.cpu_milli).sum::<u64>() as f64 / 1000.0,
            used: cpu_used,
        };
        d.memory_mb = Dim {
            capacity: inv.memory_total_mb as f64,
            allocated: allocations.iter().map(|a| a.memory_mb).sum::<u64>() as f64,
            used: memory_used,
        };
        d.disk_mb = Dim {
            capacity: inv.disk_offered_mb as f64,
            allocated: allocations.iter().map(|a| a.disk_mb).sum::<u64>() as f64,
            used: if inv.simulated_host {
                0.0
            } else {
                inv.disk_offered_mb.saturating_sub(m.disk_free_mb) as f64
            },
        };
        d
    }
}

/// One allocation's allocated and measured dimensions (its tenant's share of
/// the pool), by the same rule as the nodes': a GPU by its memory fraction.
pub(super) fn allocation_dims(
    a: &Allocation,
    inv: &NodeInventory,
    measured: Option<&AllocationUse>,
) -> Dims {
    let granted = allocated_use(a, Some(inv));
    let mut d = Dims::default();
    d.gpus.allocated = granted.gpus;
    d.gpu_memory_mb.allocated = a.gpus.iter().map(|g| g.memory_mb).sum::<u64>() as f64;
    d.cpu_cores.allocated = a.cpu_milli as f64 / 1000.0;
    d.memory_mb.allocated = a.memory_mb as f64;
    d.disk_mb.allocated = a.disk_mb as f64;
    if let Some(m) = measured {
        let u = measured_use(&granted, m);
        d.gpus.used = u.gpus;
        d.gpu_memory_mb.used = u.gpu_memory_gb * 1024.0;
        d.cpu_cores.used = u.cpu_cores;
        d.memory_mb.used = u.memory_gb * 1024.0;
    }
    d
}

pub(super) fn add(into: &mut Dims, d: &Dims) {
    for (a, b) in [
        (&mut into.gpus, &d.gpus),
        (&mut into.gpu_memory_mb, &d.gpu_memory_mb),
        (&mut into.cpu_cores, &d.cpu_cores),
        (&mut into.memory_mb, &d.memory_mb),
        (&mut into.disk_mb, &d.disk_mb),
    ] {
        a.capacity += b.capacity;
        a.allocated += b.allocated;
        a.used += b.used;
    }
}
