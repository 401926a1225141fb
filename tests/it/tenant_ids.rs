//! Task ids are scoped by tenant: two tenants may both
//! name a task `train_20240716_001`; one tenant's service replicas never
//! touch another tenant's tasks whose ids look like replica ids; a 409 speaks
//! of the caller's own tasks only; the operator names the tenant explicitly.
//! Real server, real agent, real processes.
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn connected(cp: &ControlPlane) -> bool {
    cp.operator().get("/v1/nodes").data()["nodes"]
        .as_array()
        .is_some_and(|n| n.iter().any(|n| n["connected"] == true))
}

fn training(id: &str, command: &[&str]) -> String {
    json!({"task_id": id, "task_type": "training",
        "resources": {"cpu": {"cores": 1}}, "command": command})
    .to_string()
}

fn service(id: &str, replicas: u32) -> String {
    json!({"task_id": id, "task_type": "inference", "replicas": replicas,
        "resources": {"gpu": {"count": 1, "memory_gb": 1}}, "command": ["sleep", "300"]})
    .to_string()
}

/// A control plane and one agent with 4 GPUs, connected.
fn cluster(dir: &Path) -> (ControlPlane, Agent) {
    let cp = ControlPlane::start(Path::new(BIN), &dir.join("cp"), &[]);
    let agent = Agent::start(Path::new(BIN), &cp, "ids-node", "4xA100-80GB", dir);
    assert!(wait_until(Duration::from_secs(20), || connected(&cp)));
    (cp, agent)
}

#[test]
fn task_ids_are_scoped_by_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agent) = cluster(dir.path());
    let a = cp.api(&cp.tenant("alpha"));
    let b = cp.api(&cp.tenant("bravo"));
    let op = cp.operator();

    // Both tenants use the same id: both created, each sees its own.
    let id = "train_20240716_001";
    let ra = a.post("/v1/tasks", &training(id, &["sleep", "300"]));
    assert_eq!(ra.status, 201, "alpha: {}", ra.body);
    let rb = b.post("/v1/tasks", &training(id, &["sleep", "301"]));
    assert_eq!(rb.status, 201, "bravo: {}", rb.body);
    assert_eq!(a.task(id)["tenant"], "alpha");
    assert_eq!(b.task(id)["tenant"], "bravo");
    assert_eq!(a.task(id)["task_id"], id);
    for (api, me, other) in [(&a, "alpha", "bravo"), (&b, "bravo", "alpha")] {
        let list = api.get("/v1/tasks");
        assert_eq!(list.status, 200, "{}", list.body);
        assert!(
            !list.body.to_string().contains(other),
            "{me} sees {other}: {}",
            list.body
        );
        let tasks = list.data()["tasks"].as_array().cloned().unwrap_or_default();
        assert_eq!(tasks.len(), 1, "{me}: {}", list.body);
    }
    // Idempotent resubmission within a tenant still answers 200.
    let again = a.post("/v1/tasks", &training(id, &["sleep", "300"]));
    assert_eq!(again.status, 200, "{}", again.body);
    // A different spec under one's own id: 409, and it speaks of no other tenant.
    let clash = b.post("/v1/tasks", &training(id, &["sleep", "302"]));
    assert_eq!(clash.status, 409, "{}", clash.body);
    assert!(!clash.body.to_string().contains("alpha"), "{}", clash.body);

    // Both tenants run a service `svc`: bravo scaling in and releasing its
    // own touches none of alpha's replicas.
    let r = a.post("/v1/tasks", &service("svc", 2));
    assert_eq!(r.status, 201, "{}", r.body);
    a.wait_task("svc.r1", 20, "alpha's replica running", |v| {
        v["state"] == "running"
    });
    let r = b.post("/v1/tasks", &service("svc", 2));
    assert_eq!(r.status, 201, "{}", r.body);
    b.wait_task("svc.r1", 20, "bravo's replica running", |v| {
        v["state"] == "running" && v["tenant"] == "bravo"
    });
    let s = b.put("/v1/tasks/svc/replicas", r#"{"replicas":1}"#);
    assert_eq!(s.status, 200, "{}", s.body);
    b.wait_task("svc.r1", 20, "bravo's replica released", |v| {
        v["state"] == "released"
    });
    let rel = b.post("/v1/tasks/svc/release", "");
    assert_eq!(rel.status, 200, "{}", rel.body);
    std::thread::sleep(Duration::from_millis(500));
    let mine = a.task("svc.r1");
    assert_eq!(mine["state"], "running", "alpha's svc.r1: {mine:#}");
    assert_eq!(mine["tenant"], "alpha", "{mine:#}");
    // A task that is no service (a replica is none either) has no replicas
    // to scale and no model to swap: 409 saying so, and nothing changes.
    for target in [id, "svc.r1"] {
        let s = a.put(&format!("/v1/tasks/{target}/replicas"), r#"{"replicas":2}"#);
        assert_eq!(s.status, 409, "{target}: {}", s.body);
        let said = s.body.to_string();
        assert!(said.contains("not an inference service"), "{said}");
        let w = a.post(&format!("/v1/tasks/{target}/model"), r#"{"model":"m:v2"}"#);
        assert_eq!(w.status, 409, "{target}: {}", w.body);
        let said = w.body.to_string();
        assert!(said.contains("not an inference service"), "{said}");
        assert_eq!(a.task(target)["state"], "running");
    }

    // alpha's released svc2.r0 survives bravo creating service svc2.
    let r = a.post("/v1/tasks", &service("svc2", 1));
    assert_eq!(r.status, 201, "{}", r.body);
    a.wait_task("svc2.r0", 20, "running", |v| v["state"] == "running");
    assert_eq!(a.post("/v1/tasks/svc2/release", "").status, 200);
    a.wait_task("svc2.r0", 20, "released", |v| v["state"] == "released");
    let r = b.post("/v1/tasks", &service("svc2", 1));
    assert_eq!(r.status, 201, "{}", r.body);
    let theirs = b.wait_task("svc2.r0", 20, "bravo's replica running", |v| {
        v["state"] == "running"
    });
    assert_eq!(theirs["tenant"], "bravo", "{theirs:#}");
    assert_eq!(theirs["service"], "svc2", "{theirs:#}");
    let mine = a.task("svc2.r0");
    assert_eq!(mine["state"], "released", "alpha's svc2.r0: {mine:#}");
    assert_eq!(mine["tenant"], "alpha", "{mine:#}");

    // The operator names the tenant explicitly.
    for t in ["alpha", "bravo"] {
        let r = op.get(&format!("/v1/tasks/{id}?tenant={t}"));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.data()["tenant"], t, "{}", r.body);
        assert_eq!(r.data()["task_id"], id, "{}", r.body);
    }
    let amb = op.get(&format!("/v1/tasks/{id}"));
    assert_eq!(amb.status, 409, "two tenants hold the id: {}", amb.body);
    let rel = op.post(&format!("/v1/tasks/{id}/release?tenant=bravo"), "");
    assert_eq!(rel.status, 200, "{}", rel.body);
    assert_eq!(b.task(id)["state"], "released");
    assert_eq!(a.task(id)["state"], "running");
    // A tenant token cannot reach into another tenant with ?tenant=.
    let peek = a.get(&format!("/v1/tasks/{id}?tenant=bravo"));
    assert!(peek.status == 403 || peek.status == 404, "{}", peek.body);
    // bravo's command (`sleep 302`) must not show; the quotes keep a
    // request id that happens to hold the digits 302 from matching.
    assert!(!peek.body.to_string().contains("\"302\""), "{}", peek.body);
}

/// Replica ids cannot meet a tenant's own ids: a tenant's task `svc.r1` and
/// replica 1 of its own service `svc` must never be one task. An id of the replica form is refused with 422 `reserved_id` naming
/// `task_id`, and the replica is untouched.
#[test]
fn a_tenants_own_task_id_cannot_take_a_replicas_name() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agent) = cluster(dir.path());
    let a = cp.api(&cp.tenant("alpha"));
    assert_eq!(a.post("/v1/tasks", &service("svc", 2)).status, 201);
    let replica = a.wait_task("svc.r1", 20, "replica running", |v| v["state"] == "running");
    for id in ["svc.r1", "svc.r2", "other.r0"] {
        let r = a.post("/v1/tasks", &training(id, &["sleep", "300"]));
        assert_eq!(r.status, 422, "{id}: {}", r.body);
        assert_eq!(r.body["code"], 42202, "{id}: {}", r.body);
        assert_eq!(r.body["field"], "task_id", "{id}: {}", r.body);
    }
    let now = a.task("svc.r1");
    assert_eq!(now["state"], "running", "{now:#}");
    assert_eq!(now["service"], "svc", "{now:#}");
    assert_eq!(now["allocation"], replica["allocation"], "{now:#}");
    // Ids that only look alike are the tenant's to use.
    for id in ["svc.r", "svc.rx", "svc.r1x", "svc-r1"] {
        let r = a.post("/v1/tasks", &training(id, &["true"]));
        assert_eq!(r.status, 201, "{id}: {}", r.body);
    }
}
