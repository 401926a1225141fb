//! Logs that last: the log of a finished task is served
//! after its node's agent was killed and started again — the file is on the
//! node's disk; the agent must not look finished allocations up only in
//! memory. Real server, real agent, real files.
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn connected(cp: &ControlPlane) -> bool {
    cp.operator().get("/v1/nodes").data()["nodes"]
        .as_array()
        .is_some_and(|n| n.iter().any(|n| n["connected"] == true))
}

#[test]
fn a_finished_tasks_log_is_served_after_an_agent_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let mut agent = Agent::start(Path::new(BIN), &cp, "log-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    let api = cp.api(&cp.tenant("logs"));
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"said","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":1}},"command":["sh","-c","echo line-one; echo line-two"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    api.wait_task("said", 20, "finished", |v| v["state"] == "finished");
    let before = api.get("/v1/tasks/said/logs");
    assert!(
        before.data()["content"]
            .as_str()
            .unwrap_or("")
            .contains("line-two"),
        "{:#}",
        before.body
    );

    agent.restart(); // kill -9, then start again on the same data dir
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    let after = api.get("/v1/tasks/said/logs");
    assert_eq!(after.status, 200, "{:#}", after.body);
    let content = after.data()["content"].as_str().unwrap_or("");
    assert!(
        content.contains("line-one") && content.contains("line-two"),
        "after the agent restart the log reads {content:?}"
    );
}

/// A reservation runs no process: its logs say so instead of looking empty.
#[test]
fn a_reservations_logs_say_it_has_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "res-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    let api = cp.api(&cp.tenant("holds"));
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"held","task_type":"training","resources":{"gpu":{"count":1}}}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    api.wait_task("held", 20, "running", |v| v["state"] == "running");
    let logs = api.get("/v1/tasks/held/logs");
    assert_eq!(logs.status, 200, "{:#}", logs.body);
    assert_eq!(logs.data()["reservation"], true, "{:#}", logs.body);
    assert!(logs.data()["note"]
        .as_str()
        .unwrap_or("")
        .contains("no process"));
}

/// A command that exits at once shows how it ended (state, exit code), and
/// its history never calls it a reservation: it had a command.
#[test]
fn a_command_that_exits_at_once_shows_its_exit_not_a_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "quick-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    let api = cp.api(&cp.tenant("quick"));
    // Several of each: how quickly the shim reports a pid races the heartbeat.
    let runs = (0..5).flat_map(|i| {
        [
            (
                format!("fails-fast-{i}"),
                r#"["sh","-c","exit 3"]"#,
                "failed",
                3,
            ),
            (format!("done-fast-{i}"), r#"["true"]"#, "finished", 0),
        ]
    });
    let runs: Vec<_> = runs.collect();
    for (id, command, _, _) in &runs {
        let r = api.post(
            "/v1/tasks",
            &format!(
                r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1,"memory_gb":1}}}},"command":{command}}}"#
            ),
        );
        assert_eq!(r.status, 201, "{}", r.body);
    }
    for (id, _, state, code) in runs {
        let v = api.wait_task(&id, 20, state, |v| v["state"] == state);
        assert_eq!(v["exit_code"], code, "{v:#}");
        let reasons: Vec<&str> = v["history"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| h["reason"].as_str())
            .collect();
        assert!(
            reasons.iter().all(|r| !r.contains("reservation")),
            "a task with a command is no reservation: {reasons:?}"
        );
        assert!(
            reasons
                .iter()
                .any(|r| r.contains(&format!("exited with code {code}"))),
            "{reasons:?}"
        );
    }
}

/// A preempted task that waits to run again still has the log of the run
/// it was stopped in, with a note that says so, not "not run yet".
#[test]
fn a_preempted_tasks_logs_show_its_earlier_run() {
    let dir = tempfile::tempdir().unwrap();
    // A short stop grace: the victim is stopped within a second.
    let env = [("CALDERA_STOP_GRACE_MS", "500")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _agent = Agent::start(Path::new(BIN), &cp, "busy-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    let api = cp.api(&cp.tenant("shared"));
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"victim","task_type":"training","priority":"low","resources":{"gpu":{"count":1}},"command":["sh","-c","echo first-run-output; sleep 120"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    api.wait_task("victim", 20, "running", |v| v["state"] == "running");
    assert!(wait_until(Duration::from_secs(10), || {
        api.get("/v1/tasks/victim/logs").data()["content"]
            .as_str()
            .is_some_and(|c| c.contains("first-run-output"))
    }));
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"boss","task_type":"training","priority":"high","resources":{"gpu":{"count":1}},"command":["sleep","120"]}"#,
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let v = api.wait_task("victim", 30, "preempted and queued again", |v| {
        v["state"] == "queued" && v["preemptions"] == 1
    });
    assert!(v["allocation"].is_null(), "{v:#}");
    let logs = api.get("/v1/tasks/victim/logs");
    assert_eq!(logs.status, 200, "{:#}", logs.body);
    let d = logs.data();
    assert!(
        d["content"]
            .as_str()
            .unwrap_or("")
            .contains("first-run-output"),
        "{d:#}"
    );
    let note = d["note"].as_str().unwrap_or("");
    assert!(
        note.contains("preempted") && note.contains("restarting"),
        "the note says why it is not running: {d:#}"
    );
    assert_eq!(d["node"], "busy-node", "{d:#}");
    // A task that never ran still has no log.
    let never = api.post(
        "/v1/tasks",
        r#"{"task_id":"never","task_type":"training","priority":"low","resources":{"gpu":{"count":1}},"command":["true"]}"#,
    );
    assert_eq!(never.status, 201, "{}", never.body);
    assert_eq!(api.get("/v1/tasks/never/logs").status, 409);
}
