//! `caldera up` Ctrl-C is a planned stop: it drains the local nodes
//! (training checkpoints, reservations are requeued) before the control
//! plane stops, so the next `up` on the same data dir resumes everything
//! with no retry spent — a stop that spent retries would leave a training
//! task, or even a pure reservation, `failed: ... retry budget of 3 spent`
//! after a few cycles. Real `caldera up` processes, real SIGINT:
//! four runs, each stopped with Ctrl-C; after each of the three restarts
//! the task runs and the reservation is held, with no retry spent.
use caldera_chaos_tests::{
    free_port, nodes_connected, wait_until, Agent, Api, ControlPlane, OPERATOR_TOKEN,
};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// `caldera up` on `data`, answering on `addr`, with the operator token
/// fixed and fast heartbeats; in its own process group, as in a terminal.
fn up(data: &Path, addr: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.with_extension("log"))
        .expect("the up log opens");
    let err = log.try_clone().expect("the up log clones");
    Command::new(BIN)
        .args(["up", "--nodes", "2", "--listen", addr, "--data-dir"])
        .arg(data)
        .env("CALDERA_OPERATOR_TOKEN", OPERATOR_TOKEN)
        .env(
            "CALDERA_CONTEXTS_FILE",
            data.with_extension("contexts.json"),
        )
        .env("CALDERA_HEARTBEAT_INTERVAL_MS", "250")
        .env("CALDERA_NODE_TIMEOUT_MS", "1500")
        .env("CALDERA_STOP_GRACE_MS", "2000")
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .process_group(0)
        .spawn()
        .expect("caldera up starts")
}

/// A running `up`, SIGKILLed if a failed assertion leaves it running (its
/// agents follow: PDEATHSIG).
struct Up(Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ctrl-C, and the exit that follows (bounded).
fn interrupt(up: &mut Up) -> Option<std::process::ExitStatus> {
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe {
        libc::kill(up.0.id() as i32, libc::SIGINT);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(status)) = up.0.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// The CLI's stdout with nothing but `up`'s contexts file to go on; None
/// when it fails.
fn cli_without_flags(data: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(BIN)
        .args(args)
        .env(
            "CALDERA_CONTEXTS_FILE",
            data.with_extension("contexts.json"),
        )
        .env_remove("CALDERA_SERVER")
        .env_remove("CALDERA_TOKEN")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

fn both_nodes_connected(op: &Api) -> bool {
    op.get("/v1/nodes").data()["nodes"]
        .as_array()
        .is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == 2)
}

fn running(api: &Api, id: &str) -> Value {
    api.wait_task(id, 30, "running", |v| v["state"] == "running")
}

#[test]
fn three_up_ctrl_c_cycles_resume_everything_without_spending_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("caldera-data");
    let addr = format!("127.0.0.1:{}", free_port());
    let op = Api::new(&addr, Some(OPERATOR_TOKEN));
    let starts = dir.path().join("starts");
    // `up`'s agents run each tenant's workloads as its own unprivileged uid:
    // let that uid reach the test's dir and append to the file it writes.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::write(&starts, "").unwrap();
    std::fs::set_permissions(&starts, std::fs::Permissions::from_mode(0o666)).unwrap();
    let train = serde_json::json!({
        "task_id": "train", "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": ["sh", "-c", format!(
            "echo \"start resume=$CALDERA_RESUME_FROM\" >> {}; \
             trap 'echo saved > $CALDERA_CHECKPOINT_DIR/step-$$; exit 0' TERM; \
             while true; do sleep 0.1; done",
            starts.display()
        )]
    });
    let held = r#"{"task_id":"held","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":10}}}"#;
    let mut token = String::new();
    for cycle in 0..=3 {
        let mut child = Up(up(&data, &addr));
        assert!(
            wait_until(Duration::from_secs(30), || both_nodes_connected(&op)),
            "cycle {cycle}: the nodes did not connect"
        );
        if cycle == 0 {
            // `up` saved its contexts: the CLI works with no flag at all.
            assert!(wait_until(Duration::from_secs(10), || {
                cli_without_flags(&data, &["nodes", "--context", "up-operator"])
                    .is_some_and(|out| out.contains("node-1"))
            }));
            let r = op.post("/v1/tenants", r#"{"name":"team-a"}"#);
            assert_eq!(r.status, 201, "{:#}", r.body);
            token = r.data()["token"].as_str().unwrap_or_default().to_string();
            let api = op.with_token(&token);
            assert_eq!(api.post("/v1/tasks", &train.to_string()).status, 201);
            assert_eq!(api.post("/v1/tasks", held).status, 201);
        }
        let api = op.with_token(&token);
        for id in ["train", "held"] {
            let v = running(&api, id);
            assert_eq!(v["retries_used"], 0, "cycle {cycle}: {v:#}");
            assert_eq!(v["failure"], Value::Null, "cycle {cycle}: {v:#}");
        }
        let status = interrupt(&mut child);
        assert!(
            status.is_some_and(|s| s.success()),
            "cycle {cycle}: up did not stop cleanly: {status:?}"
        );
    }
    // Each restart resumed the training from the checkpoint it saved on Ctrl-C.
    let lines: Vec<String> = std::fs::read_to_string(&starts)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    // Four runs, each resumed from the last: up to four starts (a drain may
    // also move it between the two nodes before the control plane stops:
    // each such move is a planned stop too, resuming from its checkpoint).
    assert!(lines.len() >= 4, "{lines:?}");
    eprintln!("{lines:?}");
    assert!(lines[0].ends_with("resume="), "{lines:?}");
    assert!(lines[1..].iter().all(|l| l.contains("step-")), "{lines:?}");
}

/// The lines of `up`'s agent logs (`<data>/logs/node-*.log`).
fn agent_logs(data: &Path) -> String {
    ["node-1", "node-2"]
        .iter()
        .map(|n| std::fs::read_to_string(data.join("logs").join(format!("{n}.log"))))
        .filter_map(Result::ok)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Ctrl-C stops the whole local cluster: no agent waits out its drain
/// timeout to move a service replica to a node that stops too (the replica
/// is stopped and requeued where it is), and a reservation, which runs
/// nothing, stays held through the restart: it comes back running on the
/// same allocation, never queued.
#[test]
fn ctrl_c_stops_replicas_where_they_are_and_reservations_come_back_running() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("caldera-data");
    let addr = format!("127.0.0.1:{}", free_port());
    let op = Api::new(&addr, Some(OPERATOR_TOKEN));
    let mut child = Up(up(&data, &addr));
    assert!(
        wait_until(Duration::from_secs(30), || both_nodes_connected(&op)),
        "the nodes did not connect"
    );
    let r = op.post("/v1/tenants", r#"{"name":"team-a"}"#);
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = op.with_token(r.data()["token"].as_str().unwrap_or_default());
    let svc = serde_json::json!({
        "task_id": "svc", "task_type": "inference", "replicas": 1,
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": ["sh", "-c", "while true; do sleep 0.1; done"]
    });
    let held = r#"{"task_id":"held","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":10}}}"#;
    assert_eq!(api.post("/v1/tasks", &svc.to_string()).status, 201);
    assert_eq!(api.post("/v1/tasks", held).status, 201);
    running(&api, "svc.r0");
    let before = running(&api, "held");
    let began = Instant::now();
    let status = interrupt(&mut child);
    let took = began.elapsed();
    eprintln!("Ctrl-C of up took {took:?}");
    assert!(
        status.is_some_and(|s| s.success()),
        "up did not stop cleanly: {status:?}"
    );
    let logs = agent_logs(&data);
    assert!(
        !logs.contains("drain not finished"),
        "an agent waited out its drain timeout: {logs}"
    );
    assert!(logs.contains("stay held"), "{logs}");
    // The next run: the reservation never left its allocation; the replica
    // was stopped and requeued, not replaced by a surge replica.
    let _child = Up(up(&data, &addr));
    assert!(
        wait_until(Duration::from_secs(30), || both_nodes_connected(&op)),
        "the nodes did not connect again"
    );
    let after = api.task("held");
    assert_eq!(after["state"], "running", "{after:#}");
    assert_eq!(
        after["allocation"]["allocation_id"], before["allocation"]["allocation_id"],
        "{after:#}"
    );
    assert_eq!(after["attempts"], before["attempts"], "{after:#}");
    let replica = running(&api, "svc.r0");
    assert!(
        replica["history"]
            .as_array()
            .is_some_and(|h| h.iter().any(|h| h["state"] == "queued"
                && h["reason"].as_str().unwrap_or("").contains("drained"))),
        "{replica:#}"
    );
    assert_eq!(api.get("/v1/tasks/svc.r1000").status, 404);
    assert_eq!(replica["retries_used"], 0, "{replica:#}");
}

/// A task that may only go to one node while that node has no live session
/// waits, and is granted exactly once, when the node says hello: after a
/// control plane restart (agent not back yet), and while its agent is away
/// within the node timeout (gone, not yet declared lost). A grant there
/// before could not be started, and was requeued and granted again in a
/// loop, its attempt counter climbing by thousands.
#[test]
fn a_task_waits_for_its_node_to_say_hello_and_is_granted_once() {
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(BIN);
    // A node silent for 8 s is lost; after a restart it gets 30 s to return.
    let env = [
        ("CALDERA_NODE_TIMEOUT_MS", "8000"),
        ("CALDERA_BOOT_GRACE_MS", "30000"),
    ];
    let mut cp = ControlPlane::start(bin, &dir.path().join("cp"), &env);
    let mut agent = Agent::start(bin, &cp, "node-a", "2xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));
    let api = cp.api(&cp.tenant("team-a"));
    let task = |id: &str| {
        serde_json::json!({
            "task_id": id, "task_type": "training",
            "resources": {"gpu": {"count": 1, "memory_gb": 10}},
            "command": ["sleep", "300"]
        })
        .to_string()
    };
    // Waits for `id` to stay queued, never granted, while the node is away;
    // then the agent comes back late and it runs on the first grant.
    let waits_then_runs_once = |api: &Api, agent: &mut Agent, id: &str| {
        std::thread::sleep(Duration::from_secs(3));
        let v = api.task(id);
        assert_eq!(
            (v["state"].as_str(), v["attempts"].as_u64()),
            (Some("queued"), Some(0)),
            "{id} was granted on a node with no live session: {v:#}"
        );
        agent.start_again();
        let v = running(api, id);
        assert_eq!(v["attempts"], 1, "{id}: {v:#}");
    };
    // The control plane restarts with the agent gone: the node is known
    // from sled, but not a placement target until its hello.
    agent.kill9();
    cp.restart();
    assert_eq!(api.post("/v1/tasks", &task("after-boot")).status, 201);
    waits_then_runs_once(&api, &mut agent, "after-boot");
    // The agent goes away again: no placements there until it is back,
    // although the node is not lost yet.
    agent.kill9();
    assert!(wait_until(Duration::from_secs(5), || nodes_connected(&cp) == 0));
    assert_eq!(api.post("/v1/tasks", &task("while-away")).status, 201);
    waits_then_runs_once(&api, &mut agent, "while-away");
}
