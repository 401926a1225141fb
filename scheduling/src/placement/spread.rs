//! Replica spread: replicas of one service go on distinct
//! GPUs, and on distinct nodes where possible, so one GPU (or node) fault
//! never takes a whole service down.
//!
//! The rule, in the order it is tried:
//! 1. **Spread.** GPUs already holding a replica of the service are hidden,
//!    and nodes already holding `max_per_node` of its replicas are left out.
//! 2. **Fallback** (only when the user did not set `max_replicas_per_node`,
//!    i.e. the default of 1 "where capacity allows"): if no node can host
//!    the replica under 1., nodes are no longer left out, but GPUs holding a
//!    replica stay hidden. The placement is marked [`Spread::Fallback`]
//!    (its placement event says `placed without spread`).
//! 3. Otherwise the replica waits; its pending reason counts the nodes that
//!    were turned down for spread (`replica_gpu`, `replica_node`).
//!
//! Two replicas of one service never share a GPU, in either pass. The hiding
//! is done on the pool itself (the nodes' views are swapped for masked ones
//! and put back before returning), so the filters, scores and caches of the
//! [`Placer`] apply unchanged.
use std::collections::{BTreeMap, BTreeSet};

use super::filter;
use super::placer::Placer;
use super::pool::Pool;
use super::rejections::{Rejections, CORDONED, REPLICA_GPU, REPLICA_NODE};
use super::types::{Demand, NodeId, NodeView, Placement};

/// What a node already holds of the service being placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeldReplicas {
    /// Number of the service's replicas on the node.
    pub replicas: u32,
    /// Device indices those replicas use.
    pub gpus: BTreeSet<u32>,
}

/// Where a service's other replicas are, and how many one node may hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaSpread {
    /// Per node holding replicas of the service.
    pub held: BTreeMap<NodeId, HeldReplicas>,
    /// Replicas of the service one node may hold (at least 1).
    pub max_per_node: u32,
    /// The limit was set by the user: a hard limit, no fallback.
    pub hard: bool,
}

/// How a spread placement came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// On a GPU and node within the limit.
    Spread,
    /// On a node already at the per-node limit (still a GPU of its own):
    /// no node within the limit could host it.
    Fallback,
}

impl Spread {
    /// The note a placement event carries, if any.
    pub fn note(self) -> Option<&'static str> {
        match self {
            Spread::Spread => None,
            Spread::Fallback => Some("placed without spread"),
        }
    }
}

impl Placer {
    /// Places one replica of a service under `spread` (see the module
    /// comment). The pool is changed only while deciding: it is as it was
    /// when this returns.
    pub fn place_spread(
        &mut self,
        pool: &mut Pool,
        demand: &Demand,
        spread: &ReplicaSpread,
    ) -> Result<(Placement, Spread), Rejections> {
        if spread.held.is_empty() {
            return self.place(pool, demand).map(|p| (p, Spread::Spread));
        }
        let first = self.place_masked(pool, demand, spread, true);
        match first {
            Ok(p) => Ok((p, Spread::Spread)),
            Err(r) if spread.hard => Err(r),
            Err(_) => self
                .place_masked(pool, demand, spread, false)
                .map(|p| (p, Spread::Fallback)),
        }
    }

    /// One pass: hide the service's GPUs (and, with `limit_nodes`, the nodes
    /// at the limit), place, put the pool back, and recount the nodes that
    /// only the hiding turned down under the spread reasons.
    fn place_masked(
        &mut self,
        pool: &mut Pool,
        demand: &Demand,
        spread: &ReplicaSpread,
        limit_nodes: bool,
    ) -> Result<Placement, Rejections> {
        let mut saved: Vec<(NodeId, NodeView)> = Vec::new();
        for (&id, held) in &spread.held {
            let Some(view) = pool.node(id).cloned() else {
                continue;
            };
            let at_limit = limit_nodes && held.replicas >= spread.max_per_node.max(1);
            pool.upsert_node(masked(&view, held, at_limit));
            saved.push((id, view));
        }
        let result = self.place(pool, demand);
        let mut rejections = match result {
            Ok(p) => {
                restore(pool, saved);
                return Ok(p);
            }
            Err(r) => r,
        };
        for (id, view) in &saved {
            let masked_reason = pool
                .class_of(*id)
                .and_then(|c| filter::feasible(&c.state, demand).err());
            let at_limit = limit_nodes
                && spread
                    .held
                    .get(id)
                    .is_some_and(|h| h.replicas >= spread.max_per_node.max(1));
            let Some(reason) = masked_reason else {
                continue;
            };
            // Cordoned by this decision only: the limit turned it down.
            if at_limit && !view.cordoned && reason == CORDONED {
                rejections.recount(reason, REPLICA_NODE);
                continue;
            }
            // What the node would say unmasked: its own state, back in place.
            pool.upsert_node(view.clone());
            let free_otherwise = pool
                .class_of(*id)
                .is_some_and(|c| filter::feasible(&c.state, demand).is_ok());
            if free_otherwise {
                rejections.recount(reason, REPLICA_GPU);
            }
        }
        restore(pool, saved);
        rejections.spread_limit = Some(spread.max_per_node.max(1));
        Err(rejections)
    }
}

/// `view` with the service's GPUs taken (no room left on them) and, when
/// `at_limit`, cordoned for this decision.
fn masked(view: &NodeView, held: &HeldReplicas, at_limit: bool) -> NodeView {
    let mut v = view.clone();
    for g in &mut v.gpus {
        if held.gpus.contains(&g.index) {
            g.free = 0;
        }
    }
    if at_limit {
        v.cordoned = true;
    }
    v
}

fn restore(pool: &mut Pool, saved: Vec<(NodeId, NodeView)>) {
    for (_, view) in saved {
        pool.upsert_node(view);
    }
}

#[cfg(test)]
#[path = "spread_tests.rs"]
mod tests;
