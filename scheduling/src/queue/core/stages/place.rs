//! Stage 3, place: filter -> score -> select a node and GPUs for one demand
//! ([`Placer`]), or say why no node fits. Within a pass room only shrinks
//! (grants take it; a preemption frees nothing until its victims stop), so a
//! shape that found no room once finds none for the rest of the pass: its
//! reason is reused and the placer is not asked again.
use crate::placement::rejections::{REPLICA_GPU, REPLICA_NODE};
use crate::placement::{Demand, HeldReplicas, Placement, Placer, Pool, ReplicaSpread, Spread};
use crate::queue::ledger::Ledger;
use caldera_spec::{TaskSpec, TaskType};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a task found no room.
#[derive(Debug, Clone, PartialEq)]
pub struct NoRoom {
    /// The placer's rejections, counted by reason.
    pub reason: String,
    /// The filter that turned down the most nodes (a reason code of
    /// `placement::rejections`), or `outcomes::NO_NODES`: what the pass
    /// counts the task under.
    pub top: &'static str,
    /// Whether this is the first task of its shape to find no room this pass
    /// (only the first may try preemption: the rest would find the same
    /// victims, or none).
    pub first_of_shape: bool,
}

/// The shapes (demand and priority) that found no room in this pass, with why.
#[derive(Debug, Default)]
pub struct ShapesWithoutRoom(HashMap<Arc<str>, (String, &'static str)>);

impl ShapesWithoutRoom {
    /// Places `demand` of `shape` on `pool`, unless the shape already found no
    /// room in this pass.
    pub fn place(
        &mut self,
        placer: &mut Placer,
        pool: &Pool,
        shape: &Arc<str>,
        demand: &Demand,
    ) -> Result<Placement, NoRoom> {
        if let Some((reason, top)) = self.0.get(shape) {
            return Err(NoRoom {
                reason: reason.clone(),
                top,
                first_of_shape: false,
            });
        }
        placer.place(pool, demand).map_err(|rejections| {
            let reason = rejections.summary(demand);
            let top = rejections
                .counts()
                .first()
                .map_or(crate::queue::outcomes::NO_NODES, |(r, _)| r);
            self.0.insert(shape.clone(), (reason.clone(), top));
            NoRoom {
                reason,
                top,
                first_of_shape: true,
            }
        })
    }
}

/// Where the other replicas of the service `task_id` belongs to run, read
/// from the ledger (every live allocation, so nothing is passed around that
/// could go stale): `None` when the task is no inference replica.
pub fn spread_of(
    ledger: &Ledger,
    pool: &Pool,
    task_id: &str,
    spec: &TaskSpec,
) -> Option<ReplicaSpread> {
    if spec.task_type != TaskType::Inference || !caldera_spec::names_a_replica(task_id) {
        return None;
    }
    let (service, _) = task_id.rsplit_once(".r")?;
    let mut spread = ReplicaSpread {
        max_per_node: spec.max_replicas_per_node.unwrap_or(1).max(1),
        hard: spec.max_replicas_per_node.is_some(),
        ..ReplicaSpread::default()
    };
    for e in ledger.all() {
        let a = &e.allocation;
        if a.task_id == task_id || caldera_spec::replica_index(service, &a.task_id).is_none() {
            continue;
        }
        let Some(node) = pool.node_id(&a.node) else {
            continue;
        };
        let held: &mut HeldReplicas = spread.held.entry(node).or_default();
        held.replicas += 1;
        held.gpus.extend(a.gpus.iter().map(|g| g.index));
    }
    Some(spread)
}

/// Places one replica under its service's spread. Not cached by shape:
/// two replicas of one shape but different services find different room.
pub fn place_replica(
    placer: &mut Placer,
    pool: &mut Pool,
    demand: &Demand,
    spread: &ReplicaSpread,
) -> Result<(Placement, Spread), NoRoom> {
    placer
        .place_spread(pool, demand, spread)
        .map_err(|rejections| {
            let reason = rejections.summary(demand);
            let top = rejections
                .counts()
                .first()
                .map_or(crate::queue::outcomes::NO_NODES, |(r, _)| r);
            // Preempting frees no room the spread would let the replica take
            // when spread is what turned most nodes down.
            let spread_bound = matches!(top, REPLICA_GPU | REPLICA_NODE);
            NoRoom {
                reason,
                top,
                first_of_shape: !spread_bound,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{GpuDemand, GpuUnit, PolicyName, WorkloadMix};
    use crate::queue::fixtures::node;
    use crate::queue::ledger::Ledger;

    fn gpus(count: u32) -> Demand {
        Demand {
            gpu: GpuDemand::Whole { count },
            cpu_milli: 1000,
            ..Demand::default()
        }
    }

    #[test]
    fn a_shape_without_room_is_refused_for_the_rest_of_the_pass() {
        // One node "a": 2 free A100s of 81920 MiB.
        let mut pool = Pool::new(GpuUnit::MiB);
        pool.upsert_node(Ledger::default().pool_view("a", &node(2), true));
        let mut placer = Placer::new(PolicyName::BestFit, WorkloadMix::default(), 1);
        let mut shapes = ShapesWithoutRoom::default();
        let refused = |reason: &str, first_of_shape| {
            Err(NoRoom {
                reason: reason.into(),
                top: crate::placement::rejections::WHOLE_GPUS,
                first_of_shape,
            })
        };
        // (shape, GPUs asked, GPUs placed on "a" or why not)
        let rows = [
            // 1 <= 2 free: one GPU (nothing is committed, so 2 stay free).
            ("1", 1, Ok(1)),
            // 2 <= 2 free: both GPUs.
            ("2", 2, Ok(2)),
            // 4 > 2 idle on the one node: no room; the first of shape "4", so
            // it may try preemption.
            ("4", 4, refused("1 node: 1 fewer than 4 idle GPUs", true)),
            // Shape "4" again: the remembered reason, no second preemption try.
            ("4", 4, refused("1 node: 1 fewer than 4 idle GPUs", false)),
            // 3 > 2: a new shape, asked afresh, so the first of its shape.
            ("3", 3, refused("1 node: 1 fewer than 3 idle GPUs", true)),
        ];
        for (shape, count, want) in rows {
            let got = shapes
                .place(&mut placer, &pool, &shape.into(), &gpus(count))
                .map(|p| {
                    assert_eq!(pool.node(p.node).map(|n| n.name.as_str()), Some("a"));
                    p.gpus.len()
                });
            assert_eq!(got, want, "shape {shape}");
        }
    }
}
