//! Memory at fleet scale: one control plane holding 1,000 nodes (fake agents
//! over real WebSockets, heartbeating every second) and 100,000 tasks; and
//! one real node agent, idle and with workloads running.
use super::start_latency::wait_connected;
use super::stats::{cpu_seconds, loadavg, rss_kib, rss_line};
use super::submit::burst;
use super::Setup;
use crate::fake_node;
use crate::process::{wait_until, Agent};
use crate::JOIN_TOKEN;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many nodes a heartbeat thread joins before it heartbeats the ones it has.
const JOIN_BATCH: usize = 20;

/// Counters the heartbeat threads share with the run.
#[derive(Default)]
struct FleetCounters {
    joined: AtomicUsize,
    join_errors: AtomicUsize,
    heartbeat_errors: AtomicUsize,
    /// Rounds that took longer than the 1 s heartbeat period.
    late_rounds: AtomicUsize,
    stop: AtomicBool,
}

/// One thread's share of the fleet: joins `names` a batch at a time and sends
/// every joined node a heartbeat each second until told to stop.
fn heartbeat_loop(addr: String, names: Vec<String>, c: Arc<FleetCounters>) {
    let mut pending = names.into_iter();
    let mut live: Vec<(TcpStream, u64)> = Vec::new();
    while !c.stop.load(Ordering::Relaxed) {
        let round = Instant::now();
        for name in pending.by_ref().take(JOIN_BATCH) {
            match fake_node::join(&addr, JOIN_TOKEN, &name, 8) {
                Ok(s) => {
                    live.push(s);
                    c.joined.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    c.join_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        for (s, epoch) in live.iter_mut() {
            if fake_node::heartbeat(s, *epoch).is_err() {
                c.heartbeat_errors.fetch_add(1, Ordering::Relaxed);
            }
            fake_node::drain(s);
        }
        let spent = round.elapsed();
        match Duration::from_secs(1).checked_sub(spent) {
            Some(rest) => std::thread::sleep(rest),
            None => {
                c.late_rounds.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Connected and lost node counts from `GET /v1/nodes` (says so when the
/// list did not come back, rather than reporting zero nodes).
fn node_counts(api: &crate::http::Api) -> (usize, usize) {
    let r = api.get("/v1/nodes");
    if r.status != 200 {
        println!(
            "fleet: GET /v1/nodes answered {} (0 = no answer): {}",
            r.status, r.body
        );
    }
    let nodes = r.data()["nodes"].as_array().cloned().unwrap_or_default();
    let connected = nodes.iter().filter(|n| n["connected"] == true).count();
    let lost = nodes.iter().filter(|n| n["state"] == "lost").count();
    (connected, lost)
}

/// The largest VmRSS of `pid` over `samples` readings a second apart, MiB.
fn peak_rss_mib(pid: u32, samples: usize) -> f64 {
    let mut peak = 0;
    for _ in 0..samples {
        peak = peak.max(rss_kib(pid).map(|(r, _)| r).unwrap_or(0));
        std::thread::sleep(Duration::from_secs(1));
    }
    peak as f64 / 1024.0
}

/// What `n` scrapes of `/metrics` in a row cost: the median and largest
/// time to the whole body, and the body's size.
fn scrape_cost(api: &crate::http::Api, n: usize) -> String {
    let mut ms = Vec::with_capacity(n);
    let mut bytes = 0;
    for _ in 0..n {
        let t = Instant::now();
        let r = api.get("/metrics");
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if r.status != 200 {
            return format!("answered {} (0 = no answer)", r.status);
        }
        bytes = r.body.as_str().map_or(0, str::len);
    }
    ms.sort_by(f64::total_cmp);
    format!(
        "{n} scrapes: median {:.1} ms, largest {:.1} ms; body {:.0} KiB",
        ms[n / 2],
        ms[n - 1],
        bytes as f64 / 1024.0
    )
}

/// `bench fleet`: the control plane's part.
pub fn run(
    setup: &Setup,
    nodes: usize,
    tasks: usize,
    threads: usize,
    concurrency: usize,
    hold: Duration,
) -> Result<(), String> {
    let dir = setup.scratch("fleet");
    // Tasks placed on fake nodes are never started by them: keep them in
    // Scheduled (holding their allocation) instead of failing after 2 minutes.
    let cp = setup.control_plane(&dir, &[("CALDERA_PREPARING_TIMEOUT_MS", "86400000")]);
    let pid = cp.pid().unwrap_or(0);
    let op = cp.operator();
    println!("fleet: empty control plane RSS {}", rss_line(pid));
    let counters = Arc::new(FleetCounters::default());
    let threads = threads.max(1);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let names = (t..nodes).step_by(threads).map(|i| format!("fleet-{i:04}"));
            let (addr, c) = (cp.addr.clone(), counters.clone());
            let names: Vec<String> = names.collect();
            std::thread::spawn(move || heartbeat_loop(addr, names, c))
        })
        .collect();
    let t0 = Instant::now();
    let all_joined = wait_until(Duration::from_secs(120), || {
        counters.joined.load(Ordering::Relaxed) + counters.join_errors.load(Ordering::Relaxed)
            >= nodes
    });
    let (connected, lost) = node_counts(&op);
    println!(
        "fleet: {} nodes joined in {:.1} s (all: {all_joined}, join errors {}), {connected} connected, {lost} lost; RSS {}",
        counters.joined.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64(),
        counters.join_errors.load(Ordering::Relaxed),
        rss_line(pid)
    );
    let token = cp.tenant("fleet");
    let b = burst(
        &cp.addr,
        &token,
        "fleet",
        tasks,
        concurrency,
        setup.deadline,
    );
    println!("fleet: submissions with {nodes} nodes: {}", b.describe());
    std::thread::sleep(Duration::from_secs(5));
    let peak = peak_rss_mib(pid, 10);
    let (connected, lost) = node_counts(&op);
    println!(
        "fleet: holding {connected} connected nodes ({lost} lost) and {} tasks: RSS {}, largest VmRSS over 10 s {peak:.1} MiB; heartbeat errors {}, late heartbeat rounds {}; load {}",
        b.latencies.len(),
        rss_line(pid),
        counters.heartbeat_errors.load(Ordering::Relaxed),
        counters.late_rounds.load(Ordering::Relaxed),
        loadavg()
    );
    println!(
        "fleet: /metrics with {connected} nodes and {} tasks: {}",
        b.latencies.len(),
        scrape_cost(&op, 20)
    );
    // Does the resident set keep growing while nothing but heartbeats arrive?
    let held = Instant::now();
    let mut cpu = cpu_seconds(pid).unwrap_or(0.0);
    while held.elapsed() < hold {
        std::thread::sleep(Duration::from_secs(5));
        let now = cpu_seconds(pid).unwrap_or(0.0);
        println!(
            "fleet: +{:>3.0} s holding: RSS {}, server CPU {:.0}% of one core",
            held.elapsed().as_secs_f64(),
            rss_line(pid),
            (now - cpu) / 5.0 * 100.0
        );
        cpu = now;
    }
    let (now, hwm) = rss_kib(pid).unwrap_or_default();
    let (now, hwm) = (now as f64 / 1024.0, hwm as f64 / 1024.0);
    counters.stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    println!("\n| control plane holding | VmRSS (largest of 10 s) | VmRSS at end | VmHWM (peak) | target |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| {connected} nodes + {} tasks | {peak:.1} MiB | {now:.1} MiB | {hwm:.1} MiB | < 1024 MiB |",
        b.latencies.len()
    );
    drop(cp);
    setup.clean(&dir);
    Ok(())
}

/// `bench agent-memory`: one real agent with 8 simulated A100s, idle and then
/// with `workloads` running `sleep` tasks.
pub fn agent_memory(setup: &Setup, workloads: usize) -> Result<(), String> {
    let dir = setup.scratch("agent-memory");
    let cp = setup.control_plane(&dir, &[]);
    let agent = Agent::start(&setup.bin, &cp, "rss-node", "8xA100-80GB", &dir);
    if !wait_connected(&cp, &["rss-node"], Duration::from_secs(20)) {
        return Err(format!(
            "agent did not connect; see {}",
            agent.log.display()
        ));
    }
    let pid = agent.pid().unwrap_or(0);
    std::thread::sleep(Duration::from_secs(3));
    let idle = peak_rss_mib(pid, 5);
    println!(
        "agent idle: largest VmRSS over 5 s {idle:.1} MiB; now {}",
        rss_line(pid)
    );
    let api = cp.api(&cp.tenant("rss"));
    for i in 0..workloads {
        let body = serde_json::json!({"task_id": format!("sleeper-{i}"), "task_type": "training",
            "resources": {"gpu": {"count": 1, "memory_gb": 10}, "cpu": {"cores": 1}},
            "command": ["sleep", "600"]});
        let r = api.post("/v1/tasks", &body.to_string());
        if r.status != 201 {
            return Err(format!("sleeper-{i}: {} {}", r.status, r.body));
        }
    }
    let running = wait_until(Duration::from_secs(20), || {
        (0..workloads)
            .all(|i| api.get(&format!("/v1/tasks/sleeper-{i}")).data()["state"] == "running")
    });
    if !running {
        return Err("the sleep workloads did not all start".into());
    }
    std::thread::sleep(Duration::from_secs(3));
    let busy = peak_rss_mib(pid, 5);
    println!(
        "agent with {workloads} running workloads: largest VmRSS over 5 s {busy:.1} MiB; now {}",
        rss_line(pid)
    );
    for i in 0..workloads {
        api.post(&format!("/v1/tasks/sleeper-{i}/release"), "");
    }
    println!("\n| node agent (8 simulated A100-80GB) | VmRSS | target |");
    println!("|---|---:|---:|");
    println!("| idle | {idle:.1} MiB | < 30 MiB |");
    println!("| {workloads} running `sleep` workloads | {busy:.1} MiB | < 30 MiB |");
    drop(agent);
    drop(cp);
    setup.clean(&dir);
    Ok(())
}
