//! `GET /v1/utilization`: capacity, allocated and measured use per dimension,
//! for the pool, by node, by tenant and by GPU model.
use super::Scheduler;
use crate::protocol::scheduler::QueryUtilization;
use crate::views::{Dims, Keyed, Utilization};
use actix::prelude::*;
use caldera_scheduling::queue::ledger::allocation_usage;
use std::collections::BTreeMap;

impl Handler<QueryUtilization> for Scheduler {
    type Result = MessageResult<QueryUtilization>;
    fn handle(&mut self, _: QueryUtilization, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.utilization())
    }
}

impl Scheduler {
    fn utilization(&self) -> Utilization {
        let mut total = Dims::default();
        let mut by_node: BTreeMap<String, Dims> = BTreeMap::new();
        let mut by_model: BTreeMap<String, Dims> = BTreeMap::new();
        let mut by_tenant: BTreeMap<String, Dims> = BTreeMap::new();
        let mut simulated = false;
        for name in self.core.healthy_nodes() {
            let Some(inv) = self.core.inventory(name) else {
                continue;
            };
            let m = self.metrics.get(name).cloned().unwrap_or_default();
            let totals = self.core.ledger().node_totals(name);
            let mut d = Dims::default();
            for g in &inv.gpus {
                simulated |= g.simulated;
                let live = m.gpus.iter().find(|l| l.index == g.index);
                let alloc_mb = totals.gpu_memory_mb.get(&g.index).copied().unwrap_or(0) as f64;
                let mut gd = Dims::default();
                gd.gpus.capacity = 1.0;
                gd.gpus.allocated = (alloc_mb / g.memory_total_mb.max(1) as f64).min(1.0);
                gd.gpus.used = live.map_or(0.0, |l| l.utilization_pct as f64 / 100.0);
                gd.gpu_memory_mb.capacity = g.memory_total_mb as f64;
                gd.gpu_memory_mb.allocated = alloc_mb;
                gd.gpu_memory_mb.used = live.map_or(0.0, |l| l.memory_used_mb as f64);
                add(&mut d, &gd);
                add(by_model.entry(g.model.clone()).or_default(), &gd);
            }
            d.cpu_cores.capacity = inv.cpu_cores as f64;
            d.cpu_cores.allocated = totals.cpu_milli as f64 / 1000.0;
            d.cpu_cores.used = m.cpu_used_pct as f64 / 100.0 * inv.cpu_cores as f64;
            d.memory_mb.capacity = inv.memory_total_mb as f64;
            d.memory_mb.allocated = totals.memory_mb as f64;
            d.memory_mb.used = m.memory_used_mb as f64;
            d.disk_mb.capacity = inv.disk_offered_mb as f64;
            d.disk_mb.allocated = totals.disk_mb as f64;
            d.disk_mb.used = inv.disk_offered_mb.saturating_sub(m.disk_free_mb) as f64;
            add(&mut total, &d);
            by_node.insert(name.clone(), d);
        }
        for e in self.core.ledger().all() {
            let u = allocation_usage(e);
            let measured = self.usage.get(&e.allocation.allocation_id);
            let d = by_tenant.entry(e.allocation.tenant.clone()).or_default();
            d.gpus.allocated += u.gpus;
            d.gpu_memory_mb.allocated += u.gpu_memory_gb * 1024.0;
            d.cpu_cores.allocated += u.cpu_cores;
            d.memory_mb.allocated += u.memory_gb * 1024.0;
            d.disk_mb.allocated += u.disk_gb * 1024.0;
            if let Some(m) = measured {
                d.gpus.used += m.gpu_utilization_pct as f64 / 100.0 * u.gpus;
                d.gpu_memory_mb.used += m.gpu_memory_used_mb as f64;
                d.cpu_cores.used += m.cpu_pct as f64 / 100.0;
                d.memory_mb.used += m.memory_mb as f64;
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
}

fn add(into: &mut Dims, d: &Dims) {
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
