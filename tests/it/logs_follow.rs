//! `caldera logs -f ID` follows a running task's log:
//! lines show up while the task still runs, each once, and the command stops
//! by itself once the task has ended, with the rest printed. Real server,
//! real agent, the real CLI.
use caldera_chaos_tests::{wait_until, wall_ms, Agent, ControlPlane};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn logs_follow_prints_lines_as_they_come_and_stops_when_the_task_ends() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "log-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/log-node").data()["connected"] == true
    }));
    let token = cp.tenant("logs");
    let api = cp.api(&token);
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"talks","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":1}},
            "command":["sh","-c","for i in 1 2 3 4 5 6 7 8; do echo line-$i; sleep 0.4; done"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    api.wait_task("talks", 20, "running", |v| v["state"] == "running");

    let mut child = Command::new(BIN)
        .args([
            "logs",
            "-f",
            "talks",
            "--server",
            &cp.url(),
            "--token",
            &token,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("caldera logs -f starts");
    let out = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .map(|l| (wall_ms(), l))
            .collect::<Vec<_>>()
    });
    let start = Instant::now();
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.is_some_and(|s| s.success()),
        "logs -f did not stop by itself: {status:?}"
    );
    let lines = reader.join().unwrap_or_default();
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    let want: Vec<String> = (1..=8).map(|i| format!("line-{i}")).collect();
    assert_eq!(text, want, "each line once, in order");

    // The first line arrived while the task still ran: it was followed, not
    // read once at the end.
    let v = api.task("talks");
    assert_eq!(v["state"], "finished", "{v:#}");
    let finished_at = v["history"]
        .as_array()
        .and_then(|h| h.last())
        .and_then(|t| t["at_ms"].as_u64())
        .unwrap_or(0);
    assert!(
        lines[0].0 < finished_at,
        "line-1 printed at {} ms, the task finished at {finished_at} ms",
        lines[0].0
    );
}
