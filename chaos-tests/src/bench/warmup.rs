//! `bench warmup`, model warmup measured: N real agents on this machine, a
//! generated weights file behind an origin whose bandwidth is capped — the
//! EMULATION of saturated shared storage (an NFS server every node reads at
//! once); loopback itself is far faster — and a service of N replicas, one
//! per node, submitted cold. Three ways of warming, measured side by side
//! in one run, each on a fresh cluster with empty caches:
//!
//! - (a) every node pulls from the origin at once (max-origin-pulls-per-version
//!   = max-origin-pulls = N, peer-warmup off);
//! - (b) staggered origin pulls only (per-version 1, peer-warmup off);
//! - (c0) staggered plus peer-to-peer from verified copies only
//!   (peer-stream-partial off: a peer serves once its copy is verified);
//! - (c) staggered plus peer-to-peer (the defaults: a peer still reading
//!   streams its copy on as it arrives).
//!
//! Then, on (c)'s warm cluster, warm starts (cache hits) from placement to
//! running, and the cost of verifying a cached file.
use super::stats::{loadavg, ms, wall_ms, Sample};
use super::Setup;
use crate::cluster::{start_agents, AgentSpec};
use crate::models::{logged, Counters};
use crate::origin::{label, Origin, OriginOptions};
use crate::process::{wait_until, Agent, ControlPlane};
use crate::weights::{generate, sha256_file, WeightsFile};
use serde_json::Value;
use std::time::{Duration, Instant};

/// What `bench warmup` was asked to do.
#[derive(Debug, Clone)]
pub struct WarmupRun {
    pub nodes: usize,
    pub size_bytes: u64,
    /// The origin's cap, bytes/s (the emulation of saturated shared storage).
    pub origin_bytes_per_s: u64,
    /// Rounds of (a), (b), (c), interleaved.
    pub rounds: usize,
    /// Warm starts timed on the last warm cluster.
    pub warm_starts: usize,
}

/// One way of warming: its name and the server configuration that selects it.
struct Scenario {
    key: &'static str,
    what: &'static str,
    env: Vec<(&'static str, String)>,
}

fn scenarios(nodes: usize) -> Vec<Scenario> {
    let n = nodes.to_string();
    vec![
        Scenario {
            key: "a",
            what: "every node pulls from the origin at once",
            env: vec![
                ("CALDERA_MAX_ORIGIN_PULLS_PER_VERSION", n.clone()),
                ("CALDERA_MAX_ORIGIN_PULLS", n),
                ("CALDERA_PEER_WARMUP", "false".into()),
            ],
        },
        Scenario {
            key: "b",
            what: "staggered origin pulls only (1 per version)",
            env: vec![
                ("CALDERA_MAX_ORIGIN_PULLS_PER_VERSION", "1".into()),
                ("CALDERA_PEER_WARMUP", "false".into()),
            ],
        },
        Scenario {
            key: "c0",
            what: "staggered + peer-to-peer, verified copies only",
            env: vec![("CALDERA_PEER_STREAM_PARTIAL", "false".into())],
        },
        Scenario {
            key: "c",
            what: "staggered + peer-to-peer, streaming (defaults)",
            env: vec![],
        },
    ]
}

/// The failure detection of this benchmark: N agents hashing and writing
/// GBs on a small machine may send a heartbeat late; a node declared lost
/// would have its replica replaced, which is not what is measured.
const SLOW_DETECTION: &[(&str, &str)] = &[
    ("CALDERA_HEARTBEAT_INTERVAL_MS", "1000"),
    ("CALDERA_NODE_TIMEOUT_MS", "60000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "120000"),
];

/// One cold rollout's figures.
#[derive(Debug, Clone)]
struct Rollout {
    /// Submission to the last replica's `ready` (server stamps; None when
    /// a replica's history has none).
    all_ready: Option<Duration>,
    /// Submission to the last replica's process start (its own output).
    all_running: Duration,
    /// The origin's own count, and the nodes' counters.
    origin_bytes: u64,
    origin_gets: usize,
    nodes_from_origin: u64,
    nodes_from_peers: u64,
}

/// A cluster of `nodes` cached agents with one GPU each, the weights
/// registered as `m:v1` behind a fresh capped origin.
struct Cluster {
    cp: ControlPlane,
    agents: Vec<Agent>,
    origin: Origin,
}

fn start_cluster(
    setup: &Setup,
    dir: &std::path::Path,
    run: &WarmupRun,
    w: &WeightsFile,
    env: &[(&str, &str)],
) -> Result<Cluster, String> {
    let origin = Origin::serve(&w.path, OriginOptions::capped(run.origin_bytes_per_s))
        .map_err(|e| format!("origin: {e}"))?;
    let mut all: Vec<(&str, &str)> = SLOW_DETECTION.to_vec();
    all.extend_from_slice(env);
    let cp = setup.control_plane(dir, &all);
    // Twice the model, in decimal GB, so one version always fits.
    let cache_gb = format!("{:.3}", 2.0 * run.size_bytes as f64 / 1e9);
    let specs: Vec<AgentSpec> = (0..run.nodes)
        .map(|i| AgentSpec::with_cache(&format!("warm-{i}"), "1xA100-80GB", &cache_gb))
        .collect();
    let agents = start_agents(&setup.bin, &cp, dir, &specs, 0);
    let r = cp
        .operator()
        .register_model("m", "v1", &w.spec(&origin.url()));
    if r.status != 201 {
        return Err(format!("register: {} {}", r.status, r.body));
    }
    Ok(Cluster { cp, agents, origin })
}

/// `at_ms` of the first `state` in a task view's history.
fn stamp(view: &Value, state: &str) -> Option<u64> {
    view["history"]
        .as_array()?
        .iter()
        .find(|h| h["state"] == state)
        .and_then(|h| h["at_ms"].as_u64())
}

/// A replica's process: it notes when it started (unix ms, its own clock:
/// the host's), then idles. What is timed is when the processes really ran,
/// from their own output, not what the control plane believes.
const WORKLOAD: &str = "echo started_ms=$(date +%s%3N); exec sleep 3600";

/// A rollout's replicas: when it was submitted (unix ms, the clock of the
/// server's stamps: same machine), each replica's view and when its process
/// started.
struct Replicas {
    submitted: u64,
    views: Vec<Value>,
    started: Vec<u64>,
}

/// Submits an `n`-replica service `id` of `m:v1` and waits until every
/// replica's process has started.
fn roll_out(
    c: &Cluster,
    api: &crate::http::Api,
    id: &str,
    n: usize,
    limit: Duration,
) -> Result<Replicas, String> {
    let body = serde_json::json!({
        "task_id": id, "task_type": "inference", "replicas": n, "model": "m:v1",
        "resources": crate::models::node_sized(),
        "command": ["sh", "-c", WORKLOAD],
    });
    let submitted = wall_ms();
    let r = api.post("/v1/tasks", &body.to_string());
    if r.status != 201 {
        return Err(format!("{id}: submit answered {} {}", r.status, r.body));
    }
    let ids: Vec<String> = (0..n).map(|i| format!("{id}.r{i}")).collect();
    let mut started: Vec<Option<u64>> = vec![None; n];
    let t0 = Instant::now();
    while started.iter().any(Option::is_none) {
        if t0.elapsed() > limit {
            return Err(format!(
                "{id}: not all started after {limit:?}: {started:?}; load {}; logs under {}",
                loadavg(),
                c.cp.log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
        for (i, t) in started.iter_mut().enumerate().filter(|(_, t)| t.is_none()) {
            *t = logged(api, &ids[i], "started_ms").and_then(|v| v.parse().ok());
        }
    }
    Ok(Replicas {
        submitted,
        views: ids.iter().map(|i| api.task(i)).collect(),
        started: started.into_iter().flatten().collect(),
    })
}

fn cold(
    setup: &Setup,
    run: &WarmupRun,
    w: &WeightsFile,
    s: &Scenario,
    round: usize,
) -> Result<(Rollout, Option<Cluster>), String> {
    let dir = setup.scratch(&format!("warmup-{}-{round}", s.key));
    let env: Vec<(&str, &str)> = s.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let c = start_cluster(setup, &dir, run, w, &env)?;
    let api = c.cp.api(&c.cp.tenant("bench"));
    let r = roll_out(&c, &api, "svc", run.nodes, setup.deadline)?;
    let since = |at: u64| Duration::from_millis(at.saturating_sub(r.submitted));
    let ready: Vec<u64> = r.views.iter().filter_map(|v| stamp(v, "ready")).collect();
    let op = c.cp.operator();
    // The counters come with heartbeats: wait for every node's bytes.
    let mut counters: Vec<Counters> = Vec::new();
    let size = run.size_bytes;
    wait_until(Duration::from_secs(15), || {
        counters = c.agents.iter().map(|a| op.counters(&a.name)).collect();
        counters.iter().all(|c| c.bytes_fetched() >= size)
    });
    let rollout = Rollout {
        all_ready: (ready.len() == run.nodes)
            .then(|| since(ready.iter().copied().max().unwrap_or(0))),
        all_running: since(r.started.iter().copied().max().unwrap_or(0)),
        origin_bytes: c.origin.bytes_served(),
        origin_gets: c.origin.gets().len(),
        nodes_from_origin: counters.iter().map(|c| c.bytes_from_origin).sum(),
        nodes_from_peers: counters.iter().map(|c| c.bytes_from_peers).sum(),
    };
    println!(
        "warmup ({}) round {round}: {}: every replica's process started after {:.2} s (server's last `ready` stamp: {}); origin served {} in {} GETs ({:.2} x the model); nodes' counters: {} from the origin, {} from peers; load {}",
        s.key,
        s.what,
        rollout.all_running.as_secs_f64(),
        secs(rollout.all_ready),
        gib(rollout.origin_bytes),
        rollout.origin_gets,
        rollout.origin_bytes as f64 / run.size_bytes as f64,
        gib(rollout.nodes_from_origin),
        gib(rollout.nodes_from_peers),
        loadavg()
    );
    let keep = s.key == "c" && round + 1 == run.rounds;
    if keep {
        release(&api, "svc", run.nodes, setup.deadline)?;
        return Ok((rollout, Some(c)));
    }
    drop(c);
    setup.clean(&dir);
    Ok((rollout, None))
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("missing from a history".into(), |d| {
        format!("{:.2} s", d.as_secs_f64())
    })
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Warm starts on a cluster whose every node holds the verified copy: a
/// one-replica service at a time, placement (the server's `scheduled`
/// stamp) to its process's first line (its own clock, the same host's; the
/// workload is `sh` printing the time, no start-up of its own to speak of),
/// and the `warming` -> `ready` part of it (the hit's checksum; server stamps).
fn warm_starts(c: &Cluster, run: &WarmupRun, limit: Duration) -> Result<(Sample, Sample), String> {
    let api = c.cp.api(&c.cp.tenant("warm"));
    let (mut total, mut checksum) = (Vec::new(), Vec::new());
    for i in 0..run.warm_starts {
        let id = format!("hit-{i}");
        let r = roll_out(c, &api, &id, 1, limit)?;
        let v = &r.views[0];
        let started = r.started.first().copied().unwrap_or(0);
        if let Some(placed) = stamp(v, "scheduled") {
            total.push(Duration::from_millis(started.saturating_sub(placed)));
        }
        if let (Some(w), Some(ready)) = (stamp(v, "warming"), stamp(v, "ready")) {
            checksum.push(Duration::from_millis(ready.saturating_sub(w)));
        }
        release(&api, &id, 1, limit)?;
    }
    Ok((Sample::new(total), Sample::new(checksum)))
}

/// Releases service `id` and waits until its `n` replicas have left their nodes.
fn release(api: &crate::http::Api, id: &str, n: usize, limit: Duration) -> Result<(), String> {
    let r = api.post(&format!("/v1/tasks/{id}/release"), "{}");
    if r.status != 200 {
        return Err(format!("release {id}: {} {}", r.status, r.body));
    }
    let gone = wait_until(limit, || {
        (0..n).all(|i| {
            matches!(
                api.task(&format!("{id}.r{i}"))["state"].as_str(),
                Some("released" | "finished")
            )
        })
    });
    if !gone {
        return Err(format!("{id} was not released"));
    }
    Ok(())
}

fn median(v: &[Duration]) -> Duration {
    Sample::new(v.to_vec()).pct(50.0)
}

/// `bench warmup`.
pub fn run(setup: &Setup, run: &WarmupRun) -> Result<(), String> {
    let origin_label = label(run.origin_bytes_per_s);
    let weights_dir = setup.scratch("warmup-weights");
    let t = Instant::now();
    let w = generate(&weights_dir.join("m-v1.bin"), run.size_bytes, 1)
        .map_err(|e| format!("weights: {e}"))?;
    println!(
        "warmup: {} nodes, a {} generated weights file ({} bytes, written in {:.1} s); {origin_label}; load {}",
        run.nodes,
        gib(run.size_bytes),
        run.size_bytes,
        t.elapsed().as_secs_f64(),
        loadavg()
    );
    let t = Instant::now();
    let sum = sha256_file(&w.path).map_err(|e| format!("hash: {e}"))?;
    let hashed = t.elapsed();
    if sum != w.sha256 {
        return Err("the weights file changed on disk".into());
    }
    let all = scenarios(run.nodes);
    let mut results: Vec<Vec<Rollout>> = vec![Vec::new(); all.len()];
    let mut warm = None;
    for round in 0..run.rounds {
        for (i, s) in all.iter().enumerate() {
            let (r, kept) = cold(setup, run, &w, s, round)?;
            results[i].push(r);
            if kept.is_some() {
                warm = kept;
            }
        }
    }
    let hits = match &warm {
        Some(c) if run.warm_starts > 0 => Some(warm_starts(c, run, Duration::from_secs(120))?),
        _ => None,
    };
    drop(warm);
    report(run, &origin_label, &all, &results, hits.as_ref(), hashed);
    setup.clean(&weights_dir);
    Ok(())
}

fn report(
    run: &WarmupRun,
    origin_label: &str,
    all: &[Scenario],
    results: &[Vec<Rollout>],
    hits: Option<&(Sample, Sample)>,
    hashed: Duration,
) {
    let size = run.size_bytes as f64;
    let running: Vec<Duration> = results
        .iter()
        .map(|r| median(&r.iter().map(|r| r.all_running).collect::<Vec<_>>()))
        .collect();
    println!(
        "\n{origin_label}. {} agents, {} weights, a service of {} replicas (one per node) submitted cold; medians of {} round(s), scenarios interleaved.\n",
        run.nodes,
        gib(run.size_bytes),
        run.nodes,
        run.rounds
    );
    println!("| scenario | all replicas running: last process start (median) | server's last `ready` stamp (median) | read from the origin (median) | x model size (median; max of the rounds) | all-running speed-up vs (a) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, s) in all.iter().enumerate() {
        let stamped: Vec<Duration> = results[i].iter().filter_map(|r| r.all_ready).collect();
        let ready = (stamped.len() == results[i].len()).then(|| median(&stamped));
        let mut bytes: Vec<u64> = results[i].iter().map(|r| r.origin_bytes).collect();
        bytes.sort_unstable();
        let b = bytes.get(bytes.len() / 2).copied().unwrap_or(0);
        let most = bytes.last().copied().unwrap_or(0);
        println!(
            "| ({}) {} | {:.2} s | {} | {} | {:.2}; {:.2} | {:.2} x |",
            s.key,
            s.what,
            running[i].as_secs_f64(),
            secs(ready),
            gib(b),
            b as f64 / size,
            most as f64 / size,
            running[0].as_secs_f64() / running[i].as_secs_f64().max(1e-9)
        );
    }
    println!(
        "\nTargets: (c) reads the origin at most 1.2 x the model size; (c) has all replicas running at least 3 x sooner than (a). (c0) is (c) without streaming from peers still reading, for comparison."
    );
    if let Some((total, checksum)) = hits {
        println!(
            "\nwarm start (cache hit), placement (scheduled) -> the process's first line, {} starts: {}",
            total.len(),
            total.describe()
        );
        if checksum.is_empty() {
            println!(
                "  of which warming -> ready (the hit's checksum): not measured, no start's history has both stamps"
            );
        } else if checksum.pct(50.0) < Duration::from_millis(10) {
            // Under 10 ms for a GiB is no hash at all: the agent skipped it
            // (an untouched copy, `node/src/cache/stamp.rs`); a rate from it
            // would be nonsense.
            println!(
                "  of which warming -> ready: {} (no hash: the copy was untouched since its last full check in this agent's run)",
                checksum.describe()
            );
        } else {
            println!(
                "  of which warming -> ready (the hit's checksum of {}): {}; = {:.2} GB/s at the median",
                gib(run.size_bytes),
                checksum.describe(),
                size / 1e9 / checksum.pct(50.0).as_secs_f64().max(1e-9)
            );
        }
        println!(
            "  target: under 1 s plus the workload's own start-up (here `sh` printing the time: a few ms)"
        );
    }
    println!(
        "verifying a cached file: sha256 of {} by the bench process (sha2, page cache warm): {} = {:.2} GB/s",
        gib(run.size_bytes),
        ms(hashed),
        size / 1e9 / hashed.as_secs_f64().max(1e-9)
    );
}
