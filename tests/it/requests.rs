//! What a user sees of requests the control plane cannot or will not take,
//! over the real binary's socket: a wrong method (405 with `Allow`), a
//! request no registered node could ever hold (422, or queued marked
//! `unschedulable` where the operator accepts those), bodies that are not
//! what they seem, and a node hello that lists one GPU twice.
use caldera_chaos_tests::{fake_node, wait_until, Agent, Api, ControlPlane, JOIN_TOKEN};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn task(id: &str, resources: Value) -> String {
    json!({"task_id": id, "task_type": "training", "resources": resources,
        "command": ["sleep", "30"]})
    .to_string()
}

fn connected(cp: &ControlPlane, n: usize) {
    let op = cp.operator();
    let joined = wait_until(Duration::from_secs(20), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|v| v.iter().filter(|x| x["connected"] == true).count() == n)
    });
    assert!(
        joined,
        "agents did not join: {:#}",
        op.get("/v1/nodes").body
    );
}

fn pending_reason(api: &Api, id: &str) -> String {
    api.get(&format!("/v1/tasks/{id}")).data()["pending_reason"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_wrong_method_is_405_naming_the_methods_the_path_answers() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let op = cp.operator();
    for (method, path, allow) in [
        ("DELETE", "/v1/tasks", "GET, POST"),
        ("PUT", "/healthz", "GET"),
        ("GET", "/v1/tasks/x/release", "POST"),
        ("POST", "/v1/tenants/t/quota", "PUT"),
        ("DELETE", "/v1/tasks/x", "GET"),
    ] {
        let r = op.request(method, path, None);
        assert_eq!(r.status, 405, "{method} {path}: {:#}", r.body);
        assert_eq!(r.header("allow"), Some(allow), "{method} {path}");
        assert_eq!(r.body["code"], 40501, "{method} {path}");
        assert_eq!(r.body["error"], "method_not_allowed");
    }
    assert_eq!(op.get("/v1/no-such-thing").status, 404);
}

#[test]
fn a_request_no_node_could_ever_hold_is_refused_with_422_naming_the_largest_offer() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let nine = json!({"gpu": {"count": 9, "model": "A100"}, "cpu": {"cores": 1}});
    // No node registered yet: nothing is known, so it waits.
    let r = api.post("/v1/tasks", &task("early-nine", nine.clone()));
    assert_eq!(r.status, 201, "{:#}", r.body);

    let mut agent = Agent::start(Path::new(BIN), &cp, "node-a", "8xA100-80GB", dir.path());
    connected(&cp, 1);
    let refused = [
        (nine.clone(), "no node has 9 A100 GPUs; the largest has 8"),
        (
            json!({"gpu": {"count": 1, "model": "H100"}}),
            "no node has 1 H100 GPU; the largest has 0",
        ),
        (
            json!({"gpu": {"count": 1, "model": "A10"}}),
            "no node has 1 A10 GPU; the largest has 0",
        ),
        (
            json!({"gpu": {"count": 1, "memory_gb": 90}}),
            "no node has a GPU with 90 GB; the largest has 80 GB",
        ),
        (
            json!({"memory": {"size_gb": 5000}}),
            "no node has 5000 GB of memory; the largest has 64 GB",
        ),
    ];
    let check = |round: &str| {
        for (i, (resources, msg)) in refused.iter().enumerate() {
            let r = api.post(
                "/v1/tasks",
                &task(&format!("never-{round}-{i}"), resources.clone()),
            );
            assert_eq!(r.status, 422, "{msg}: {:#}", r.body);
            assert_eq!(r.body["code"], 42201);
            assert_eq!(r.body["error"], "unschedulable");
            assert_eq!(r.body["msg"], *msg);
        }
    };
    check("up");
    // What fits is taken as before.
    let r = api.post(
        "/v1/tasks",
        &task("eight", json!({"gpu": {"count": 8, "model": "A100"}})),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    // The one queued before the node came is now marked.
    let marked = wait_until(Duration::from_secs(10), || {
        pending_reason(&api, "early-nine")
            == "unschedulable: no node has 9 A100 GPUs; the largest has 8"
    });
    assert!(marked, "{}", pending_reason(&api, "early-nine"));

    // A lost node is still registered: it may come back.
    agent.kill9();
    let op = cp.operator();
    let lost = wait_until(Duration::from_secs(10), || {
        op.get("/v1/nodes/node-a").data()["state"] == "lost"
    });
    assert!(lost, "{:#}", op.get("/v1/nodes/node-a").body);
    check("lost");
}

#[test]
fn with_accept_unschedulable_such_a_request_waits_marked_unschedulable() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_ACCEPT_UNSCHEDULABLE", "true")],
    );
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "8xA100-80GB", dir.path());
    connected(&cp, 1);
    let api = cp.api(&cp.tenant("team-a"));
    let r = api.post(
        "/v1/tasks",
        &task("nine", json!({"gpu": {"count": 9, "model": "A100"}})),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let marked = wait_until(Duration::from_secs(10), || {
        pending_reason(&api, "nine") == "unschedulable: no node has 9 A100 GPUs; the largest has 8"
    });
    assert!(marked, "{}", pending_reason(&api, "nine"));
    assert_eq!(api.get("/v1/tasks/nine").data()["state"], "queued");
}

#[test]
fn bodies_that_are_not_what_they_seem_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let cases = [
        (
            r#"{"task_id":"a","task_id":"b","task_type":"training","resources":{"cpu":{"cores":1}}}"#,
            40001,
            "task_id",
            "task_id: the key \"task_id\" appears twice in one object; give each key once",
        ),
        (
            r#"{"task_id":"a","task_type":"training","resources":{"cpu":{"cores":1}},"command":[]}"#,
            40006,
            "command",
            "command: command must name a program; omit it for a reservation",
        ),
        (
            r#"{"task_id":"a","task_type":"training","resources":{"gpu":{"count":"two"}}}"#,
            40003,
            "resources.gpu.count",
            "resources.gpu.count: expected a whole number from 1 to 64, got the string \"two\"",
        ),
    ];
    for (body, code, field, msg) in cases {
        let r = api.post("/v1/tasks", body);
        assert_eq!(r.status, 400, "{body}: {:#}", r.body);
        assert_eq!(
            (&r.body["code"], &r.body["field"], &r.body["msg"]),
            (&json!(code), &json!(field), &json!(msg)),
            "{body}"
        );
    }
}

#[test]
fn a_hello_listing_one_gpu_index_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let err = fake_node::join_with_gpus(&cp.addr, JOIN_TOKEN, "twice", &[0, 1, 0])
        .expect_err("a hello listing GPU 0 twice was welcomed");
    assert!(
        err.to_string().contains("GPU index 0 is listed twice"),
        "{err}"
    );
    let nodes = cp.operator().get("/v1/nodes");
    assert_eq!(nodes.data()["nodes"], json!([]), "{:#}", nodes.body);
}
