//! Running many (trace, policy, seed) replays in parallel on std threads: each
//! replay is independent and single-threaded, so a shared job counter is all the
//! coordination needed.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::replay::{replay_bounded, SeedRun, Trace};
use super::report::PolicyReport;
use caldera_scheduling::placement::{PolicyName, WorkloadMix};

/// What to run on a trace.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// Policies, in report order.
    pub policies: Vec<PolicyName>,
    /// Seeds (the paper: 42..=51).
    pub seeds: Vec<u64>,
    /// Inflation target as a multiple of GPU capacity (the paper: 1.3).
    pub inflate: f64,
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Node classes scored per decision at most (default: exhaustive up to
    /// [`caldera_scheduling::placement::placer::DEFAULT_SEARCH_LIMIT`]).
    pub search_limit: usize,
}

/// Replay every policy x seed on every trace; one report per (trace, policy), in
/// trace-then-policy order. Wall time per report is the sum of its seeds' times.
pub fn run_policies(traces: &[Trace], spec: &RunSpec) -> Vec<PolicyReport> {
    let mixes: Vec<WorkloadMix> = traces.iter().map(Trace::mix).collect();
    let mut jobs = Vec::new();
    for t in 0..traces.len() {
        for p in 0..spec.policies.len() {
            for s in 0..spec.seeds.len() {
                jobs.push((t, p, s));
            }
        }
    }
    // Slow policies first, so the tail of the run is short jobs.
    jobs.sort_by_key(|&(_, p, _)| !spec.policies[p].uses_fragmentation());
    let results = parallel(&jobs, spec.threads, |&(t, p, s)| {
        let started = Instant::now();
        let run = replay_bounded(
            &traces[t],
            &mixes[t],
            spec.policies[p],
            spec.seeds[s],
            spec.inflate,
            spec.search_limit,
        );
        (run, started.elapsed().as_secs_f64())
    });
    let mut reports = Vec::new();
    for (t, trace) in traces.iter().enumerate() {
        for (p, policy) in spec.policies.iter().enumerate() {
            let mut runs: Vec<(SeedRun, f64)> = jobs
                .iter()
                .zip(results.iter())
                .filter(|((jt, jp, _), _)| *jt == t && *jp == p)
                .filter_map(|(_, r)| r.clone())
                .collect();
            runs.sort_by_key(|(r, _)| r.seed);
            let secs = runs.iter().map(|(_, s)| s).sum();
            let runs = runs.into_iter().map(|(r, _)| r).collect();
            reports.push(PolicyReport::new(
                &trace.name,
                *policy,
                runs,
                secs,
                trace.capacity_milli(),
            ));
        }
    }
    reports
}

/// `f` of every job, on `threads` std threads (each job independent and
/// single-threaded: a shared job counter is all the coordination needed), in
/// job order.
pub fn parallel<J: Sync, R: Send + Clone>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> R + Sync,
) -> Vec<Option<R>> {
    let results: Mutex<Vec<Option<R>>> = Mutex::new(vec![None; jobs.len()]);
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(k) else { break };
                let out = f(job);
                if let Ok(mut r) = results.lock() {
                    r[k] = Some(out);
                }
            });
        }
    });
    results.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{load_nodes, load_tasks};
    use std::path::Path;

    const DATA: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/alibaba-gpu-v2023"
    );

    /// A slice of the real trace: every 8th node, the first 1,000 tasks.
    fn slice() -> Option<Trace> {
        let nodes = load_nodes(&Path::new(DATA).join("openb_node_list_gpu_node.csv")).ok()?;
        let tasks = load_tasks(&Path::new(DATA).join("openb_pod_list_default.csv")).ok()?;
        Some(Trace {
            name: "slice".into(),
            nodes: nodes.into_iter().step_by(8).collect(),
            tasks: tasks.into_iter().take(1000).collect(),
        })
    }

    #[test]
    fn replay_on_a_slice_of_the_real_trace_is_deterministic_and_sane() {
        let Some(trace) = slice() else {
            eprintln!("trace data not found under {DATA}; skipping");
            return;
        };
        let spec = RunSpec {
            policies: vec![PolicyName::Random, PolicyName::Fgd, PolicyName::Caldera],
            seeds: vec![42, 43],
            inflate: 1.3,
            threads: 2,
            search_limit: caldera_scheduling::placement::placer::DEFAULT_SEARCH_LIMIT,
        };
        let a = run_policies(std::slice::from_ref(&trace), &spec);
        let b = run_policies(std::slice::from_ref(&trace), &spec);
        for (x, y) in a.iter().zip(b.iter()) {
            assert_eq!(
                x.alloc_pct_at_130, y.alloc_pct_at_130,
                "{} is deterministic",
                x.policy
            );
            assert!(
                x.alloc_pct_at_100 > 50.0 && x.alloc_pct_at_130 <= 100.0,
                "{}",
                x.text()
            );
            assert!(x
                .per_seed
                .iter()
                .all(|r| r.arrived_pct_at_end > 120.0 && r.arrived_pct_at_end <= 130.0));
        }
        // Fragmentation-aware placement beats random placement even on a slice.
        assert!(
            a[1].alloc_pct_at_130 > a[0].alloc_pct_at_130,
            "{}\n{}",
            a[1].text(),
            a[0].text()
        );
    }
}
