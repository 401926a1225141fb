//! A stop is a drain, with real processes. SIGTERM to an agent drains its
//! node: its training task checkpoints and resumes on the other node, its
//! reservation is held there again, no retry is spent (never `failed: killed
//! by signal 15`), and the agent exits once nothing is left. An operator cordons, drains and uncordons a
//! node through the API and the CLI; the scheduler places nothing on a
//! cordoned node and the pending reason says so.
use caldera_chaos_tests::{
    file_lines, two_nodes, wait_until, Agent, Api, ControlPlane, OPERATOR_TOKEN,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn cluster(dir: &Path) -> (ControlPlane, Agent, Agent) {
    two_nodes(Path::new(BIN), dir, &[], "2xA100-80GB", "2xA100-80GB")
}

/// Training that notes each start (and what it resumes from) in `starts`,
/// and saves a checkpoint when asked to stop (SIGTERM), then exits.
fn checkpointing(id: &str, starts: &Path, max_retries: u32) -> String {
    serde_json::json!({
        "task_id": id, "task_type": "training", "max_retries": max_retries,
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": ["sh", "-c", format!(
            "echo \"$CALDERA_ALLOCATION_ID resume=$CALDERA_RESUME_FROM\" >> {}; \
             trap 'echo saved > $CALDERA_CHECKPOINT_DIR/step-1; exit 0' TERM; \
             while true; do sleep 0.1; done",
            starts.display()
        )]
    })
    .to_string()
}

fn reservation(id: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1,"memory_gb":10}}}}}}"#
    )
}

fn node_of(v: &Value) -> String {
    v["allocation"]["node"].as_str().unwrap_or("").to_string()
}

fn reasons(v: &Value) -> Vec<String> {
    v["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|t| t["reason"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Submits `tasks` with node-b cordoned, so they all run on node-a, and
/// waits until they do. Node-b stays cordoned.
fn run_on_node_a(cp: &ControlPlane, api: &Api, tasks: &[String]) {
    op_post(&cp.operator(), "/v1/nodes/node-b/cordon", 200);
    for t in tasks {
        assert_eq!(api.post("/v1/tasks", t).status, 201);
    }
    for t in tasks {
        let v: Value = serde_json::from_str(t).unwrap_or_default();
        let id = v["task_id"].as_str().unwrap_or_default();
        api.wait_task(id, 20, "running on node-a", |v| {
            v["state"] == "running" && node_of(v) == "node-a"
        });
    }
}

#[test]
fn sigterm_to_an_agent_drains_its_node_and_spends_no_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, mut a, _b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    let starts = dir.path().join("starts");
    // Both on node-a: node-b is cordoned until they run.
    run_on_node_a(
        &cp,
        &api,
        &[checkpointing("train", &starts, 10), reservation("held")],
    );
    op_post(&cp.operator(), "/v1/nodes/node-b/uncordon", 200);

    a.terminate();
    let exited = a.wait_exit(Duration::from_secs(30));
    assert!(
        exited.is_some_and(|s| s.success()),
        "the agent did not exit by itself: {exited:?}"
    );
    for id in ["train", "held"] {
        let v = api.wait_task(id, 20, "running on node-b", |v| {
            v["state"] == "running" && node_of(v) == "node-b"
        });
        assert_eq!(v["retries_used"], 0, "a drain is a planned stop: {v:#}");
        assert!(
            reasons(&v)
                .iter()
                .any(|r| r.contains("node node-a drained; requeued (planned, no retry spent)")),
            "{v:#}"
        );
    }
    // The training task resumed from the checkpoint it saved on SIGTERM.
    let s = file_lines(&starts);
    assert_eq!(s.len(), 2, "{s:?}");
    assert!(s[1].contains("resume=") && s[1].contains("step-1"), "{s:?}");
    let node = cp.operator().get("/v1/nodes/node-a");
    assert_eq!(
        node.data()["cordon"],
        "drained (agent stopping)",
        "{:#}",
        node.body
    );
    // Started again, its own cordon is lifted: placements there again.
    let _again = Agent::start(Path::new(BIN), &cp, "node-a", "2xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/node-a").data()["cordon"].is_null()
    }));
}

fn op_post(op: &Api, path: &str, want: u16) -> Value {
    let r = op.post(path, "{}");
    assert_eq!(r.status, want, "{path}: {:#}", r.body);
    r.body
}

fn cli(cp: &ControlPlane, args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .args(args)
        .args(["--server", &cp.url(), "--token", OPERATOR_TOKEN])
        .output()
        .expect("the caldera binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn an_operator_cordons_drains_and_uncordons_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = cluster(dir.path());
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));

    // Unknown nodes are a 404 naming them.
    let missing = op_post(&op, "/v1/nodes/node-z/drain", 404);
    assert!(
        missing["msg"].as_str().unwrap_or("").contains("node-z"),
        "{missing:#}"
    );
    let (ok, out) = cli(&cp, &["node", "cordon", "node-z"]);
    assert!(
        !ok && out.contains("node-z") && out.contains("40400"),
        "{out}"
    );

    // Both cordoned: nothing is placed, and the pending reason says why.
    let (ok, out) = cli(&cp, &["node", "cordon", "node-a"]);
    assert!(ok && out.contains("node node-a cordoned"), "{out}");
    assert_eq!(
        op_post(&op, "/v1/nodes/node-b/cordon", 200)["data"]["cordon"],
        "cordoned"
    );
    let (_, table) = cli(&cp, &["nodes"]);
    assert!(table.contains("ready, cordoned"), "{table}");
    let starts = dir.path().join("starts");
    assert_eq!(
        api.post("/v1/tasks", &checkpointing("train", &starts, 3))
            .status,
        201
    );
    let v = api.wait_task("train", 10, "a pending reason", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("cordoned"))
    });
    assert_eq!(v["state"], "queued", "{v:#}");

    // Uncordoned, node-b takes it; drained, it moves back to the queue
    // (node-a is still cordoned) without spending a retry.
    assert!(op_post(&op, "/v1/nodes/node-b/uncordon", 200)["data"]["cordon"].is_null());
    api.wait_task("train", 20, "running on node-b", |v| {
        v["state"] == "running" && node_of(v) == "node-b"
    });
    let (ok, out) = cli(&cp, &["node", "drain", "node-b"]);
    assert!(ok && out.contains("node node-b drained"), "{out}");
    let v = api.wait_task("train", 20, "queued after the drain", |v| {
        v["state"] == "queued"
    });
    assert_eq!(v["retries_used"], 0, "{v:#}");
    assert!(
        v["checkpoint"]
            .as_str()
            .is_some_and(|c| c.contains("step-1")),
        "{v:#}"
    );
    let (ok, _) = cli(&cp, &["node", "uncordon", "node-a"]);
    assert!(ok);
    let v = api.wait_task("train", 20, "running on node-a", |v| {
        v["state"] == "running" && node_of(v) == "node-a"
    });
    assert_eq!(v["retries_used"], 0, "{v:#}");
    let s = file_lines(&starts);
    assert!(
        s.len() == 2 && s[1].contains("step-1"),
        "it did not resume from its checkpoint: {s:?}"
    );
}

/// A drain after the agent was restarted (kill -9): its workloads are
/// adopted shims, not its children, so their ends are seen only by polling.
/// The drain loop did not poll them: the training task's stop took effect at
/// once, but the agent waited out its whole drain timeout ("drain not
/// finished ... 1 left") and only then reported the exit.
#[test]
fn a_drain_after_an_agent_restart_sees_its_adopted_workloads_end() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, mut a, _b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    let starts = dir.path().join("starts");
    run_on_node_a(&cp, &api, &[checkpointing("train", &starts, 10)]);
    a.restart();
    assert!(wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&a.log).is_ok_and(|l| l.contains("adopted 1"))
            && cp.operator().get("/v1/nodes/node-a").data()["connected"] == true
    }));
    op_post(&cp.operator(), "/v1/nodes/node-b/uncordon", 200);

    a.terminate();
    let exited = a.wait_exit(Duration::from_secs(40));
    assert!(exited.is_some_and(|s| s.success()), "{exited:?}");
    let log = std::fs::read_to_string(&a.log).unwrap_or_default();
    assert!(
        log.contains("drained: nothing left on this node"),
        "the drain did not see the adopted workload end:\n{log}"
    );
    let v = api.wait_task("train", 20, "running on node-b", |v| {
        v["state"] == "running" && node_of(v) == "node-b"
    });
    assert_eq!(v["retries_used"], 0, "{v:#}");
}

/// A drain whose move of a task was lost resumes when the node says hello
/// again. Here the reservation's drain (stop, back to the queue) cannot be
/// recorded (a fail point at `task_transition`): the cordon is durable, the
/// task is rebuilt from sled as `running` on the drained node, and before
/// this fix nothing told it again to leave — not a control-plane restart
/// either (the moves were sent only when the drain was recorded), so it held
/// the drained node for good. Now the welcome of a drained node moves
/// whatever is still on it.
#[test]
fn a_drain_lost_mid_move_resumes_when_the_node_says_hello_again() {
    let dir = tempfile::tempdir().unwrap();
    // A lease long enough that the restart cannot end anything by itself.
    let env = [("CALDERA_WORKLOAD_LEASE_MS", "60000")];
    let (mut cp, _a, _b) = two_nodes(
        Path::new(BIN),
        dir.path(),
        &env,
        "2xA100-80GB",
        "2xA100-80GB",
    );
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    run_on_node_a(&cp, &api, &[reservation("hold")]);
    op_post(&op, "/v1/nodes/node-b/uncordon", 200);
    let before = op.rebuilds("task");
    op.arm_fault("task_transition", 0, 1);
    op_post(&op, "/v1/nodes/node-a/drain", 200);
    op.wait_refused("task_transition", 1, 10);
    op.wait_rebuilt("task", before, 10);
    op.clear_faults();
    let v = api.task("hold");
    assert!(
        v["state"] == "running" && node_of(&v) == "node-a",
        "the lost move left it on the drained node: {v:#}"
    );
    // The control plane restarts; node-a is still drained (its record says
    // so) and its hello moves the reservation.
    cp.restart();
    let v = api.wait_task("hold", 15, "running on node-b", |v| {
        v["state"] == "running" && node_of(v) == "node-b"
    });
    assert!(
        reasons(&v).iter().any(|r| r.contains("node-a drained")),
        "moved by the drain: {v:#}"
    );
    assert_eq!(
        v["retries_used"], 0,
        "a planned stop spends no retry: {v:#}"
    );
}
