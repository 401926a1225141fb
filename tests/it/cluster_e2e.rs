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
    // it is refused at once rather than left waiting with a per-node reason.
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

/// Every task of a listing as `tenant/task_id`, following `next_cursor` from
/// `first` (a path with its query) until it is null, in the pages' order.
fn all_pages(api: &Api, first: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut path = first.to_string();
    loop {
        let page = api.get(&path);
        assert_eq!(page.status, 200, "{path}: {:#}", page.body);
        for t in page.data()["tasks"].as_array().unwrap() {
            ids.push(format!(
                "{}/{}",
                t["tenant"].as_str().unwrap(),
                t["task_id"].as_str().unwrap()
            ));
        }
        match page.data()["next_cursor"].as_str() {
            Some(c) => path = format!("{first}&cursor={c}"),
            None => return ids,
        }
    }
}

/// Each id once, and how many there were.
fn each_once(ids: &[String]) -> usize {
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "an id listed twice");
    ids.len()
}

#[test]
fn one_tenants_long_queue_leaves_another_tenants_listing_its_own_and_paged_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // Tenant A: a long queue (no nodes, so every task waits), over 8 connections.
    let many: usize = std::env::var("CALDERA_TEST_QUEUE_DEPTH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let burst = caldera_chaos_tests::bench::submit::burst(
        &cp.addr,
        &cp.tenant("team-a"),
        "load",
        many,
        8,
        Duration::from_secs(300),
    );
    assert_eq!(
        (burst.latencies.len(), burst.errors),
        (many, 0),
        "{}",
        burst.describe()
    );
    // Tenant B: 23 high-priority tasks, 4 of them then cancelled.
    let b = cp.api(&cp.tenant("team-b"));
    for i in 0..23 {
        let mut spec: Value =
            serde_json::from_str(&task(&format!("b-{i:02}"), r#"{"share":0.5}"#, "true")).unwrap();
        spec["priority"] = "high".into();
        assert_eq!(b.post("/v1/tasks", &spec.to_string()).status, 201);
    }
    for i in [3, 7, 11, 19] {
        assert_eq!(
            b.post(&format!("/v1/tasks/b-{i:02}/release"), "").status,
            200
        );
    }
    let began = std::time::Instant::now();
    let first = b.get("/v1/tasks?state=queued&limit=5");
    eprintln!(
        "team-b's first page beside {many} queued tasks of team-a: {:?}; server {}",
        began.elapsed(),
        cp.pid()
            .map(caldera_chaos_tests::bench::stats::rss_line)
            .unwrap_or_default()
    );
    assert_eq!(first.status, 200, "{:#}", first.body);
    // Only B's, in B's own ids, with B's places in line: high priority comes
    // before all of A's medium tasks, in arrival order.
    let tasks = first.data()["tasks"].as_array().unwrap();
    let seen: Vec<(&str, &str, u64)> = tasks
        .iter()
        .map(|t| {
            (
                t["task_id"].as_str().unwrap(),
                t["tenant"].as_str().unwrap(),
                t["queue_position"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("b-00", "team-b", 1),
            ("b-01", "team-b", 2),
            ("b-02", "team-b", 3),
            ("b-04", "team-b", 4),
            ("b-05", "team-b", 5)
        ]
    );
    // Paging visits every task exactly once: B's queued, B's cancelled, all of B's.
    let queued = all_pages(&b, "/v1/tasks?state=queued&limit=5");
    assert_eq!(each_once(&queued), 19);
    assert!(
        queued.windows(2).all(|w| w[0] < w[1]),
        "ordered by id: {queued:?}"
    );
    let cancelled = all_pages(&b, "/v1/tasks?state=cancelled&limit=3");
    let b_cancelled = ["team-b/b-03", "team-b/b-07", "team-b/b-11", "team-b/b-19"];
    assert_eq!(cancelled, b_cancelled);
    assert_eq!(each_once(&all_pages(&b, "/v1/tasks?limit=6")), 23);
    // A tenant token names only its own tenant; the operator may name any.
    assert_eq!(b.get("/v1/tasks?tenant=team-a").status, 403);
    let op = cp.operator();
    let bs = all_pages(&op, "/v1/tasks?tenant=team-b&state=cancelled&limit=2");
    assert_eq!(bs, b_cancelled);
    // The operator's queued listing over every tenant: A's and B's, each once.
    let everyone = all_pages(&op, "/v1/tasks?state=queued&limit=1000");
    assert_eq!(each_once(&everyone), many + 19);
    assert!(everyone
        .iter()
        .all(|k| k.starts_with("team-a/") || k.starts_with("team-b/")));
}
