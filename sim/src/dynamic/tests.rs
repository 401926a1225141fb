//! Deterministic replay of a slice of the trace: the 243 pods of the default
//! trace alive in seconds [11 900 000, 11 960 000), on 9 nodes (36 GPUs).
use std::path::PathBuf;

use super::{run, DynamicConfig, DynamicReport};

fn data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/dynamic/testdata")
        .join(file)
}

fn slice() -> DynamicConfig {
    DynamicConfig {
        nodes: data("nodes.csv"),
        tasks: data("pods.csv"),
        gpus: 0,
        from_s: 11_900_000,
        until_s: Some(11_960_000),
        ..DynamicConfig::default()
    }
}

fn replay() -> DynamicReport {
    run(&slice()).expect("the slice replays")
}

#[test]
fn slice_invariants_and_shared_pool_at_least_as_busy() {
    let r = replay();
    println!("{}", r.table());
    assert_eq!(r.gpus, 36);
    assert_eq!(r.mix.tasks, 243);
    assert_eq!(r.scenarios.len(), 2);
    let (split, shared) = (&r.scenarios[0], &r.scenarios[1]);
    assert_eq!(split.pools.len(), 2, "a training and an inference pool");
    assert_eq!(split.pools.iter().map(|p| p.gpus).sum::<u32>(), 36);
    for s in &r.scenarios {
        // No GPU (nor CPU or memory of a node) is ever held past its capacity.
        assert!(
            s.violations.is_empty(),
            "{}: {:?}",
            s.scenario,
            s.violations
        );
        // Every task is accounted for: started, or reported as never started.
        let started: usize = s.delay.iter().map(|d| d.started).sum();
        let tasks: usize = s.delay.iter().map(|d| d.tasks).sum();
        assert_eq!(tasks, 243, "{}", s.scenario);
        assert_eq!(started + s.never_started, tasks, "{}", s.scenario);
        assert!(!s.cut_off, "{} drained", s.scenario);
        assert!(s.gpu_util_pct > 0.0 && s.gpu_util_pct <= 100.0);
        assert!(s.useful_util_pct <= s.gpu_util_pct + 1e-9);
        assert!(s.offered_pct > 0.0);
    }
    assert!(
        shared.gpu_util_pct + 1e-9 >= split.gpu_util_pct,
        "shared {:.3}% < static split {:.3}%\n{}",
        shared.gpu_util_pct,
        split.gpu_util_pct,
        r.table()
    );
    // High priority (inference) waits no longer in the shared pool.
    assert!(
        shared.delay[0].mean_s <= split.delay[0].mean_s,
        "{}",
        r.table()
    );
}

#[test]
fn replay_is_deterministic() {
    // Half the slice, to keep the test fast.
    let cfg = DynamicConfig {
        until_s: Some(11_930_000),
        ..slice()
    };
    let (a, b) = (run(&cfg).expect("replays"), run(&cfg).expect("replays"));
    assert!(a
        .scenarios
        .iter()
        .all(|s| s.preemptions > 0 || s.delay[2].mean_s > 0.0));
    for (x, y) in a.scenarios.iter().zip(&b.scenarios) {
        assert_eq!(
            x.gpu_util_pct.to_bits(),
            y.gpu_util_pct.to_bits(),
            "{}",
            x.scenario
        );
        assert_eq!(x.preemptions, y.preemptions);
        assert_eq!(x.never_started, y.never_started);
        let d = |s: &super::ScenarioReport| {
            s.delay
                .iter()
                .map(|d| d.mean_s.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(d(x), d(y));
    }
}

#[test]
fn durations_are_declared_as_hh_mm_ss() {
    assert_eq!(super::workload::hms(0), "00:00:01");
    assert_eq!(super::workload::hms(3_725), "01:02:05");
    assert_eq!(super::workload::hms(2_902_960), "806:22:40");
}

/// The full default trace (`cargo test -p caldera-actors --release full_trace -- --ignored --nocapture`).
#[test]
#[ignore]
fn full_trace() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/alibaba-gpu-v2023");
    let mut cfg = DynamicConfig {
        nodes: dir.join("openb_node_list_gpu_node.csv"),
        tasks: dir.join("openb_pod_list_default.csv"),
        ..DynamicConfig::default()
    };
    if let Some(g) = std::env::var("DYNSIM_GPUS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.gpus = g;
    }
    if let Some(f) = std::env::var("DYNSIM_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.from_s = f;
    }
    let r = run(&cfg).expect("replays");
    println!("{}", r.table());
}
