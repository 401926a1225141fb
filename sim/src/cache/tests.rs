//! The cache replay end to end on a small fixed trace.
use super::*;
use crate::trace::{TraceNode, TraceTask};

/// 24 nodes of 4 GPUs and a mix of sharing (many at most half a GPU, the
/// inference candidates), whole-GPU and CPU tasks.
fn small_trace() -> Trace {
    let nodes = TraceNode::alike(24, 4, 64_000, 262_144);
    let shapes = [
        (1, 250),
        (1, 500),
        (1, 300),
        (1, 810),
        (1, 1000),
        (2, 1000),
        (1, 470),
        (0, 0),
    ];
    let tasks = (0..64)
        .map(|k| {
            let (num_gpu, gpu_milli) = shapes[k % shapes.len()];
            TraceTask {
                name: format!("t{k}"),
                cpu_milli: 2000,
                memory_mib: 4096,
                num_gpu,
                gpu_milli,
                gpu_spec: vec![],
            }
        })
        .collect();
    Trace {
        name: "small".into(),
        nodes,
        tasks,
    }
}

fn cfg() -> CacheConfig {
    CacheConfig {
        models: 12,
        size_gb: (5.0, 20.0),
        zipf: 0.8,
        cache_gb: 40.0,
        prefill: 1.0,
        inference_share: 0.4,
        arrival_s: 2.0,
        ..CacheConfig::default()
    }
}

#[test]
fn the_term_on_hits_at_least_as_often_as_off_and_the_run_is_deterministic() {
    let trace = small_trace();
    let seeds = [1, 2, 3];
    let report = run(&trace, &cfg(), &seeds, 2);
    let (off, on) = (&report.off, &report.on);
    assert_eq!((off.seeds, on.seeds), (3, 3));
    assert!(off.served_per_seed > 10.0, "{}", report.text());
    assert!(on.hit_rate >= off.hit_rate, "{}", report.text());
    assert!(
        on.hit_rate > 0.0 && on.ready_p50_s > 0.0,
        "{}",
        report.text()
    );
    // Every placed inference task got a time to ready.
    for r in &report.per_seed {
        assert_eq!(r.ready_s.len(), r.served as usize, "seed {}", r.seed);
        assert_eq!(r.hits + r.joins + r.from_peer + r.from_origin, r.served);
    }
    // The explanation credits the term only when it is on.
    for r in &report.per_seed {
        if r.bound == 0.0 {
            assert_eq!(r.noted, 0);
            assert!(
                r.explained.iter().all(|l| !l.contains("weights")),
                "{:?}",
                r.explained
            );
        }
    }
    assert!(on.noted_rate >= on.hit_rate, "{}", report.text());
    assert!(
        report
            .per_seed
            .iter()
            .any(|r| r.explained.iter().any(|l| l.ends_with(": weights cached"))),
        "{}",
        report.text()
    );
    let again = run(&trace, &cfg(), &seeds, 1);
    assert_eq!(again.off, report.off);
    assert_eq!(again.on, report.on);
}

#[test]
fn the_hit_rate_rises_with_the_cache_size_on_a_fixed_seed() {
    let trace = small_trace();
    let mix = trace.mix();
    // Caches large enough for the versions in use on a node (the filter
    // does not bind): below that, a full cache turns nodes away and so
    // pushes tasks onto the nodes holding their version, which can raise
    // the hit rate of a smaller cache (docs/benchmarks/placement.md).
    let rates: Vec<f64> = [80.0, 120.0, 400.0]
        .iter()
        .map(|&gb| {
            let c = CacheConfig {
                cache_gb: gb,
                ..cfg()
            };
            replay_cache(&trace, &mix, &c, 5, c.bound).hit_rate()
        })
        .collect();
    assert!(rates[0] < rates[1] && rates[1] < rates[2], "{rates:?}");
}

#[test]
fn cold_caches_read_each_version_from_the_origin_once_at_a_time() {
    let trace = small_trace();
    let c = CacheConfig {
        prefill: 0.0,
        cache_gb: 200.0,
        ..cfg()
    };
    let run = replay_cache(&trace, &trace.mix(), &c, 4, c.bound);
    // No copy anywhere at first and nothing evicted (room for all): every
    // version used is read from the origin exactly once; the rest is peers.
    assert_eq!(run.evictions, 0);
    assert!(
        run.from_origin > 0 && run.from_origin <= c.models,
        "{run:?}"
    );
    assert_eq!(
        run.hits + run.joins + run.from_peer + run.from_origin,
        run.served
    );
}

#[test]
fn out_of_range_options_are_named() {
    let bad = CacheConfig {
        zipf: -1.0,
        ..CacheConfig::default()
    };
    assert_eq!(
        bad.check(),
        Err(OptionOutOfRange {
            rule: "--zipf must be >= 0"
        })
    );
    assert_eq!(bad.check().unwrap_err().to_string(), "--zipf must be >= 0");
    assert_eq!(CacheConfig::default().check(), Ok(()));
}
