//! Logs that last (issue 10, item 6): the log of a finished task is served
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
