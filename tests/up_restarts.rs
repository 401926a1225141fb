//! `caldera up` Ctrl-C is a planned stop (issue 10, item 3): it drains the
//! local nodes (training checkpoints, reservations are requeued) before the
//! control plane stops, so the next `up` on the same data dir resumes
//! everything with no retry spent. Before, three up/Ctrl-C cycles left a
//! training task and even a pure reservation `failed: ... retry budget of 3
//! spent` ("workload vanished"). Real `caldera up` processes, real SIGINT:
//! four runs, each stopped with Ctrl-C; after each of the three restarts
//! the task runs and the reservation is held, with no retry spent.
use caldera_chaos_tests::{free_port, wait_until, Api, OPERATOR_TOKEN};
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
