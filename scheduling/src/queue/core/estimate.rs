//! Start-time estimates for waiting tasks, like Slurm's `squeue --start`: walk
//! forward through the declared ends of running allocations (and of the queued
//! tasks planned ahead), and find when each task first fits on some node.
//! Work without a declared duration is assumed never to end.
use super::Core;
use crate::placement::{Demand, GpuUnit, Placement, Pool};
use crate::queue::ledger::{node_view, Entry};
use caldera_spec::{Allocation, GpuGrant, Usage};

/// Most nodes examined per estimate (the freest first), to bound the cost.
const MAX_NODES: usize = 64;

/// A queued task planned to run on `node` from `start` until `end`.
#[derive(Debug, Clone)]
pub struct Planned {
    pub node: String,
    pub start: u64,
    pub end: Option<u64>,
    pub allocation: Allocation,
}

/// Earliest start (and node) of each task in order, planning each one in before
/// estimating the next. `None`: it never fits given what is known.
pub fn queue_starts(
    core: &mut Core,
    tasks: &[(Demand, Option<u64>)],
    now_ms: u64,
) -> Vec<Option<(u64, String)>> {
    let mut planned: Vec<Planned> = Core::planned_none();
    let mut out = Vec::new();
    let nodes = candidate_nodes(core);
    for (demand, dur) in tasks {
        let mut best: Option<(u64, String, Allocation)> = None;
        for node in &nodes {
            if let Some((t, a)) = earliest_on(core, node, demand, &planned, now_ms) {
                if best.as_ref().is_none_or(|b| (t, node) < (b.0, &b.1)) {
                    best = Some((t, node.clone(), a));
                }
            }
        }
        match best {
            Some((t, node, allocation)) => {
                planned.push(Planned {
                    node: node.clone(),
                    start: t,
                    end: dur.map(|d| t + d),
                    allocation,
                });
                out.push(Some((t, node)));
            }
            None => out.push(None),
        }
    }
    out
}

fn candidate_nodes(core: &Core) -> Vec<String> {
    let mut nodes: Vec<(u64, String)> = core
        .healthy
        .iter()
        .filter(|n| core.placeable(n))
        .filter_map(|n| {
            let inv = core.inventories.get(n)?;
            let held: u64 = core
                .ledger
                .on_node(n)
                .map(|e| e.allocation.gpus.iter().map(|g| g.memory_mb).sum::<u64>())
                .sum();
            let total: u64 = inv.gpus.iter().map(|g| g.memory_total_mb).sum();
            Some((total.saturating_sub(held), n.clone()))
        })
        .collect();
    nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    nodes.into_iter().take(MAX_NODES).map(|(_, n)| n).collect()
}

/// When a running allocation is expected to free its room.
fn end_of(e: &Entry, core: &Core, now_ms: u64) -> Option<u64> {
    if e.preempting {
        return Some(now_ms + core.config.stop_grace_ms);
    }
    e.expected_end_ms()
}

/// The first time at which `demand` fits on `node` (now, or when a running
/// allocation or a planned task there ends), with the allocation it would get.
fn earliest_on(
    core: &mut Core,
    node: &str,
    demand: &Demand,
    planned: &[Planned],
    now_ms: u64,
) -> Option<(u64, Allocation)> {
    let inv = core.inventories.get(node)?.clone();
    let running: Vec<(Option<u64>, Allocation)> = core
        .ledger
        .on_node(node)
        .map(|e| (end_of(e, core, now_ms), e.allocation.clone()))
        .collect();
    let mine: Vec<&Planned> = planned.iter().filter(|p| p.node == node).collect();
    for t in room_changes(now_ms, &running, &mine) {
        let active = running
            .iter()
            .filter(|(end, _)| end.is_none_or(|e| e > t))
            .map(|(_, a)| a)
            .chain(
                mine.iter()
                    .filter(|p| p.start <= t && p.end.is_none_or(|e| e > t))
                    .map(|p| &p.allocation),
            );
        let mut view = node_view(node, &inv, true, active);
        view.weights = core.node_weights(node);
        let mut pool = Pool::new(GpuUnit::MiB);
        pool.upsert_node(view);
        if let Ok(p) = core.checker.place(&pool, demand) {
            return Some((t, planned_allocation(node, demand, &p, t)));
        }
    }
    None
}

/// When room on a node may grow: now, and every later declared end of what
/// runs or is planned there, ascending and distinct.
fn room_changes(now_ms: u64, running: &[(Option<u64>, Allocation)], mine: &[&Planned]) -> Vec<u64> {
    let mut times: Vec<u64> = vec![now_ms];
    times.extend(
        running
            .iter()
            .filter_map(|(end, _)| *end)
            .filter(|t| *t > now_ms),
    );
    times.extend(mine.iter().filter_map(|p| p.end));
    times.sort_unstable();
    times.dedup();
    times
}

/// The stand-in allocation of a planned task: only what later estimates
/// subtract from the node (its GPU units, CPU, memory, disk, exclusivity).
fn planned_allocation(node: &str, demand: &Demand, p: &Placement, start_ms: u64) -> Allocation {
    let gpus = p
        .gpus
        .iter()
        .map(|(i, units)| GpuGrant {
            index: *i,
            uuid: String::new(),
            model: String::new(),
            memory_mb: *units,
            simulated: false,
        })
        .collect();
    Allocation {
        allocation_id: String::new(),
        task_id: String::new(),
        tenant: String::new(),
        node: node.to_string(),
        gpus,
        cpu_milli: demand.cpu_milli,
        memory_mb: demand.memory_mib,
        disk_mb: demand.disk_mib,
        exclusive: demand.exclusive,
        epoch: 0,
        created_ms: start_ms,
        borrowed: false,
        priority: 0,
        image_digest: None,
    }
}

/// When an over-quota task of `tenant` asking `request` is expected to be
/// admitted: as the tenant's own running work ends (by declared durations).
pub fn quota_start(core: &Core, tenant: &str, request: &Usage, now_ms: u64) -> Option<u64> {
    let mut mine: Vec<(Option<u64>, Usage)> = core
        .ledger
        .all()
        .filter(|e| e.allocation.tenant == tenant)
        .map(|e| {
            (
                end_of(e, core, now_ms),
                crate::queue::ledger::allocation_usage(e),
            )
        })
        .collect();
    mine.sort_by_key(|(end, _)| end.unwrap_or(u64::MAX));
    let mut usage = core.ledger.tenant_usage(tenant);
    for (end, u) in mine {
        let end = end?;
        usage -= u;
        let mut after = usage;
        after += *request;
        if core.admits(tenant, &after) {
            return Some(end.max(now_ms));
        }
    }
    None
}
