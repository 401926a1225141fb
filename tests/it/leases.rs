//! Leases, control-plane side, with real processes: a
//! node goes silent (its agent SIGSTOPped). It is reported lost within 5 s;
//! a training task (`on_node_loss: fence` by default) is not started
//! elsewhere before the lease and the stop grace have passed since the last
//! renewal, even across a control-plane restart in between; an inference
//! replica (`replace`) is replaced within 5 s. Times come from the workloads'
//! own output (`date` at their start) and the control plane's events.
//!
//! The harness runs with `workload-lease-ms` 2000, `stop-grace-ms` 2000,
//! heartbeats every 250 ms and a node timeout of 1.5 s.
use caldera_chaos_tests::{two_nodes, wait_until, wall_ms, Agent, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
/// The harness's lease plus its stop grace: no fenced copy may start sooner.
const LEASE_PLUS_GRACE_MS: u64 = 2000 + 2000;

/// A workload that appends "<allocation> <start ms>" to `starts`, then sleeps.
fn command(starts: &Path) -> Value {
    serde_json::json!([
        "sh",
        "-c",
        format!(
            "echo $CALDERA_ALLOCATION_ID $(date +%s%3N) >> {}; exec sleep 120",
            starts.display()
        )
    ])
}

/// The start times once `n` starts wrote theirs (or what there is after
/// 20 s): `running` comes with the process's start, its line a moment later
/// (the shell's `date`, slower on a loaded machine).
fn starts_when(p: &Path, n: usize) -> Vec<(String, u64)> {
    let mut s = Vec::new();
    wait_until(Duration::from_secs(20), || {
        s = starts(p);
        s.len() >= n
    });
    s
}

/// The start time (ms) each allocation wrote, in order.
fn starts(p: &Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (a, t) = l.split_once(' ')?;
            Some((a.to_string(), t.trim().parse().ok()?))
        })
        .collect()
}

fn cluster(dir: &Path) -> (ControlPlane, Agent, Agent) {
    two_nodes(Path::new(BIN), dir, &[], "2xA100-80GB", "2xA100-80GB")
}

/// The events about `node` of `kind`.
fn events(cp: &ControlPlane, node: &str, kind: &str) -> Vec<Value> {
    cp.operator().get(&format!("/v1/events?node={node}")).data()["events"]
        .as_array()
        .map(|e| e.iter().filter(|e| e["kind"] == kind).cloned().collect())
        .unwrap_or_default()
}

fn node_of(v: &Value) -> String {
    v["allocation"]["node"].as_str().unwrap_or("").to_string()
}

/// Submits the fenced training task `train`, noting its starts in `file`.
fn submit_training(api: &Api, file: &Path) {
    let spec = serde_json::json!({
        "task_id": "train", "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": command(file)
    });
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
}

/// Pauses the agent running `id`, returns (its node, the pause time).
fn silence<'a>(api: &Api, id: &str, a: &'a Agent, b: &'a Agent) -> (String, u64, &'a Agent) {
    let v = api.wait_task(id, 20, "running", |v| v["state"] == "running");
    let node = node_of(&v);
    let victim = if node == "node-a" { a } else { b };
    let at = wall_ms();
    victim.pause();
    (node, at, victim)
}

#[test]
fn a_fenced_training_task_starts_elsewhere_only_after_lease_and_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, a, b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    let file = dir.path().join("starts");
    submit_training(&api, &file);
    let (node, paused_at, victim) = silence(&api, "train", &a, &b);

    // While it waits, its pending reason says so.
    let waiting = api.wait_task("train", 10, "the fence notice", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("for its lease to run out before starting elsewhere"))
    });
    assert!(waiting["fenced_until"].is_string(), "{waiting:#}");
    let moved = api.wait_task("train", 30, "running elsewhere", |v| {
        v["state"] == "running" && node_of(v) != node
    });
    let lost = events(&cp, &node, "node_lost");
    let lost_at = lost.first().and_then(|e| e["at_ms"].as_u64()).unwrap_or(0);
    let s = starts_when(&file, 2);
    assert_eq!(s.len(), 2, "{s:?}");
    let (detected, restarted) = (
        lost_at.saturating_sub(paused_at),
        s[1].1.saturating_sub(paused_at),
    );
    eprintln!("fence: node lost {detected} ms after the pause; second copy started {restarted} ms after it (lease + grace = {LEASE_PLUS_GRACE_MS} ms)");
    assert!(
        detected <= 5000,
        "node lost only {detected} ms after going silent"
    );
    assert!(
        restarted >= LEASE_PLUS_GRACE_MS,
        "the fenced task started elsewhere {restarted} ms after its node went silent, before lease + grace"
    );
    assert_eq!(
        moved["retries_used"], 1,
        "a lost node is a failure: {moved:#}"
    );
    victim.resume();
}

#[test]
fn a_control_plane_restarted_during_the_fence_does_not_requeue_early() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, a, b) = cluster(dir.path());
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    let file = dir.path().join("starts");
    submit_training(&api, &file);
    let (node, paused_at, victim) = silence(&api, "train", &a, &b);
    // The fence is recorded (its event is in the task's batch): restart inside it.
    assert!(
        wait_until(Duration::from_secs(10), || !events(
            &cp,
            &node,
            "node_fenced"
        )
        .is_empty()),
        "train was not fenced on {node}"
    );
    cp.restart(); // kill -9 and start again, inside the fence
    let api = cp.api(&token);
    api.wait_task("train", 30, "running elsewhere", |v| {
        v["state"] == "running" && node_of(v) != node
    });
    let s = starts_when(&file, 2);
    assert_eq!(s.len(), 2, "{s:?}");
    let restarted = s[1].1.saturating_sub(paused_at);
    eprintln!(
        "fence across a control-plane restart: second copy started {restarted} ms after the pause"
    );
    assert!(
        restarted >= LEASE_PLUS_GRACE_MS,
        "started elsewhere {restarted} ms after the pause: the restart forgot the fence"
    );
    victim.resume();
}

#[test]
fn an_inference_replica_is_replaced_within_five_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, a, b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    let file = dir.path().join("starts");
    let spec = serde_json::json!({
        "task_id": "svc", "task_type": "inference", "replicas": 1,
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": command(&file)
    });
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    let (node, paused_at, victim) = silence(&api, "svc.r0", &a, &b);
    api.wait_task("svc.r0", 20, "replaced elsewhere", |v| {
        v["state"] == "running" && node_of(v) != node
    });
    let s = starts_when(&file, 2);
    assert_eq!(s.len(), 2, "{s:?}");
    let replaced = s[1].1.saturating_sub(paused_at);
    eprintln!("replace: the replica started elsewhere {replaced} ms after its node went silent");
    assert!(replaced < 5000, "replaced only after {replaced} ms");
    victim.resume();
}

/// A heartbeat as the agent sends it, numbered `seq`.
fn heartbeat(epoch: u64, seq: u64) -> Value {
    serde_json::json!({"type": "heartbeat", "epoch": epoch, "seq": seq,
        "metrics": {"gpus": [], "cpu_used_pct": 0.0, "memory_used_mb": 0, "disk_free_mb": 0,
                    "disk_read_bytes_per_s": 0, "disk_write_bytes_per_s": 0},
        "workloads": []})
}

#[test]
fn every_heartbeat_accepted_under_the_current_epoch_renews_the_lease_and_no_other() {
    use caldera_chaos_tests::{fake_node, JOIN_TOKEN};
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let (mut s, welcome) = fake_node::hello(&cp.addr, JOIN_TOKEN, "fake-1", 1, None).unwrap();
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    assert_eq!(welcome["lease_ms"], 2000, "the configured lease: {welcome}");
    let epoch = welcome["epoch"].as_u64().unwrap_or(0);
    for seq in [1, 2, 7] {
        fake_node::send(&mut s, &heartbeat(epoch, seq)).unwrap();
        let renewed = fake_node::expect(&mut s, "lease_renewed", Duration::from_secs(5)).unwrap();
        assert_eq!(renewed["epoch"], epoch, "{renewed}");
        assert_eq!(renewed["seq"], seq, "{renewed}");
    }
    // A heartbeat under another epoch renews nothing: it is refused.
    fake_node::send(&mut s, &heartbeat(epoch + 5, 8)).unwrap();
    let answer = fake_node::read_json(&mut s).unwrap();
    assert_eq!(answer["type"], "refused", "{answer}");
}
