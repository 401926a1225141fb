//! `duration` is a time limit, like Slurm's `--time`: a training task past
//! it (plus `time-limit-grace-ms`) is asked to checkpoint, stopped, and fails
//! with reason `time_limit`, so a `00:00:02` task with `sleep 8` never runs
//! to its end; a reservation past it is released. Real server and agent.
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn a_task_past_its_duration_fails_with_time_limit_and_a_reservation_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_TIME_LIMIT_GRACE_MS", "500")],
    );
    let _agent = Agent::start(Path::new(BIN), &cp, "clock-node", "2xA100-80GB", dir.path());
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["connected"] == true))
    }));
    let api = cp.api(&cp.tenant("clocked"));
    for body in [
        r#"{"task_id":"overrun","task_type":"training","duration":"00:00:02","resources":{"gpu":{"count":1}},"command":["sh","-c","echo started; sleep 8; echo ran-to-the-end"]}"#,
        r#"{"task_id":"held","task_type":"training","duration":"00:00:03","resources":{"gpu":{"count":1}}}"#,
    ] {
        let r = api.post("/v1/tasks", body);
        assert_eq!(r.status, 201, "{}", r.body);
    }
    // Stop grace in the harness is 2 s: 2 s + 0.5 s grace + at most 2 s to stop.
    let t = api.wait_task("overrun", 12, "failed", |v| v["state"] == "failed");
    assert_eq!(
        t["failure"].as_str().unwrap_or(""),
        "time_limit: ran past its duration of 00:00:02",
        "{t:#}"
    );
    let logs = api.get("/v1/tasks/overrun/logs");
    let content = logs.data()["content"].as_str().unwrap_or("");
    assert!(
        content.contains("started") && !content.contains("ran-to-the-end"),
        "the workload was stopped before its end: {content:?}"
    );
    let h = api.wait_task("held", 12, "released", |v| v["state"] == "released");
    let last = h["history"]
        .as_array()
        .and_then(|h| h.last())
        .map(|t| t["reason"].as_str().unwrap_or("").to_string())
        .unwrap_or_default();
    assert!(last.contains("time limit of 00:00:03"), "{h:#}");
    let events = op.get("/v1/events?task=overrun");
    assert!(
        events
            .body
            .to_string()
            .contains("time limit of 00:00:02 reached"),
        "a checkpoint_requested event names the limit: {:#}",
        events.body
    );
}
