//! `POST /v1/tasks?dry_run=true` against a real server and agent: a task that
//! fits names its node and GPUs and changes nothing (no task, no allocation,
//! no event); one that does not fit says why and when it should start; a bad
//! spec is refused naming the field, exactly as a submission would be; and
//! `caldera submit --dry-run FILE` prints the same answer.
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn gpus(id: &str, count: u32, seconds: u32) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","duration":"00:10:00",
            "resources":{{"gpu":{{"count":{count},"memory_gb":80}},"cpu":{{"cores":1}}}},
            "command":["sleep","{seconds}"]}}"#
    )
}

/// What a dry run must leave as it was: the tasks, the ledger, the event log.
fn world(cp: &ControlPlane) -> (serde_json::Value, serde_json::Value, usize) {
    let op = cp.operator();
    let tasks = op.get("/v1/tasks").data()["tasks"].clone();
    let ledger = op.get("/v1/allocations").data().clone();
    let events = op.get("/v1/events?limit=1000").data()["events"]
        .as_array()
        .map_or(0, Vec::len);
    (tasks, ledger, events)
}

#[test]
fn a_dry_run_says_where_or_why_not_and_binds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "2xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/node-a").data()["connected"] == true
    }));
    let token = cp.tenant("team-a");
    let api = cp.api(&token);

    // Fits now: node-a, one GPU, start now, within the (absent) guarantee.
    let before = world(&cp);
    let r = api.post("/v1/tasks?dry_run=true", &gpus("probe", 1, 1));
    assert_eq!(r.status, 200, "{:#}", r.body);
    let d = r.data();
    assert_eq!(d["placeable"], true, "{d:#}");
    assert_eq!(d["node"], "node-a", "{d:#}");
    assert_eq!(d["gpu_indices"].as_array().map(Vec::len), Some(1), "{d:#}");
    assert!(
        d["reason"].is_null() && d["estimated_start_ms"].is_u64(),
        "{d:#}"
    );
    assert_eq!(d["admission"], "guaranteed", "{d:#}");
    assert_eq!(world(&cp), before, "a dry run changed the world");
    assert_eq!(api.get("/v1/tasks/probe").status, 404);

    // Both GPUs taken by a running task: no room now, and an estimate from
    // its declared ten minutes.
    assert_eq!(api.post("/v1/tasks", &gpus("big", 2, 60)).status, 201);
    api.wait_task("big", 20, "running", |v| v["state"] == "running");
    let before = world(&cp);
    let r = api.post("/v1/tasks?dry_run=true", &gpus("probe", 1, 1));
    assert_eq!(r.status, 200, "{:#}", r.body);
    let d = r.data();
    assert_eq!(d["placeable"], false, "{d:#}");
    assert!(d["node"].is_null(), "{d:#}");
    let reason = d["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("GPU"), "the reason names the GPUs: {d:#}");
    let started = api.get("/v1/tasks/big").data()["allocation"]["created_ms"]
        .as_u64()
        .unwrap_or(0);
    let est = d["estimated_start_ms"].as_u64().unwrap_or(0);
    assert!(
        est >= started + 590_000 && est <= started + 610_000,
        "estimated at the running task's declared end ({started} + 600 s): {est}"
    );
    assert_eq!(world(&cp), before, "a dry run changed the world");

    // No node could ever hold 4 GPUs: said so, not refused.
    let d = api
        .post("/v1/tasks?dry_run=true", &gpus("huge", 4, 1))
        .data()
        .clone();
    let reason = d["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("unschedulable"), "{d:#}");

    // A bad spec: the submission's own error, naming the field.
    let bad = gpus("bad", 0, 1);
    let dry = api.post("/v1/tasks?dry_run=true", &bad);
    let real = api.post("/v1/tasks", &bad);
    assert_eq!(dry.status, 400, "{:#}", dry.body);
    assert_eq!(dry.body["field"], "resources.gpu.count", "{:#}", dry.body);
    assert_eq!(
        (dry.status, &dry.body["code"], &dry.body["field"]),
        (real.status, &real.body["code"], &real.body["field"])
    );
    let r = api.post("/v1/tasks?dry_run=maybe", &gpus("probe", 1, 1));
    assert_eq!((r.status, r.body["field"].as_str()), (400, Some("dry_run")));
    // Tenant-scoped like a submission: another tenant's name is refused.
    let r = api.post("/v1/tasks?dry_run=true&tenant=team-b", &gpus("probe", 1, 1));
    assert_eq!(r.status, 403, "{:#}", r.body);

    // The CLI prints the same answer.
    let spec = dir.path().join("probe.json");
    std::fs::write(&spec, gpus("probe", 1, 1)).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["submit", "--dry-run"])
        .arg(&spec)
        .env("CALDERA_SERVER", cp.url())
        .env("CALDERA_TOKEN", &token)
        .env("CALDERA_CONTEXTS_FILE", dir.path().join("contexts.json"))
        .env_remove("CALDERA_CONTEXT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("would wait: "), "{stdout}");
    assert!(stdout.contains("estimated start: in 9m"), "{stdout}");
    assert_eq!(api.get("/v1/tasks/probe").status, 404);
}
