//! Per-GPU fit: which GPUs of a node can take a demand. The check is per GPU,
//! never on node totals: two GPUs with 10 GB free each cannot host a 20 GB task.
use super::errors::PlacementError;
use super::rejections::{GPU_MODEL, GPU_ROOM, WHOLE_GPUS};
use super::state::{GpuState, NodeState};
use super::types::{Demand, NodeView, Placement};

/// Whether GPU `g` can take one GPU's share of `demand`, and how many units.
pub fn gpu_take(g: &GpuState, demand: &Demand) -> Option<u64> {
    if !demand.allows_model(&g.model) {
        return None;
    }
    let (need, whole) = demand.gpu.per_gpu_need(g.capacity)?;
    let fits = if whole { g.is_idle() } else { g.free >= need };
    fits.then_some(need)
}

/// Canonical positions of the GPUs that can take `demand` (empty for CPU-only).
pub fn usable_positions(state: &NodeState, demand: &Demand) -> Vec<usize> {
    state
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| gpu_take(g, demand).is_some())
        .map(|(p, _)| p)
        .collect()
}

/// The GPU part of the filter: `Err(reason)` when the node cannot host the
/// demand's GPUs. Reasons: wrong model (or no GPU), too few GPUs with room.
pub fn check_gpus(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    let want = demand.gpu.count() as usize;
    if want == 0 {
        return Ok(());
    }
    if !state.gpus.iter().any(|g| demand.allows_model(&g.model)) {
        return Err(GPU_MODEL);
    }
    let usable = state
        .gpus
        .iter()
        .filter(|g| gpu_take(g, demand).is_some())
        .count();
    if usable >= want {
        Ok(())
    } else if matches!(demand.gpu, super::types::GpuDemand::Whole { .. }) {
        Err(WHOLE_GPUS)
    } else {
        Err(GPU_ROOM)
    }
}

/// Pick GPUs best-fit: the usable GPUs with the least free room first (ties by
/// position). Returns `(position, units)` or `None` when too few fit.
pub fn best_fit_gpus(state: &NodeState, demand: &Demand) -> Option<Vec<(usize, u64)>> {
    let want = demand.gpu.count() as usize;
    let mut usable: Vec<(usize, u64, u64)> = state
        .gpus
        .iter()
        .enumerate()
        .filter_map(|(p, g)| gpu_take(g, demand).map(|u| (p, u, g.free_milli())))
        .collect();
    if usable.len() < want {
        return None;
    }
    usable.sort_by_key(|&(p, _, free)| (free, p));
    Some(
        usable
            .into_iter()
            .take(want)
            .map(|(p, u, _)| (p, u))
            .collect(),
    )
}

/// Check that `placement` is a valid way to host `demand` on `view` right now:
/// the node as a whole, then every GPU placed.
pub fn validate(
    view: &NodeView,
    demand: &Demand,
    placement: &Placement,
) -> Result<(), PlacementError> {
    let node = placement.node;
    validate_node(view, demand).map_err(|why| PlacementError::NoRoom {
        node,
        reason: why.to_string(),
    })?;
    validate_gpus(view, demand, placement)
}

/// The first node-wide reason a demand does not fit: the words become the
/// reason of [`PlacementError::NoRoom`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeShortfall {
    #[error("node is unhealthy")]
    Unhealthy,
    #[error("node is cordoned")]
    Cordoned,
    #[error("node is held exclusively or in use")]
    Exclusive,
    /// Less of `what` (cpu in millicores, memory or disk in MiB) is free than asked.
    #[error("{what} {free} < {asked}")]
    Short {
        what: &'static str,
        free: u64,
        asked: u64,
    },
    #[error("label {key} missing")]
    Label { key: String },
}

/// The node-wide part of [`validate`]: health, exclusivity, CPU, memory,
/// disk and labels; `Err(why)` names the first that fails.
fn validate_node(view: &NodeView, demand: &Demand) -> Result<(), NodeShortfall> {
    if !view.healthy {
        return Err(NodeShortfall::Unhealthy);
    }
    if view.cordoned {
        return Err(NodeShortfall::Cordoned);
    }
    if view.exclusive_held || (demand.exclusive && view.allocations > 0) {
        return Err(NodeShortfall::Exclusive);
    }
    let room = [
        ("cpu", view.cpu_free_milli, demand.cpu_milli),
        ("memory", view.memory_free_mib, demand.memory_mib),
        ("disk", view.disk_free_mib, demand.disk_mib),
    ];
    if let Some((what, free, asked)) = room.into_iter().find(|(_, free, asked)| free < asked) {
        return Err(NodeShortfall::Short { what, free, asked });
    }
    if let Some((k, _)) = demand
        .labels
        .iter()
        .find(|(k, v)| view.labels.get(*k) != Some(*v))
    {
        return Err(NodeShortfall::Label { key: k.clone() });
    }
    Ok(())
}

/// The per-GPU part of [`validate`]: as many GPUs as asked, none twice, each
/// known to the node and with room for exactly the units placed on it.
fn validate_gpus(
    view: &NodeView,
    demand: &Demand,
    placement: &Placement,
) -> Result<(), PlacementError> {
    let node = placement.node;
    let want = demand.gpu.count() as usize;
    if placement.gpus.len() != want {
        return Err(PlacementError::Mismatch(format!(
            "{} GPUs placed, {want} asked",
            placement.gpus.len()
        )));
    }
    for (i, &(index, units)) in placement.gpus.iter().enumerate() {
        if placement.gpus[..i].iter().any(|&(other, _)| other == index) {
            return Err(PlacementError::Mismatch(format!(
                "GPU {index} placed twice"
            )));
        }
        let g = view
            .gpus
            .iter()
            .find(|g| g.index == index)
            .ok_or(PlacementError::UnknownGpu { node, gpu: index })?;
        let state = GpuState {
            model: g.model.clone(),
            capacity: g.capacity,
            free: g.free.min(g.capacity),
        };
        match gpu_take(&state, demand) {
            Some(need) if need == units => {}
            Some(need) => {
                return Err(PlacementError::Mismatch(format!(
                    "GPU {index}: {units} units placed, {need} needed"
                )))
            }
            None => {
                return Err(PlacementError::NoRoom {
                    node,
                    reason: format!("GPU {index} ({}) has {} free", g.model, g.free),
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A healthy, uncordoned node with 4 cores, 8 GiB, 10 GiB disk, zone=a.
    fn roomy() -> NodeView {
        NodeView {
            healthy: true,
            cpu_free_milli: 4000,
            memory_free_mib: 8192,
            disk_free_mib: 10240,
            labels: [("zone".to_string(), "a".to_string())].into(),
            ..NodeView::default()
        }
    }

    #[test]
    fn the_first_node_wide_shortfall_is_named_with_its_figures() {
        let asked = |cpu, mem| Demand {
            cpu_milli: cpu,
            memory_mib: mem,
            ..Demand::default()
        };
        assert_eq!(validate_node(&roomy(), &asked(4000, 8192)), Ok(()));
        let sick = NodeView {
            healthy: false,
            ..roomy()
        };
        assert_eq!(
            validate_node(&sick, &asked(1, 1)),
            Err(NodeShortfall::Unhealthy)
        );
        let cordoned = NodeView {
            cordoned: true,
            ..roomy()
        };
        assert_eq!(
            validate_node(&cordoned, &asked(1, 1)),
            Err(NodeShortfall::Cordoned)
        );
        let held = NodeView {
            exclusive_held: true,
            ..roomy()
        };
        assert_eq!(
            validate_node(&held, &asked(1, 1)),
            Err(NodeShortfall::Exclusive)
        );
        // CPU fits (4000 <= 4000), memory does not (8192 < 9000).
        let short = validate_node(&roomy(), &asked(4000, 9000)).unwrap_err();
        assert_eq!(
            short,
            NodeShortfall::Short {
                what: "memory",
                free: 8192,
                asked: 9000
            }
        );
        assert_eq!(short.to_string(), "memory 8192 < 9000");
        let labelled = Demand {
            labels: [("gpu-arch".to_string(), "hopper".to_string())].into(),
            ..asked(1, 1)
        };
        let missing = validate_node(&roomy(), &labelled).unwrap_err();
        assert_eq!(missing.to_string(), "label gpu-arch missing");
    }
}
