//! The pool as `/metrics` shows it ([`QueryPoolMetrics`]): the utilisation
//! views, each tenant's borrowed and idle holdings, and the queue by
//! priority, read in one turn of the Scheduler so they agree. Allocations
//! are counted as the utilisation views count them (on healthy nodes, a GPU
//! by its memory fraction), so a tenant's borrowed and idle figures are
//! parts of its allocated one.
use super::utilization::{add, allocation_dims};
use super::Scheduler;
use crate::protocol::scheduler::QueryPoolMetrics;
use crate::views::{Dims, Keyed, PoolMetrics};
use actix::prelude::*;
use std::collections::BTreeMap;

impl Handler<QueryPoolMetrics> for Scheduler {
    type Result = MessageResult<QueryPoolMetrics>;
    fn handle(&mut self, _: QueryPoolMetrics, _: &mut Context<Self>) -> Self::Result {
        let (borrowed, idle) = self.borrowed_and_idle();
        MessageResult(PoolMetrics {
            utilization: self.utilization(),
            borrowed,
            idle,
            queue: self.core.queue_depths(),
            now_ms: self.clock.now_ms(),
        })
    }
}

impl Scheduler {
    /// Per tenant: what its borrowed allocations hold, and what its
    /// allocations measured idle hold (an allocation not measured yet is
    /// neither busy nor idle: it is left out).
    fn borrowed_and_idle(&self) -> (Vec<Keyed<Dims>>, Vec<Keyed<Dims>>) {
        let mut borrowed: BTreeMap<String, Dims> = BTreeMap::new();
        let mut idle: BTreeMap<String, Dims> = BTreeMap::new();
        for name in self.core.healthy_nodes() {
            let Some(inv) = self.core.inventory(name) else {
                continue;
            };
            for e in self.core.ledger().on_node(name) {
                let a = &e.allocation;
                let measured = self.usage.get(&a.allocation_id);
                let d = allocation_dims(a, inv, measured);
                if a.borrowed {
                    add(borrowed.entry(a.tenant.clone()).or_default(), &d);
                }
                if measured.is_some_and(|m| !self.idle.is_busy(a, m)) {
                    add(idle.entry(a.tenant.clone()).or_default(), &d);
                }
            }
        }
        let keyed = |m: BTreeMap<String, Dims>| {
            m.into_iter()
                .map(|(key, dims)| Keyed { key, dims })
                .collect()
        };
        (keyed(borrowed), keyed(idle))
    }
}
