//! `bench swap`, hot swap measured: a service of N replicas of the test
//! `infer-server` on N agents with SIMULATED GPUs (one each), swapped
//! v3 -> v4 in place while a client lists its ready endpoints and calls each
//! one every 50 ms; then, on a fresh cluster, the old way run through
//! Caldera itself: submit a v4 service beside the v3 one, wait until all
//! its replicas are ready, release v3.
//!
//! Measured, not assumed: the time per replica (from the swap's own
//! recorded steps), the total, the failed calls, and the GPU-seconds
//! allocated beyond the service's own during the change — from the
//! allocation records (`GET /v1/allocations`, each with its creation time)
//! sampled every 100 ms, integrated over the change window.
use super::Setup;
use crate::cluster::{start_agents, AgentSpec};
use crate::http::Api;
use crate::process::{wait_until, Agent, ControlPlane};
use crate::swap::{infer_service, register_versions, wait_endpoints, wait_swap_over, Poller};
use std::path::Path;
use std::time::{Duration, Instant};

/// What `bench swap` was asked to do.
#[derive(Debug, Clone)]
pub struct SwapRun {
    pub replicas: usize,
    pub size_bytes: u64,
    /// The `infer-server` binary (a test build's).
    pub server: String,
}

/// GPUs allocated now, by counting the ledger's grants.
fn gpus_allocated(op: &Api) -> f64 {
    let r = op.get("/v1/allocations");
    r.data()["ledger"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x["gpus"].as_array().map_or(0, |g| g.len()) as f64)
                .sum()
        })
        .unwrap_or(0.0)
}

/// Samples the ledger every 100 ms while `work` runs; answers the
/// GPU-seconds allocated beyond `baseline` GPUs, and `work`'s answer.
fn extra_gpu_seconds<T>(op: &Api, baseline: f64, work: impl FnOnce() -> T) -> (f64, T) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let api = op.clone();
    let sampler = std::thread::spawn(move || {
        let (mut extra, mut last) = (0.0, Instant::now());
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let g = gpus_allocated(&api);
            let now = Instant::now();
            extra += (g - baseline).max(0.0) * now.duration_since(last).as_secs_f64();
            last = now;
            std::thread::sleep(Duration::from_millis(100));
        }
        extra
    });
    let out = work();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (sampler.join().unwrap_or(0.0), out)
}

fn cluster(s: &Setup, dir: &Path, n: usize) -> (ControlPlane, Vec<Agent>) {
    let cp = s.control_plane(dir, &[("CALDERA_NODE_TIMEOUT_MS", "15000")]);
    let specs: Vec<AgentSpec> = (0..n)
        .map(|i| AgentSpec::with_cache(&format!("node-{i}"), "1xA100-80GB", "1"))
        .collect();
    let agents = start_agents(&s.bin, &cp, dir, &specs, 0);
    (cp, agents)
}

/// Seconds each replica took, from its `warming` step to its `done` one
/// (the swap's recorded events).
fn per_replica_s(op: &Api, tenant: &str) -> Vec<f64> {
    let ev = op.get(&format!("/v1/events?tenant={tenant}&task=svc&limit=1000"));
    let events = ev.data()["events"].as_array().cloned().unwrap_or_default();
    let at = |pat: &str, r: &str| {
        events
            .iter()
            .find(|e| {
                let m = e["message"].as_str().unwrap_or("");
                m.contains(pat) && m.contains(&format!("{r} "))
            })
            .and_then(|e| e["at_ms"].as_u64())
    };
    (0..)
        .map(|i| format!("svc.r{i}"))
        .take_while(|r| at("warming", r).is_some())
        .filter_map(|r| Some((at("swapped to", &r)? - at("warming", &r)?) as f64 / 1000.0))
        .collect()
}

pub fn run(s: &Setup, run: &SwapRun) -> Result<(), String> {
    let n = run.replicas;
    println!(
        "bench swap: {n} replicas of infer-server on {n} agents, SIMULATED GPUs (1xA100-80GB each), weights {} MiB",
        run.size_bytes >> 20
    );
    let spec = |id: &str, model: &str| infer_service(id, model, n as u32, &run.server, &[]);

    // In place.
    let dir = s.scratch("swap-in-place");
    let (cp, agents) = cluster(s, &dir, n);
    let op = cp.operator();
    register_versions(&op, &dir, run.size_bytes);
    let api = cp.api(&cp.tenant("bench"));
    api.post("/v1/tasks", &spec("svc", "m:v3").to_string());
    wait_endpoints(&api, "svc", n, 120);
    let baseline = gpus_allocated(&op);
    let poller = Poller::start(api.clone(), "svc");
    let begun = Instant::now();
    let (extra, view) = extra_gpu_seconds(&op, baseline, || {
        let r = api.post("/v1/tasks/svc/model", r#"{"model":"m:v4"}"#);
        if r.status != 202 {
            return Err(format!("swap refused: {:#}", r.body));
        }
        Ok(wait_swap_over(&api, "svc", 300))
    });
    let total = begun.elapsed().as_secs_f64();
    let seen = poller.finish();
    let view = view?;
    let per = per_replica_s(&op, "bench");
    println!(
        "in place: phase {}, total {total:.1} s, per replica {per:.1?} s, failed calls {} of {} ({} polls, fewest ready {}), extra GPU-seconds {extra:.1}",
        view["swap"]["phase"], seen.failed, seen.calls, seen.polls, seen.min_ready
    );
    drop((agents, cp));
    s.clean(&dir);

    // The old way: a new v4 service beside v3, then v3 released.
    let dir = s.scratch("swap-new-service");
    let (cp, agents) = cluster(s, &dir, 2 * n);
    let op = cp.operator();
    register_versions(&op, &dir, run.size_bytes);
    let api = cp.api(&cp.tenant("bench"));
    api.post("/v1/tasks", &spec("old", "m:v3").to_string());
    wait_endpoints(&api, "old", n, 120);
    let baseline = gpus_allocated(&op);
    let begun = Instant::now();
    let (double, ()) = extra_gpu_seconds(&op, baseline, || {
        api.post("/v1/tasks", &spec("new", "m:v4").to_string());
        wait_endpoints(&api, "new", n, 300);
        api.post("/v1/tasks/old/release", "{}");
        wait_until(Duration::from_secs(60), || gpus_allocated(&op) <= baseline);
    });
    let old_total = begun.elapsed().as_secs_f64();
    println!(
        "new service: total {old_total:.1} s, double-allocated GPU-seconds {double:.1} (needs {n} more GPUs free)"
    );
    println!("\n| way | total s | failed calls | extra GPU-s |\n|---|---|---|---|");
    println!(
        "| in place (`caldera swap`) | {total:.1} | {} | {extra:.1} |",
        seen.failed
    );
    println!("| new v4 service, then release v3 | {old_total:.1} | n/a | {double:.1} |");
    drop((agents, cp));
    s.clean(&dir);
    Ok(())
}
