//! Submit-to-Running on an idle cluster: one real agent with simulated GPUs,
//! tasks submitted one at a time, each only once the previous one is done.
//! Two clocks: the server's own history stamps (`at_ms` of "running" minus
//! "queued"), and the client's (POST sent to the first GET that shows running).
//! With `--image`, process and container tasks alternate on the same agent
//! (the image already pulled by a first task that is not counted), so the
//! container runtime's overhead is measured side by side in one run.
use super::stats::{loadavg, ms, Sample};
use super::Setup;
use crate::keepalive::KeepAlive;
use crate::process::{wait_until, Agent, ControlPlane};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How often the client asks whether the task runs yet.
const POLL: Duration = Duration::from_millis(2);
/// The longest any one task may take to start before the run is abandoned
/// (the first container task pulls its image).
const START_LIMIT: Duration = Duration::from_secs(60);
/// The stages between queued and running, in order, as the history names them.
const STAGES: [&str; 5] = ["queued", "scheduled", "preparing", "ready", "running"];

/// Waits until `names` are all connected, as `GET /v1/nodes` shows them.
pub fn wait_connected(cp: &ControlPlane, names: &[&str], limit: Duration) -> bool {
    let op = cp.operator();
    wait_until(limit, || {
        let r = op.get("/v1/nodes");
        let nodes = r.data()["nodes"].as_array().cloned().unwrap_or_default();
        names.iter().all(|n| {
            nodes
                .iter()
                .any(|v| v["name"] == *n && v["connected"] == true)
        })
    })
}

fn body(id: &str, reservation: bool, image: Option<&str>) -> String {
    let mut v = serde_json::json!({
        "task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 10}, "cpu": {"cores": 1}},
    });
    if !reservation {
        v["command"] = serde_json::json!(["sleep", "0.2"]);
    }
    if let Some(image) = image {
        v["image"] = serde_json::json!(image);
    }
    v.to_string()
}

/// `at_ms` of each stage in the task's history (first occurrence).
fn stamps(view: &Value) -> Vec<Option<u64>> {
    let history = view["history"].as_array().cloned().unwrap_or_default();
    STAGES
        .iter()
        .map(|s| {
            history
                .iter()
                .find(|h| h["state"] == *s)
                .and_then(|h| h["at_ms"].as_u64())
        })
        .collect()
}

/// One task's timings.
struct Start {
    ack: Duration,
    client: Duration,
    stamps: Vec<Option<u64>>,
}

fn one(
    conn: &mut KeepAlive,
    id: &str,
    reservation: bool,
    image: Option<&str>,
) -> Result<Start, String> {
    let path = format!("/v1/tasks/{id}");
    let t0 = Instant::now();
    let a = conn
        .post("/v1/tasks", &body(id, reservation, image))
        .map_err(|e| e.to_string())?;
    let ack = t0.elapsed();
    if a.status != 201 {
        return Err(format!("{id}: submit answered {}", a.status));
    }
    loop {
        let v = conn.get(&path).map_err(|e| e.to_string())?.json();
        let state = v["data"]["state"].as_str().unwrap_or("").to_string();
        if matches!(state.as_str(), "running" | "finished") {
            let client = t0.elapsed();
            return Ok(Start {
                ack,
                client,
                stamps: stamps(&v["data"]),
            });
        }
        if matches!(state.as_str(), "failed" | "cancelled" | "released") {
            return Err(format!("{id} ended {state}: {v}"));
        }
        if t0.elapsed() > START_LIMIT {
            return Err(format!("{id} not running after {START_LIMIT:?}: {v}"));
        }
        std::thread::sleep(POLL);
    }
}

/// Prints one kind's tables; its client-clock median.
fn report(label: &str, starts: &[Start]) -> Duration {
    let server = |from: usize, to: usize| {
        Sample::new(
            starts
                .iter()
                .filter_map(|s| Some(s.stamps[to]?.saturating_sub(s.stamps[from]?)))
                .map(Duration::from_millis)
                .collect(),
        )
    };
    println!("\n## {label}");
    let total = server(0, 4);
    let client = Sample::new(starts.iter().map(|s| s.client).collect());
    let ack = Sample::new(starts.iter().map(|s| s.ack).collect());
    println!("server history queued -> running: {}", total.describe());
    println!(
        "client POST -> first GET showing running (polling every {POLL:?}): {}",
        client.describe()
    );
    println!("client POST -> 201: {}", ack.describe());
    for w in 0..STAGES.len() - 1 {
        let s = server(w, w + 1);
        println!(
            "  stage {} -> {}: p50 {}, p95 {}, max {}",
            STAGES[w],
            STAGES[w + 1],
            ms(s.pct(50.0)),
            ms(s.pct(95.0)),
            ms(s.max())
        );
    }
    println!("\n| clock | median | p95 | p99 | max |");
    println!("|---|---:|---:|---:|---:|");
    for (name, s) in [
        ("server history (queued -> running)", &total),
        ("client (POST -> GET shows running)", &client),
        ("client (POST -> 201)", &ack),
    ] {
        println!(
            "| {name} | {} | {} | {} | {} |",
            ms(s.pct(50.0)),
            ms(s.pct(95.0)),
            ms(s.pct(99.0)),
            ms(s.max())
        );
    }
    client.pct(50.0)
}

/// Waits for the task to leave the node (finished, or released), so the next
/// one finds the cluster idle again.
fn settle(conn: &mut KeepAlive, id: &str, reservation: bool) {
    let path = format!("/v1/tasks/{id}");
    if reservation {
        let _ = conn.post(&format!("{path}/release"), "");
    }
    let start = Instant::now();
    while start.elapsed() < START_LIMIT {
        let v = conn.get(&path).map(|a| a.json()).unwrap_or(Value::Null);
        if matches!(
            v["data"]["state"].as_str(),
            Some("finished" | "released" | "failed" | "cancelled")
        ) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// `bench start-latency`; with `image`, process and container tasks alternate.
pub fn run(
    setup: &Setup,
    tasks: usize,
    reservation: bool,
    image: Option<&str>,
) -> Result<(), String> {
    let dir = setup.scratch("start-latency");
    let cp = setup.control_plane(&dir, &[]);
    let agent = Agent::start(&setup.bin, &cp, "bench-node", "8xA100-80GB", &dir);
    if !wait_connected(&cp, &["bench-node"], Duration::from_secs(20)) {
        return Err(format!(
            "agent did not connect; see {}",
            agent.log.display()
        ));
    }
    let token = cp.tenant("latency");
    let mut conn = KeepAlive::open(&cp.addr, &token).map_err(|e| e.to_string())?;
    if let Some(image) = image {
        // The image onto the node first: what is measured is a start with
        // the image present, not its pull.
        one(&mut conn, "pull-first", reservation, Some(image))?;
        settle(&mut conn, "pull-first", reservation);
    }
    let before = loadavg();
    let kinds: Vec<Option<&str>> = match image {
        Some(image) => vec![None, Some(image)],
        None => vec![None],
    };
    let mut starts: Vec<Vec<Start>> = kinds.iter().map(|_| Vec::new()).collect();
    for i in 0..tasks {
        for (k, kind) in kinds.iter().enumerate() {
            let id = format!("start-{i}-{k}");
            starts[k].push(one(&mut conn, &id, reservation, *kind)?);
            settle(&mut conn, &id, reservation);
        }
    }
    let what = if reservation {
        "reservation (no command)"
    } else {
        "command [sleep, 0.2]"
    };
    println!("start-latency: {tasks} tasks of each kind, one at a time, {what}, 1 agent 8xA100-80GB (simulated); load before {before}, after {}", loadavg());
    let mut medians = Vec::new();
    for (kind, starts) in kinds.iter().zip(&starts) {
        let label = match kind {
            None => "process runtime".to_string(),
            Some(image) => format!("container runtime ({image}, already on the node)"),
        };
        medians.push(report(&label, starts));
    }
    if let [process, container] = medians[..] {
        println!(
            "\ncontainer overhead, client clock: median {} vs {} (+{}, x{:.2})",
            ms(container),
            ms(process),
            ms(container.saturating_sub(process)),
            container.as_secs_f64() / process.as_secs_f64().max(1e-9)
        );
    }
    drop(agent);
    drop(cp);
    setup.clean(&dir);
    Ok(())
}
