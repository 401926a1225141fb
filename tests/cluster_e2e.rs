//! End-to-end: the real `caldera` binary as separate processes — one control
//! plane, two node agents with simulated GPUs — over real sockets and sled files.
use caldera_chaos_tests::{history_states, two_nodes, wait_until, Agent, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn task(id: &str, gpu: &str, cmd: &str) -> String {
    serde_json::json!({
        "task_id": id, "task_type": "training", "priority": "medium",
        "resources": serde_json::from_str::<Value>(&format!(r#"{{"gpu":{gpu},"cpu":{{"cores":1}},"memory":{{"size_gb":1}}}}"#)).unwrap(),
        "command": ["sh", "-c", cmd]
    })
    .to_string()
}

fn wait_state(api: &Api, id: &str, want: &[&str], secs: u64) -> Value {
    api.wait_task(id, secs, &format!("state {want:?}"), |v| {
        want.contains(&v["state"].as_str().unwrap_or(""))
    })
}

fn cluster(dir: &Path) -> (ControlPlane, Agent, Agent) {
    two_nodes(Path::new(BIN), dir, &[], "2xA100-80GB", "2xT4-16GB")
}

#[test]
fn tasks_run_real_commands_with_their_gpus_exit_codes_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));

    let r = api.post(
        "/v1/tasks",
        &task(
            "ok-1",
            r#"{"count":1,"memory_gb":20,"model":"A100"}"#,
            "echo gpus=$CUDA_VISIBLE_DEVICES slice=$CALDERA_GPU_MEMORY_MB task=$CALDERA_TASK_ID",
        ),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.body["code"], 0);
    assert!(r.body["request_id"].as_str().is_some_and(|s| !s.is_empty()));
    let done = wait_state(&api, "ok-1", &["finished"], 30);
    assert_eq!(done["exit_code"], 0);
    let alloc = &done["allocation"];
    assert_eq!(alloc["node"], "node-a");
    let idx = alloc["gpus"][0]["index"].as_u64().unwrap();
    assert_eq!(alloc["gpus"][0]["memory_mb"], 20 * 1024);
    assert_eq!(alloc["gpus"][0]["simulated"], true);
    let states = history_states(&done);
    assert_eq!(
        states,
        [
            "queued",
            "scheduled",
            "preparing",
            "ready",
            "running",
            "finished"
        ]
    );
    let logs = api.get("/v1/tasks/ok-1/logs");
    assert_eq!(logs.status, 200, "{:#}", logs.body);
    let content = logs.data()["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        content.contains(&format!("gpus={idx} slice=20480 task=ok-1")),
        "logs: {content:?}"
    );

    api.post(
        "/v1/tasks",
        &task("fail-3", r#"{"share":0.25}"#, "echo bye; exit 3"),
    );
    let failed = wait_state(&api, "fail-3", &["failed"], 30);
    assert_eq!(failed["exit_code"], 3);
    assert!(
        failed["failure"].as_str().unwrap_or("").contains("code 3"),
        "{failed:#}"
    );

    // The allocation history is on record.
    let ev = api.get("/v1/events?task=ok-1").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kinds: Vec<&str> = ev
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or(""))
        .collect();
    assert!(
        kinds.contains(&"allocation_granted") && kinds.contains(&"allocation_released"),
        "{kinds:?}"
    );
}

#[test]
fn a_task_that_fits_nowhere_says_why_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = cluster(dir.path());
    let api = cp.api(&cp.tenant("team-a"));
    // 90 GB on one GPU: A100s have 80, T4s 16. No node could ever hold it, so
    // it is refused at once (issue 9; it used to wait with a per-node reason).
    let r = api.post(
        "/v1/tasks",
        &task("too-big", r#"{"count":1,"memory_gb":90}"#, "true"),
    );
    assert_eq!(r.status, 422, "{:#}", r.body);
    assert_eq!(
        r.body["msg"],
        "no node has a GPU with 90 GB; the largest has 80 GB"
    );
    // One that fits node-a when it is empty waits, naming why per node.
    let r = api.post(
        "/v1/tasks",
        &task("holder", r#"{"count":2,"model":"A100"}"#, "sleep 30"),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    wait_state(&api, "holder", &["running"], 20);
    api.post(
        "/v1/tasks",
        &task(
            "waits",
            r#"{"count":2,"memory_gb":20,"model":"A100"}"#,
            "true",
        ),
    );
    let mut v = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        v = api.task("waits");
        v["pending_reason"].is_string()
    }));
    let why = v["pending_reason"].as_str().unwrap();
    assert_eq!(v["state"], "queued");
    assert!(why.starts_with("2 nodes"), "{why}");
}

#[test]
fn bad_requests_name_the_field_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let cases = [
        ("{\"task_id\":", 400, "malformed_json", None),
        (
            r#"{"task_id":"x","task_type":"training","resources":{"cpu":{"cores":1}},"gpus":2}"#,
            400,
            "unknown_field",
            Some("gpus"),
        ),
        (
            r#"{"task_id":"x","task_type":"training","resources":{"gpu":{"count":-1}}}"#,
            400,
            "wrong_type",
            Some("resources.gpu.count"),
        ),
        (
            r#"{"task_id":"x","task_type":"training","resources":{"gpu":{"count":0}}}"#,
            400,
            "out_of_range",
            Some("resources.gpu.count"),
        ),
        (
            r#"{"task_id":"x","task_type":"training","resources":{"cpu":{"cores":1}},"duration":"1h"}"#,
            400,
            "bad_format",
            Some("duration"),
        ),
        (
            r#"{"task_id":"x","resources":{"cpu":{"cores":1}}}"#,
            400,
            "missing_field",
            Some("task_type"),
        ),
    ];
    for (body, status, name, field) in cases {
        let r = api.post("/v1/tasks", body);
        assert_eq!(r.status, status, "{body}: {:#}", r.body);
        assert_eq!(r.body["error"], name, "{body}: {:#}", r.body);
        assert_ne!(r.body["code"], 0);
        if let Some(f) = field {
            assert_eq!(r.body["field"], f, "{body}");
        }
    }
    let huge = format!(
        r#"{{"task_id":"x","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"image":"{}"}}"#,
        "a".repeat(100_000)
    );
    assert_eq!(api.post("/v1/tasks", &huge).status, 413);
    // Nothing was recorded by the rejected requests.
    assert_eq!(
        api.get("/v1/tasks").data()["tasks"]
            .as_array()
            .map(|a| a.len()),
        Some(0)
    );
    assert_eq!(api.get("/v1/tasks/x").status, 404);

    // Idempotency: same spec -> 200 with the same task; different spec -> 409.
    let body = task("idem", r#"{"share":0.5}"#, "sleep 1");
    assert_eq!(api.post("/v1/tasks", &body).status, 201);
    let again = api.post("/v1/tasks", &body);
    assert_eq!(again.status, 200);
    assert_eq!(again.data()["task_id"], "idem");
    let other = task("idem", r#"{"share":0.25}"#, "sleep 1");
    let r = api.post("/v1/tasks", &other);
    assert_eq!(r.status, 409, "{:#}", r.body);
    assert_eq!(r.body["error"], "conflict");
}

#[test]
fn tenants_see_and_touch_only_their_own_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let a = cp.api(&cp.tenant("team-a"));
    let b = cp.api(&cp.tenant("team-b"));
    assert_eq!(
        a.post("/v1/tasks", &task("secret", r#"{"share":0.5}"#, "sleep 30"))
            .status,
        201
    );
    assert_eq!(b.get("/v1/tasks/secret").status, 404);
    assert_eq!(b.post("/v1/tasks/secret/release", "").status, 404);
    assert_eq!(
        b.get("/v1/tasks").data()["tasks"]
            .as_array()
            .map(|t| t.len()),
        Some(0)
    );
    assert_eq!(
        a.get("/v1/tasks").data()["tasks"]
            .as_array()
            .map(|t| t.len()),
        Some(1)
    );
    let anonymous = Api::new(&cp.addr, None);
    assert_eq!(anonymous.get("/v1/tasks/secret").status, 401);
    assert_eq!(
        Api::new(&cp.addr, Some("wrong")).get("/v1/tasks").status,
        401
    );
    // Tenants cannot change quotas; the join token cannot read tasks.
    assert_eq!(
        a.put("/v1/tenants/team-a/quota", r#"{"gpus":100}"#).status,
        403
    );
    assert_eq!(
        cp.api(caldera_chaos_tests::JOIN_TOKEN)
            .get("/v1/tasks")
            .status,
        403
    );
    // The owner can release its queued task (no nodes here): cancelled.
    let r = a.post("/v1/tasks/secret/release", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.data()["state"], "cancelled");
}

#[test]
fn task_lists_page_with_a_cursor_and_filter_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let api = cp.api(&cp.tenant("team-a"));
    for id in ["p-1", "p-2", "p-3"] {
        assert_eq!(
            api.post("/v1/tasks", &task(id, r#"{"share":0.5}"#, "true"))
                .status,
            201
        );
    }
    let page = api.get("/v1/tasks?limit=2");
    let ids: Vec<&str> = page.data()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p-1", "p-2"]);
    let cursor = page.data()["next_cursor"].as_str().unwrap().to_string();
    let rest = api.get(&format!("/v1/tasks?limit=2&cursor={cursor}"));
    let ids: Vec<&str> = rest.data()["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p-3"]);
    assert!(rest.data()["next_cursor"].is_null());
    // No nodes: all queued.
    assert_eq!(
        api.get("/v1/tasks?state=queued").data()["tasks"]
            .as_array()
            .map(|t| t.len()),
        Some(3)
    );
    assert_eq!(
        api.get("/v1/tasks?state=running").data()["tasks"]
            .as_array()
            .map(|t| t.len()),
        Some(0)
    );
    let bad = api.get("/v1/tasks?state=sleeping");
    assert_eq!(bad.status, 400);
    assert_eq!(bad.body["field"], "state");
    assert_eq!(api.get("/v1/tasks?limit=0").body["field"], "limit");
}
