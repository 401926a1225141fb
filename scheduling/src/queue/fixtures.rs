//! Builders the queue's tests share: A100 nodes, task specs written the way a
//! user writes them, and readers of a pass's decisions.
use super::core::{build_allocation, Core, CoreConfig, Decision, WaitingTask};
use crate::placement::{NodeId, Placement, PolicyName};
use caldera_spec::{GpuInfo, NodeInventory, TaskSpec};

/// A node of `gpus` 80 GiB A100s (indices 0.., uuids `G0`..), 64 cores, 512 GiB.
pub fn node(gpus: u32) -> NodeInventory {
    NodeInventory {
        runtimes: Vec::new(),
        hostname: "n".into(),
        gpus: (0..gpus)
            .map(|i| GpuInfo {
                index: i,
                uuid: format!("G{i}"),
                model: "A100".into(),
                memory_total_mb: 81920,
                memory_used_mb: 0,
                utilization_pct: 0,
                simulated: true,
            })
            .collect(),
        cpu_cores: 64,
        memory_total_mb: 512 * 1024,
        disks: vec![],
        disk_offered_mb: 1 << 20,
        labels: Default::default(),
        simulated_host: true,
        isolation: "none".into(),
        gpu_source: "simulated".into(),
    }
}

/// A training task asking `gpus` whole GPUs and one core.
pub fn spec(id: &str, gpus: u32, priority: &str, duration: Option<&str>) -> TaskSpec {
    let dur = duration
        .map(|d| format!(r#","duration":"{d}""#))
        .unwrap_or_default();
    let body = format!(
        r#"{{"task_id":"{id}","task_type":"training","priority":"{priority}","resources":{{"gpu":{{"count":{gpus}}},"cpu":{{"cores":1}}}}{dur}}}"#
    );
    caldera_spec::parse_task_spec(body.as_bytes()).unwrap()
}

pub fn waiting(tenant: &str, s: TaskSpec, seq: u64, attempt: u32) -> WaitingTask {
    WaitingTask {
        task_id: s.task_id.clone(),
        tenant: tenant.into(),
        spec: s,
        seq,
        attempt,
        queued_ms: 0,
    }
}

pub fn submit(core: &mut Core, tenant: &str, s: TaskSpec, seq: u64, attempt: u32) {
    core.enqueue(waiting(tenant, s, seq, attempt));
}

/// Task ids the pass placed, in order.
pub fn placed(d: &[Decision]) -> Vec<String> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Place { allocation, .. } => Some(allocation.task_id.clone()),
            _ => None,
        })
        .collect()
}

/// Task ids the pass preempted, in order.
pub fn victims(d: &[Decision]) -> Vec<String> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Preempt { victim, .. } => Some(victim.task_id.clone()),
            _ => None,
        })
        .collect()
}

/// A best-fit core with these `(name, GPUs)` nodes up.
pub fn core_with(nodes: &[(&str, u32)]) -> Core {
    let mut c = Core::new(PolicyName::BestFit, 1, CoreConfig::default());
    for (n, g) in nodes {
        c.node_up(n, node(*g));
    }
    c
}

/// Restores `w` as running on `node`'s whole GPUs `gpus` since t = 0, last
/// checkpointed at `checkpoint_ms`; its allocation id is `task_id.attempt`.
pub fn running(
    core: &mut Core,
    node: &str,
    w: WaitingTask,
    gpus: &[u32],
    borrowed: bool,
    checkpoint_ms: u64,
) {
    let inv = core.inventory(node).expect("node is known").clone();
    let demand = core.demand_for(&w.spec);
    let p = Placement {
        node: NodeId(0),
        gpus: gpus.iter().map(|&i| (i, 81920)).collect(),
    };
    let a = build_allocation(&inv, node, &w, &demand, &p, borrowed, 0);
    core.restore(a, &w.spec, Some(checkpoint_ms), w.attempt)
        .expect("the fixture's allocation is new");
}

/// (node, reason note) of each placement of a pass.
pub fn placements(d: &[Decision]) -> Vec<(String, Option<&'static str>)> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Place { allocation, note } => Some((allocation.node.clone(), *note)),
            _ => None,
        })
        .collect()
}
