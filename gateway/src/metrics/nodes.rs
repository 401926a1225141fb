//! Per node and per GPU: health, GPU memory (total, allocated, used),
//! utilisation, and each node's weight cache with its counters. Every GPU
//! series carries `simulated`, so a simulated GPU's figures are never read
//! as a real device's.
use super::{gauges, mib_bytes};
use caldera_actors::model::fleet::NodeCache;
use caldera_actors::views::NodeView;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Node {
    node: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeHealth {
    node: String,
    state: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeRuntime {
    node: String,
    /// `container` or `process`.
    runtime: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Gpu {
    node: String,
    gpu: u32,
    model: String,
    simulated: bool,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Warmup {
    node: String,
    source: &'static str,
}

/// The states of `caldera_node_health`, one series each per node.
pub const HEALTH_STATES: [&str; 6] = [
    "healthy",
    "cordoned",
    "draining",
    "disconnected",
    "lost",
    "revoked",
];

/// The one state a node is in: revoked or lost first, then a node whose
/// agent is not connected (yet: after a restart, within the boot grace),
/// then drained or cordoned, else healthy.
pub fn health(state: &str, connected: bool, cordon: Option<&str>) -> &'static str {
    match (state, connected, cordon) {
        ("revoked", _, _) => "revoked",
        ("lost", _, _) => "lost",
        (_, false, _) => "disconnected",
        (_, true, Some(c)) if c.starts_with("drained") => "draining",
        (_, true, Some(_)) => "cordoned",
        _ => "healthy",
    }
}

/// Node health and the GPU families.
pub fn nodes(r: &mut Registry, nodes: &[NodeView]) {
    let health_f = gauges::<NodeHealth>(
        r,
        "caldera_node_health",
        "1 for the state each node is in (healthy, cordoned, draining, disconnected, lost, revoked), 0 for the others",
        None,
    );
    let allocations = gauges::<Node>(
        r,
        "caldera_node_allocations",
        "Live allocations on each node",
        None,
    );
    let runtime_up = gauges::<NodeRuntime>(
        r,
        "caldera_node_runtime_up",
        "1 when the node is connected and its runtime (container: podman; process: the shim) can run workloads, 0 when it cannot or the node is away",
        None,
    );
    let gpu = |r: &mut Registry, name, help, unit| gauges::<Gpu>(r, name, help, unit);
    let total = gpu(
        r,
        "caldera_gpu_memory_total",
        "Memory of each GPU",
        Some(Unit::Bytes),
    );
    let allocated = gpu(
        r,
        "caldera_gpu_memory_allocated",
        "Memory of each GPU the ledger holds for allocations",
        Some(Unit::Bytes),
    );
    let used = gpu(
        r,
        "caldera_gpu_memory_used",
        "Memory of each GPU in use as its agent measures it (NVML, or the workloads of a simulated GPU)",
        Some(Unit::Bytes),
    );
    let util = gpu(
        r,
        "caldera_gpu_utilization_ratio",
        "Utilisation of each GPU as its agent measures it (0..1)",
        None,
    );
    let healthy = gpu(
        r,
        "caldera_gpu_healthy",
        "1 when the GPU's node is connected and its agent's probe of the GPU answered, 0 when faulted or its node is away",
        None,
    );
    for n in nodes {
        let state = health(&n.state, n.connected, n.cordon.as_deref());
        for s in HEALTH_STATES {
            health_f
                .get_or_create(&NodeHealth {
                    node: n.name.clone(),
                    state: s,
                })
                .set(if s == state { 1.0 } else { 0.0 });
        }
        allocations
            .get_or_create(&Node {
                node: n.name.clone(),
            })
            .set(n.allocations as f64);
        let node_up = matches!(state, "healthy" | "cordoned" | "draining");
        for rt in &n.runtimes {
            runtime_up
                .get_or_create(&NodeRuntime {
                    node: n.name.clone(),
                    runtime: rt.kind.as_str(),
                })
                .set(if node_up && rt.up { 1.0 } else { 0.0 });
        }
        for g in &n.gpus {
            let l = Gpu {
                node: n.name.clone(),
                gpu: g.index,
                model: g.model.clone(),
                simulated: g.simulated,
            };
            let held = g.memory_total_mb.saturating_sub(g.memory_free_mb);
            total
                .get_or_create(&l)
                .set(mib_bytes(g.memory_total_mb as f64));
            allocated.get_or_create(&l).set(mib_bytes(held as f64));
            used.get_or_create(&l)
                .set(mib_bytes(g.memory_used_mb as f64));
            util.get_or_create(&l)
                .set(f64::from(g.utilization_pct.min(100)) / 100.0);
            let ok = node_up && !g.faulted;
            healthy.get_or_create(&l).set(if ok { 1.0 } else { 0.0 });
        }
    }
}

/// Each node's weight cache: its size, and the counters its agent keeps
/// (since its data dir was made; a fresh data dir starts them again, which
/// Prometheus reads as a counter reset).
pub fn caches(r: &mut Registry, caches: &BTreeMap<String, NodeCache>) {
    let capacity = gauges::<Node>(
        r,
        "caldera_weight_cache_capacity",
        "Size cap of each node's weight cache (--cache-gb)",
        Some(Unit::Bytes),
    );
    let in_cache = gauges::<Node>(
        r,
        "caldera_weight_cache_used",
        "Bytes of verified model weights in each node's cache",
        Some(Unit::Bytes),
    );
    let hits = Family::<Node, Counter>::default();
    let misses = Family::<Node, Counter>::default();
    let warmup = Family::<Warmup, Counter>::default();
    for (name, c) in caches {
        let node = Node { node: name.clone() };
        let k = &c.report.counters;
        capacity
            .get_or_create(&node)
            .set(c.report.capacity_bytes as f64);
        in_cache
            .get_or_create(&node)
            .set(c.report.used_bytes as f64);
        hits.get_or_create(&node).inc_by(k.hits);
        misses.get_or_create(&node).inc_by(k.misses);
        for (source, bytes) in [
            ("origin", k.bytes_from_origin),
            ("peer", k.bytes_from_peers),
        ] {
            warmup
                .get_or_create(&Warmup {
                    node: name.clone(),
                    source,
                })
                .inc_by(bytes);
        }
    }
    r.register(
        "caldera_weight_cache_hits",
        "Starts and warm commands that found a verified copy of their weights in the node's cache",
        hits,
    );
    r.register(
        "caldera_weight_cache_misses",
        "Starts and warm commands that had to fetch their weights",
        misses,
    );
    r.register_with_unit(
        "caldera_warmup",
        "Weight bytes fetched into each node's cache, by source (origin: shared storage, peer: another node)",
        Unit::Bytes,
        warmup,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_in_exactly_one_health_state() {
        // (record state, connected, cordon) -> health
        let rows = [
            ("ready", true, None, "healthy"),
            ("ready", true, Some("cordoned"), "cordoned"),
            ("ready", true, Some("drained"), "draining"),
            ("ready", true, Some("drained (agent stopping)"), "draining"),
            ("ready", false, None, "disconnected"),
            ("ready", false, Some("cordoned"), "disconnected"),
            ("lost", false, Some("cordoned"), "lost"),
            ("revoked", false, None, "revoked"),
        ];
        for (state, connected, cordon, want) in rows {
            assert_eq!(
                health(state, connected, cordon),
                want,
                "{state} {connected} {cordon:?}"
            );
            assert!(HEALTH_STATES.contains(&want));
        }
    }
}
