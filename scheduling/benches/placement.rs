//! One placement decision (caldera policy) on clusters of 1,000 / 10,000 /
//! 100,000 nodes of 8 GPUs, filled to ~70% of their GPUs with tasks drawn from the
//! Alibaba trace (or a built-in trace-like mix when the data folder is absent).
//!
//! `cargo bench -p caldera-scheduling --bench placement` prints criterion's timing and,
//! per size, p50/p99 latency and decisions per second measured over 2,000
//! decisions (each decision is `Placer::place` + `Pool::commit` + `Pool::release`,
//! so every decision sees a node state it has not scored before).
use std::path::Path;
use std::time::Instant;

use caldera_scheduling::placement::rng::SplitMix64;
use caldera_scheduling::placement::{
    Demand, GpuDemand, GpuSlot, GpuUnit, NodeView, Placement, Placer, PolicyName, Pool, WorkloadMix,
};
use caldera_sim::load_tasks;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv"
);

fn trace_demands() -> Vec<Demand> {
    match load_tasks(Path::new(TRACE)) {
        Ok(tasks) => tasks.iter().map(|t| t.demand()).collect(),
        Err(_) => {
            let d = |gpu, cores: u64, gib: u64| Demand {
                gpu,
                cpu_milli: cores * 1000,
                memory_mib: gib * 1024,
                ..Demand::default()
            };
            vec![
                d(GpuDemand::Whole { count: 1 }, 11, 48),
                d(GpuDemand::Share { milli: 470 }, 8, 30),
                d(GpuDemand::Share { milli: 810 }, 3, 5),
                d(GpuDemand::None, 12, 56),
                d(GpuDemand::Whole { count: 2 }, 16, 64),
            ]
        }
    }
}

/// `n` nodes of 8 GPUs, 96 cores, 384 GiB; each filled to ~70% of its GPUs by
/// committing trace tasks to it directly (first fit inside the node), so building
/// 100,000 nodes takes seconds, not a full simulation.
fn cluster(n: usize, demands: &[Demand], rng: &mut SplitMix64) -> Pool {
    let mut pool = Pool::new(GpuUnit::Milli);
    let gpu_demands: Vec<&Demand> = demands.iter().filter(|d| d.gpu.count() > 0).collect();
    for i in 0..n {
        let view = NodeView {
            name: format!("node-{i:06}"),
            healthy: true,
            cordoned: false,
            gpus: (0..8)
                .map(|index| GpuSlot {
                    index,
                    model: "G2".into(),
                    capacity: 1000,
                    free: 1000,
                })
                .collect(),
            cpu_capacity_milli: 96_000,
            cpu_free_milli: 96_000,
            memory_capacity_mib: 393_216,
            memory_free_mib: 393_216,
            ..NodeView::default()
        };
        let id = pool.upsert_node(view);
        for _ in 0..40 {
            let used: u64 = pool
                .node(id)
                .map(|v| 8000 - v.gpu_free_milli())
                .unwrap_or(8000);
            if used >= 5600 {
                break;
            }
            let d = gpu_demands[rng.below(gpu_demands.len() as u64) as usize];
            if let Some(p) = first_fit(&pool, id, d) {
                let _ = pool.commit(d, &p);
            }
        }
    }
    pool
}

fn first_fit(
    pool: &Pool,
    id: caldera_scheduling::placement::NodeId,
    d: &Demand,
) -> Option<Placement> {
    let v = pool.node(id)?;
    if v.cpu_free_milli < d.cpu_milli || v.memory_free_mib < d.memory_mib {
        return None;
    }
    let mut gpus = Vec::new();
    for g in &v.gpus {
        let (need, whole) = d.gpu.per_gpu_need(g.capacity)?;
        if (whole && g.free == g.capacity) || (!whole && g.free >= need) {
            gpus.push((g.index, need));
        }
        if gpus.len() == d.gpu.count() as usize {
            return Some(Placement { node: id, gpus });
        }
    }
    None
}

fn decide(placer: &mut Placer, pool: &mut Pool, d: &Demand) {
    if let Ok(p) = placer.place(pool, d) {
        if pool.commit(d, &p).is_ok() {
            pool.release(d, &p);
        }
    }
}

/// p50, p99 (microseconds) and decisions/s over `n` decisions.
fn measure(placer: &mut Placer, pool: &mut Pool, demands: &[Demand], n: usize) -> (f64, f64, f64) {
    let mut lat: Vec<f64> = Vec::with_capacity(n);
    for k in 0..n {
        let d = &demands[(k * 7919) % demands.len()];
        let t = Instant::now();
        decide(placer, pool, d);
        lat.push(t.elapsed().as_secs_f64() * 1e6);
    }
    lat.sort_by(f64::total_cmp);
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100], 1e6 / mean)
}

fn bench(c: &mut Criterion) {
    let demands = trace_demands();
    let mix = WorkloadMix::from_demands(&demands, 0.95);
    let mut group = c.benchmark_group("caldera_decision");
    group.sample_size(10);
    for n in [1_000usize, 10_000, 100_000] {
        let mut rng = SplitMix64::new(7);
        let started = Instant::now();
        let mut pool = cluster(n, &demands, &mut rng);
        let build = started.elapsed().as_secs_f64();
        // Default: exhaustive up to 2,048 distinct states, else bounded to 16 scored
        // classes; `limit 2048` forces scoring 2,048 classes for comparison.
        for (label, limit) in [("default", None), ("limit2048", Some(2048))] {
            let mut placer = Placer::new(PolicyName::Caldera, mix.clone(), 42);
            if let Some(l) = limit {
                placer = placer.with_search_limit(l);
            }
            // Warm the per-class caches, as a running scheduler's would be.
            for d in demands.iter().take(200) {
                decide(&mut placer, &mut pool, d);
            }
            let (p50, p99, rate) = measure(&mut placer, &mut pool, &demands, 500);
            println!(
                "nodes {n:>6} (build {build:.1}s, {} classes) {label:>9}: p50 {p50:8.1} us  p99 {p99:8.1} us  {rate:8.0} decisions/s",
                pool.class_count()
            );
            group.throughput(Throughput::Elements(1));
            let mut k = 0usize;
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| {
                    k += 1;
                    decide(
                        &mut placer,
                        &mut pool,
                        &demands[(k * 104_729) % demands.len()],
                    );
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
