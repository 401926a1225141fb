//! Faults against real processes: kill -9 a node agent, kill -9 the control
//! plane, pause an agent past its lease. Every acknowledged task survives, and
//! no task ever runs twice.
use caldera_chaos_tests::{
    file_lines, history_states, two_nodes, wait_until, Agent, Api, ControlPlane,
};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// A workload that appends one line per start to a file outside any node's
/// data dir, then sleeps: the file counts how often the task really started.
fn counted(id: &str, starts: &Path, secs: u32) -> String {
    serde_json::json!({
        "task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 10}, "cpu": {"cores": 1}},
        "command": ["sh", "-c", format!(
            "echo $CALDERA_ALLOCATION_ID >> {0}; echo $$ > {0}.pid.$CALDERA_ALLOCATION_ID; exec sleep {secs}",
            starts.display()
        )]
    })
    .to_string()
}

fn wait_running(api: &Api, id: &str, secs: u64) -> Value {
    api.wait_task(id, secs, "running", |v| v["state"] == "running")
}

/// Whether the workload of `allocation` (its pid recorded by [`counted`]) still runs.
fn alive(starts: &Path, allocation: &str) -> bool {
    let pid: i32 = std::fs::read_to_string(format!("{}.pid.{allocation}", starts.display()))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Gone, or a zombie waiting to be reaped: not running.
    pid > 0 && !stat.is_empty() && !stat.contains(") Z ")
}

fn start_cluster(dir: &Path) -> (ControlPlane, Agent, Agent) {
    start_cluster_with(dir, &[])
}

/// A control plane with `env` set and two agents of 2 A100s each, joined.
fn start_cluster_with(dir: &Path, env: &[(&str, &str)]) -> (ControlPlane, Agent, Agent) {
    two_nodes(Path::new(BIN), dir, env, "2xA100-80GB", "2xA100-80GB")
}

/// The killed agent's workload outlives it (its shim is not tied to the
/// agent) until its lease runs out: the lease is short here so the test sees
/// the shim stop it. (The control plane holds the requeue back until lease +
/// grace has passed, so the two never overlap: `leases.rs` checks that part.)
#[test]
fn killing_an_agent_requeues_its_task_onto_the_other_node() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, mut a, mut b) =
        start_cluster_with(dir.path(), &[("CALDERA_WORKLOAD_LEASE_MS", "1500")]);
    let api = cp.api(&cp.tenant("team-a"));
    let starts = dir.path().join("starts");
    assert_eq!(
        api.post("/v1/tasks", &counted("long-1", &starts, 120))
            .status,
        201
    );
    let first = wait_running(&api, "long-1", 20);
    let node = first["allocation"]["node"].as_str().unwrap().to_string();
    if node == "node-a" {
        a.kill9()
    } else {
        b.kill9()
    }

    let mut v = Value::Null;
    let moved = wait_until(Duration::from_secs(20), || {
        v = api.task("long-1");
        v["state"] == "running" && v["allocation"]["node"].as_str() != Some(node.as_str())
    });
    assert!(moved, "task did not move off {node}: {v:#}");
    assert_eq!(v["attempts"], 2);
    let history = history_states(&v);
    assert!(
        history.windows(2).any(|w| w == ["running", "queued"]),
        "{history:?}"
    );
    let lost = cp.operator().get(&format!("/v1/events?node={node}")).data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(lost.iter().any(|e| e["kind"] == "node_lost"), "{lost:#?}");
    // Two starts; the killed agent's workload is stopped by its own shim once
    // the lease (1.5 s) and the grace (2 s) have run out.
    assert!(
        wait_until(Duration::from_secs(5), || file_lines(&starts).len() == 2),
        "{:?}",
        file_lines(&starts)
    );
    let old = first["allocation"]["allocation_id"].as_str().unwrap_or("");
    assert!(
        wait_until(Duration::from_secs(15), || !alive(&starts, old)),
        "the dead agent's workload {old} outlived its lease"
    );
    let nodes = cp.operator().get(&format!("/v1/nodes/{node}"));
    assert_eq!(nodes.data()["state"], "lost");
}

#[test]
fn restarting_the_control_plane_loses_nothing_and_starts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    // It accepts requests no node could hold, so one can wait across the restart.
    let (mut cp, _a, _b) =
        start_cluster_with(dir.path(), &[("CALDERA_ACCEPT_UNSCHEDULABLE", "true")]);
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    let starts = dir.path().join("starts");
    assert_eq!(
        api.post("/v1/tasks", &counted("keep-running", &starts, 120))
            .status,
        201
    );
    let before = wait_running(&api, "keep-running", 20);
    // One more that waits forever (8 GPUs on one node do not exist) and one that finished.
    let queued = r#"{"task_id":"waits","task_type":"training","resources":{"gpu":{"count":8}}}"#;
    assert_eq!(api.post("/v1/tasks", queued).status, 201);
    let done = r#"{"task_id":"done","task_type":"training","resources":{"cpu":{"cores":1}},"command":["true"]}"#;
    assert_eq!(api.post("/v1/tasks", done).status, 201);
    assert!(wait_until(Duration::from_secs(20), || api.task("done")
        ["state"]
        == "finished"));

    cp.restart();
    let api = cp.api(&token);
    // Every acknowledged task is still there, in the same state.
    assert_eq!(api.task("waits")["state"], "queued");
    assert_eq!(api.task("done")["state"], "finished");
    // The agents reconnect and the running workload is adopted, not restarted.
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == 2)
    }));
    std::thread::sleep(Duration::from_secs(3)); // past the node timeout: nothing may be declared lost
    let after = api.task("keep-running");
    assert_eq!(after["state"], "running", "{after:#}");
    assert_eq!(
        after["allocation"]["allocation_id"],
        before["allocation"]["allocation_id"]
    );
    assert_eq!(after["attempts"], 1);
    assert_eq!(
        file_lines(&starts).len(),
        1,
        "started twice: {:?}",
        file_lines(&starts)
    );
    // The adopted workload is still controlled: release stops it.
    let r = api.post("/v1/tasks/keep-running/release", "");
    assert_eq!(r.data()["state"], "released", "{:#}", r.body);
}

/// A paused agent's node is lost and fenced: its shim stops the old copy
/// when the lease runs out, before the fenced task starts elsewhere (the
/// control plane waits lease + grace), and the agent that comes back runs
/// nothing it no longer owns.
#[test]
fn a_paused_agent_is_fenced_and_kills_what_it_no_longer_owns() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, a, b) = start_cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    let starts = dir.path().join("starts");
    assert_eq!(
        api.post("/v1/tasks", &counted("fenced", &starts, 120))
            .status,
        201
    );
    let first = wait_running(&api, "fenced", 20);
    let node = first["allocation"]["node"].as_str().unwrap().to_string();
    let old_alloc = first["allocation"]["allocation_id"]
        .as_str()
        .unwrap()
        .to_string();
    let victim = if node == "node-a" { &a } else { &b };
    victim.pause();
    let mut v = Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), || {
            v = api.task("fenced");
            v["state"] == "running" && v["allocation"]["node"].as_str() != Some(node.as_str())
        }),
        "{v:#}"
    );
    // The new copy runs only once the old one is gone: its shim stopped it
    // when the lease ran out, while its agent was still frozen.
    assert!(
        !alive(&starts, &old_alloc),
        "old workload {old_alloc} still runs beside the new one"
    );
    victim.resume();
    let new_alloc = api.task("fenced")["allocation"]["allocation_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        wait_until(Duration::from_secs(10), || alive(&starts, &new_alloc)),
        "new workload {new_alloc} is not running"
    );
    // The returning agent is welcomed under a new epoch and starts nothing old.
    assert!(
        wait_until(Duration::from_secs(20), || {
            cp.operator().get("/v1/nodes").data()["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().all(|n| n["connected"] == true))
        }),
        "the paused agent did not come back"
    );
    assert!(
        !alive(&starts, &old_alloc),
        "old workload {old_alloc} came back"
    );
    assert_eq!(file_lines(&starts).len(), 2);
}

#[test]
fn a_task_stuck_before_running_fails_with_the_stage_named() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[
            ("CALDERA_PREPARING_TIMEOUT_MS", "800"),
            ("CALDERA_NODE_TIMEOUT_MS", "30000"),
        ],
    );
    let agent = Agent::start(Path::new(BIN), &cp, "node-a", "1xA100-80GB", dir.path());
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || op
        .get("/v1/nodes/node-a")
        .data()["connected"]
        == true));
    let api = cp.api(&cp.tenant("team-a"));
    // A frozen agent never prepares the workload it is sent.
    agent.pause();
    let starts = dir.path().join("starts");
    assert_eq!(
        api.post("/v1/tasks", &counted("stuck", &starts, 60)).status,
        201
    );
    let mut v = Value::Null;
    assert!(
        wait_until(Duration::from_secs(15), || {
            v = api.task("stuck");
            v["state"] == "failed"
        }),
        "{v:#}"
    );
    let why = v["failure"].as_str().unwrap_or("");
    assert!(
        why.contains("stuck in scheduled")
            && why.contains("preparing timeout")
            && why.contains("node-a"),
        "{why}"
    );
    // When the agent thaws it receives start then stop: nothing keeps running.
    agent.resume();
    std::thread::sleep(Duration::from_secs(2));
    let allocation = v["allocation"]["allocation_id"].as_str().unwrap_or("");
    assert!(
        !alive(&starts, allocation),
        "the stuck task's workload runs after its failure"
    );
    // Its room is free again.
    let node = op.get("/v1/nodes/node-a");
    assert_eq!(
        node.data()["gpus"][0]["memory_free_mb"],
        81920,
        "{:#}",
        node.body
    );
}
