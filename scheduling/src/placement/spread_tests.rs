//! Replica spread: distinct GPUs always, distinct nodes where possible, the
//! fallback and the hard limit.
use std::collections::BTreeMap;

use super::*;
use crate::placement::rejections::{REPLICA_GPU, REPLICA_NODE};
use crate::placement::rng::SplitMix64;
use crate::placement::{GpuDemand, GpuSlot, GpuUnit, PolicyName, WorkloadMix};

const GB: u64 = 1024;

fn node(name: &str, gpus: u32) -> NodeView {
    NodeView {
        name: name.into(),
        healthy: true,
        gpus: (0..gpus)
            .map(|index| GpuSlot {
                index,
                model: "T4".into(),
                capacity: 16 * GB,
                free: 16 * GB,
            })
            .collect(),
        cpu_capacity_milli: 16_000,
        cpu_free_milli: 16_000,
        memory_capacity_mib: 64 * GB,
        memory_free_mib: 64 * GB,
        disk_capacity_mib: 100 * GB,
        disk_free_mib: 100 * GB,
        labels: BTreeMap::new(),
        ..NodeView::default()
    }
}

/// A replica asking for 4 GB of one GPU: four fit on one T4.
fn replica() -> Demand {
    Demand {
        gpu: GpuDemand::Memory {
            count: 1,
            per_gpu: 4 * GB,
        },
        cpu_milli: 1000,
        ..Demand::default()
    }
}

/// Places `n` replicas one by one, committing each, as the queue does.
fn place_service(
    pool: &mut Pool,
    placer: &mut Placer,
    n: u32,
    max_per_node: u32,
    hard: bool,
) -> Vec<Result<(Placement, Spread), Rejections>> {
    let mut spread = ReplicaSpread {
        max_per_node,
        hard,
        ..ReplicaSpread::default()
    };
    let d = replica();
    let mut out = Vec::new();
    for _ in 0..n {
        let r = placer.place_spread(pool, &d, &spread);
        if let Ok((p, _)) = &r {
            pool.commit(&d, p).expect("the placement fits");
            let held = spread.held.entry(p.node).or_default();
            held.replicas += 1;
            held.gpus.extend(p.gpus.iter().map(|g| g.0));
        }
        out.push(r);
    }
    out
}

#[test]
fn two_replicas_on_two_nodes_land_on_both_nodes() {
    for policy in PolicyName::ALL {
        let mut pool = Pool::new(GpuUnit::MiB);
        let a = pool.upsert_node(node("a", 1));
        let b = pool.upsert_node(node("b", 1));
        let mut placer = Placer::new(policy, WorkloadMix::default(), 3);
        let out = place_service(&mut pool, &mut placer, 2, 1, false);
        let nodes: Vec<NodeId> = out.iter().map(|r| r.as_ref().unwrap().0.node).collect();
        assert!(
            nodes.contains(&a) && nodes.contains(&b),
            "{policy:?}: {nodes:?}"
        );
        assert!(out.iter().all(|r| r.as_ref().unwrap().1 == Spread::Spread));
    }
}

#[test]
fn three_replicas_on_two_nodes_take_three_gpus_and_say_the_third_is_unspread() {
    let mut pool = Pool::new(GpuUnit::MiB);
    pool.upsert_node(node("a", 2));
    pool.upsert_node(node("b", 2));
    let mut placer = Placer::new(PolicyName::Caldera, WorkloadMix::default(), 11);
    let out = place_service(&mut pool, &mut placer, 3, 1, false);
    let mut gpus = std::collections::BTreeSet::new();
    for r in &out {
        let (p, _) = r.as_ref().expect("placed");
        gpus.insert((p.node, p.gpus[0].0));
    }
    assert_eq!(gpus.len(), 3, "three distinct GPUs: {gpus:?}");
    let kinds: Vec<Spread> = out.iter().map(|r| r.as_ref().unwrap().1).collect();
    assert_eq!(
        kinds,
        vec![Spread::Spread, Spread::Spread, Spread::Fallback]
    );
    assert_eq!(Spread::Fallback.note(), Some("placed without spread"));
}

#[test]
fn a_user_set_limit_is_hard_and_the_reason_names_it() {
    let mut pool = Pool::new(GpuUnit::MiB);
    pool.upsert_node(node("a", 2));
    pool.upsert_node(node("b", 2));
    let mut placer = Placer::new(PolicyName::Caldera, WorkloadMix::default(), 5);
    let out = place_service(&mut pool, &mut placer, 3, 1, true);
    assert!(out[0].is_ok() && out[1].is_ok());
    let err = out[2].as_ref().expect_err("the limit holds the third back");
    // Both nodes hold 1 replica: 1 + 1 = 2 turned down for the limit.
    assert_eq!(err.count(REPLICA_NODE), 2);
    assert_eq!(
        err.summary(&replica()),
        "2 nodes: 2 at max_replicas_per_node=1 for this service"
    );
}

#[test]
fn a_node_whose_only_gpu_serves_the_service_is_turned_down_for_that() {
    let mut pool = Pool::new(GpuUnit::MiB);
    pool.upsert_node(node("a", 1));
    let mut placer = Placer::new(PolicyName::BestFit, WorkloadMix::default(), 1);
    let out = place_service(&mut pool, &mut placer, 2, 1, false);
    assert!(out[0].is_ok());
    let err = out[1].as_ref().expect_err("one GPU, already serving");
    assert_eq!(err.count(REPLICA_GPU), 1);
    // The pool is back as it was: the first replica's room only.
    let view = pool.node(NodeId(0)).expect("node a");
    assert_eq!(view.gpus[0].free, 12 * GB);
    assert!(!view.cordoned);
}

#[test]
fn no_two_replicas_of_a_service_ever_share_a_gpu() {
    // A seeded property run: random pools (1..=4 nodes of 1..=4 GPUs, some
    // already part-used), random replica counts; every placed replica has a
    // GPU of its own.
    let mut rng = SplitMix64::new(42);
    for case in 0..300 {
        let mut pool = Pool::new(GpuUnit::MiB);
        for n in 0..=rng.below(4) {
            let mut v = node(&format!("n{n}"), 1 + rng.below(4) as u32);
            for g in &mut v.gpus {
                g.free -= rng.below(3) * 4 * GB;
            }
            pool.upsert_node(v);
        }
        let policy = PolicyName::ALL[rng.below(PolicyName::ALL.len() as u64) as usize];
        let mut placer = Placer::new(policy, WorkloadMix::default(), case);
        let replicas = 1 + rng.below(8) as u32;
        let out = place_service(&mut pool, &mut placer, replicas, 1, rng.below(2) == 0);
        let mut seen = std::collections::BTreeSet::new();
        for (p, _) in out.iter().flatten() {
            assert!(
                seen.insert((p.node, p.gpus[0].0)),
                "case {case}: GPU shared: {out:?}"
            );
        }
    }
}
