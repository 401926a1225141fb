//! The weights filter and the cache term inside the pipeline: a cached copy
//! wins a near-tie, never a difference larger than the term's bound, and a
//! demand without weights places exactly as before.
use std::collections::BTreeMap;

use super::rejections::{NO_WEIGHT_CACHE, WEIGHTS_ROOM};
use super::*;

const GIB: u64 = 1 << 30;

fn node(name: &str, cpu_free_cores: u64, weights: NodeWeights) -> NodeView {
    NodeView {
        name: name.into(),
        healthy: true,
        gpus: (0..8)
            .map(|index| GpuSlot {
                index,
                model: "A100".into(),
                capacity: 1000,
                free: 1000,
            })
            .collect(),
        cpu_capacity_milli: 64_000,
        cpu_free_milli: cpu_free_cores * 1000,
        memory_capacity_mib: 256 * 1024,
        memory_free_mib: 256 * 1024,
        labels: BTreeMap::new(),
        weights,
        ..NodeView::default()
    }
}

fn need() -> WeightsNeed {
    WeightsNeed {
        model: "llama:3".into(),
        sha256: "ab".repeat(32),
        size_bytes: 20 * GIB,
    }
}

fn cache(cached: bool) -> NodeWeights {
    NodeWeights {
        capacity_bytes: 100 * GIB,
        evictable_room_bytes: 100 * GIB,
        cached: if cached {
            [need().sha256].into_iter().collect()
        } else {
            Default::default()
        },
        warming: Default::default(),
    }
}

fn serving(gpu: GpuDemand) -> Demand {
    Demand {
        gpu,
        cpu_milli: 1000,
        memory_mib: 1024,
        weights: Some(need()),
        ..Demand::default()
    }
}

fn pool(nodes: Vec<NodeView>) -> Pool {
    let mut pool = Pool::new(GpuUnit::Milli);
    for n in nodes {
        pool.upsert_node(n);
    }
    pool
}

fn placed_on(placer: &mut Placer, pool: &Pool, demand: &Demand) -> String {
    let p = placer.place(pool, demand).expect("a node fits");
    pool.node(p.node)
        .map(|n| n.name.clone())
        .unwrap_or_default()
}

#[test]
fn a_cached_node_wins_a_near_tie_and_the_explanation_says_so() {
    // Identical nodes: every policy scores them alike; only the cache differs.
    let pool = pool(vec![
        node("cold-1", 64, cache(false)),
        node("node-3", 64, cache(true)),
        node("cold-2", 64, cache(false)),
    ]);
    let demand = serving(GpuDemand::Share { milli: 500 });
    for policy in [PolicyName::Caldera, PolicyName::Fgd, PolicyName::BestFit] {
        for seed in 0..20 {
            let mut placer = Placer::new(policy, WorkloadMix::default(), seed);
            let p = placer.place(&pool, &demand).expect("fits");
            assert_eq!(pool.node(p.node).map(|n| n.name.as_str()), Some("node-3"));
            assert_eq!(placer.explain(&pool, &demand, &p), Some("weights cached"));
        }
    }
    // Off: nothing to explain, and the cold nodes get their share.
    let mut off = Placer::new(PolicyName::Caldera, WorkloadMix::default(), 1).with_cache_bound(0.0);
    let names: std::collections::BTreeSet<String> = (0..40)
        .map(|_| placed_on(&mut off, &pool, &demand))
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let p = off.place(&pool, &demand).expect("fits");
    assert_eq!(off.explain(&pool, &demand, &p), None);
}

#[test]
fn a_warming_copy_wins_over_nothing_and_a_verified_one_over_warming() {
    let mut warming = cache(false);
    warming.warming.insert(need().sha256);
    let demand = serving(GpuDemand::Whole { count: 1 });
    let two = pool(vec![
        node("cold", 64, cache(false)),
        node("warm", 64, warming.clone()),
    ]);
    let mut placer = Placer::new(PolicyName::Caldera, WorkloadMix::default(), 3);
    assert_eq!(placed_on(&mut placer, &two, &demand), "warm");
    let p = placer.place(&two, &demand).expect("fits");
    assert_eq!(placer.explain(&two, &demand, &p), Some("weights warming"));
    let three = pool(vec![
        node("warm", 64, warming),
        node("hot", 64, cache(true)),
    ]);
    assert_eq!(placed_on(&mut placer, &three, &demand), "hot");
}

#[test]
fn the_term_never_outweighs_a_score_difference_larger_than_its_bound() {
    // BestFit, one whole GPU and one core: the node with 32 cores free scores
    // trunc(100 * (1 - (31/64 + 7/8) / 2)) = 32, the one with 64 free scores
    // trunc(100 * (1 - (63/64 + 7/8) / 2)) = 7: a difference of 25.
    let pool = pool(vec![
        node("fuller", 32, cache(false)),
        node("cached", 64, cache(true)),
    ]);
    let demand = serving(GpuDemand::Whole { count: 1 });
    for seed in 0..10 {
        let mut within =
            Placer::new(PolicyName::BestFit, WorkloadMix::default(), seed).with_cache_bound(24.9);
        assert_eq!(placed_on(&mut within, &pool, &demand), "fuller");
        let mut beyond =
            Placer::new(PolicyName::BestFit, WorkloadMix::default(), seed).with_cache_bound(25.1);
        assert_eq!(placed_on(&mut beyond, &pool, &demand), "cached");
    }
    // The default bound is far below one BestFit point: it only breaks ties.
    let mut default = Placer::new(PolicyName::BestFit, WorkloadMix::default(), 1);
    assert_eq!(placed_on(&mut default, &pool, &demand), "fuller");
}

#[test]
fn a_demand_without_weights_places_exactly_as_if_no_node_had_a_cache() {
    // Nodes with caches (some holding the version) against the same nodes
    // without: a sequence of weightless demands lands on the same nodes
    // and GPUs, with the term on or off.
    let shapes = [
        GpuDemand::Share { milli: 470 },
        GpuDemand::Share { milli: 810 },
        GpuDemand::Whole { count: 2 },
        GpuDemand::Share { milli: 320 },
        GpuDemand::Whole { count: 1 },
    ];
    let run = |with_caches: bool, bound: f64| {
        let mut pool = pool(
            (0..6)
                .map(|i| {
                    let w = if with_caches {
                        cache(i % 2 == 0)
                    } else {
                        NodeWeights::default()
                    };
                    node(&format!("n{i}"), 16 + 8 * i as u64, w)
                })
                .collect(),
        );
        let mut placer =
            Placer::new(PolicyName::Caldera, WorkloadMix::default(), 11).with_cache_bound(bound);
        let mut out = Vec::new();
        for k in 0..30 {
            let demand = Demand {
                gpu: shapes[k % shapes.len()].clone(),
                cpu_milli: 1000,
                ..Demand::default()
            };
            match placer.place(&pool, &demand) {
                Ok(p) => {
                    pool.commit(&demand, &p).expect("the placer's choice fits");
                    out.push(Some(p));
                }
                Err(_) => out.push(None),
            }
        }
        out
    };
    let plain = run(false, 0.0);
    assert!(plain.iter().filter(|p| p.is_some()).count() > 10);
    assert_eq!(run(true, score::weights::DEFAULT_BOUND), plain);
    assert_eq!(run(true, 0.0), plain);
}

#[test]
fn nodes_whose_cache_cannot_take_the_weights_are_rejected_and_counted() {
    let full = NodeWeights {
        capacity_bytes: 40 * GIB,
        evictable_room_bytes: 12 * GIB,
        ..NodeWeights::default()
    };
    let pool = pool(vec![
        node("none", 64, NodeWeights::default()),
        node("full-1", 64, full.clone()),
        node("full-2", 64, full),
    ]);
    let demand = serving(GpuDemand::Share { milli: 500 });
    let mut placer = Placer::new(PolicyName::Caldera, WorkloadMix::default(), 1);
    let err = placer
        .place(&pool, &demand)
        .expect_err("no cache can take 20 GB");
    assert_eq!(err.count(WEIGHTS_ROOM), 2);
    assert_eq!(err.count(NO_WEIGHT_CACHE), 1);
    assert_eq!(
        err.summary(&demand),
        "3 nodes: 2 weights do not fit the node cache: at most 12 GB free of 40 GB \
         (llama:3 needs 20 GB), 1 no weight cache (--cache-gb 0)"
    );
}
