//! The one resync, with real processes: an agent built with the fail point
//! `CALDERA_FAILPOINT_DROP_EVENT` loses one workload event after numbering
//! it, as if it never reached the control plane. The control plane sees the
//! gap (the next event's number skips, or a heartbeat counts more events
//! than arrived), asks the agent for a digest of what it holds, and the
//! resync tells the task what it missed. Heartbeats alone repair nothing:
//! the node's event log says the resync did it, and why.
use caldera_chaos_tests::cluster::{cluster, AgentSpec};
use caldera_chaos_tests::{Api, ControlPlane};
use serde_json::{json, Value};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// A control plane and one agent that drops its first event of `kind`.
fn cluster_dropping(dir: &Path, kind: &str) -> (ControlPlane, Vec<caldera_chaos_tests::Agent>) {
    let spec = AgentSpec::new("node-1", "1xA100-80GB").env("CALDERA_FAILPOINT_DROP_EVENT", kind);
    cluster(Path::new(BIN), dir, &[], &[spec])
}

fn submit(api: &Api, id: &str, script: &str) {
    let body = json!({"task_id": id, "task_type": "training",
        "resources": {"cpu": {"cores": 1}}, "command": ["sh", "-c", script]});
    let r = api.post("/v1/tasks", &body.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
}

/// The node's resync events (their messages).
fn resyncs(op: &Api) -> Vec<String> {
    let r = op.get("/v1/events?node=node-1&kind=node_resynced&limit=100");
    assert_eq!(r.status, 200, "{:#}", r.body);
    r.data()["events"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|e| e["message"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A lost `started` is noticed at the next event (its number skips) and
/// the resync makes the task `running`, with the workload's pid.
#[test]
fn a_lost_started_event_is_repaired_by_the_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = cluster_dropping(dir.path(), "started");
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, "lost-start", "exec sleep 3600");
    let task = api.wait_task("lost-start", 30, "running", |v| v["state"] == "running");
    let notes = resyncs(&cp.operator());
    assert!(
        notes.iter().any(|m| m.contains("never arrived")),
        "the task runs, but no resync after a gap is on record: {notes:#?}\n{task:#}"
    );
    let r = api.post("/v1/tasks/lost-start/release", "{}");
    assert!(r.status < 300, "{:#}", r.body);
}

/// A lost `exited` is the session's last event: only the next heartbeat's
/// count shows it. The resync tells the task its exit (code 3): it fails
/// with that code, its room freed.
#[test]
fn a_lost_exit_is_noticed_by_the_heartbeat_count_and_repaired_by_the_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = cluster_dropping(dir.path(), "exited");
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, "lost-exit", "sleep 1; exit 3");
    let task: Value = api.wait_task("lost-exit", 30, "failed", |v| v["state"] == "failed");
    assert_eq!(task["exit_code"], 3, "{task:#}");
    let notes = resyncs(&cp.operator());
    assert!(
        notes
            .iter()
            .any(|m| m.contains("never arrived (the heartbeat counts")),
        "no resync after the heartbeat's count showed the gap: {notes:#?}"
    );
}
