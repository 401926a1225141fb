//! What `/metrics` reads on a scrape: the pool's state, not its events
//! (those are counted as they happen, in [`crate::metrics`]). Read afresh
//! each time, so a node or tenant that is gone leaves no stale series; the
//! reads run concurrently (one Scheduler turn, one snapshot round over the
//! NodeActors and TenantActors) and nothing here touches sled.
use super::{ControlPlane, PoolStats};
use crate::errors::Result;
use crate::model::fleet::NodeCache;
use crate::protocol::scheduler::QueryPoolMetrics;
use crate::views::{NodeView, PoolMetrics};
use caldera_spec::TenantRecord;
use std::collections::BTreeMap;

/// One scrape's state of the control plane.
#[derive(Debug, Clone)]
pub struct Scrape {
    pub stats: PoolStats,
    pub pool: PoolMetrics,
    /// Every registered node (lost ones too), by name.
    pub nodes: Vec<NodeView>,
    /// Every tenant with its guarantee and borrowing limit, by name.
    pub tenants: Vec<TenantRecord>,
    /// Each node's weight cache and its counters, as last reported.
    pub caches: BTreeMap<String, NodeCache>,
    /// Refused node reports as `(node, reason, count)`.
    pub refusals: Vec<(String, &'static str, u64)>,
    /// Actor rebuilds as `(kind, count)`.
    pub rebuilds: Vec<(&'static str, u64)>,
}

impl ControlPlane {
    /// Reads the state `/metrics` shows.
    pub async fn scrape(&self) -> Result<Scrape> {
        let (stats, pool, nodes, tenants) = futures_util::future::join4(
            self.stats(),
            self.sh.scheduler.send(QueryPoolMetrics),
            self.nodes(),
            self.tenants(),
        )
        .await;
        Ok(Scrape {
            stats: stats?,
            pool: pool?,
            nodes: nodes?,
            tenants: tenants?,
            caches: self.sh.fleet.all(),
            refusals: self.node_refusals(),
            rebuilds: self.actor_rebuilds(),
        })
    }
}
