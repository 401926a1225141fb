//! Hot swap in place with real processes: a control
//! plane, real agents with weight caches, the test `infer-server` serving a
//! version it reads from CALDERA_MODEL_PATH, and a client that lists the
//! service's ready endpoints and calls each one every 50 ms, as a load
//! balancer would.
//!
//! - 3 replicas swapped v3 -> v4: 0 failed calls, at least 1 ready endpoint
//!   at every poll, the same allocation ids and GPU indices before and after,
//!   every replica answering v4 at the end;
//! - a v4 that never gets ready is rolled back: the service answers v3, and
//!   an event names the replica and why;
//! - 1 replica: refused without allow_downtime, done with it;
//! - kill -9 of the control plane mid-swap, a restart, and the swap completes;
//! - 1 replica with `max_surge: 1`: no free room is a 409 and nothing
//!   changes; with room a surge replica on v4 takes the slot once ready and
//!   the old one is released, the endpoints list never empty; one never
//!   ready is released and v3 serves on; a kill -9 mid-surge finishes after
//!   the restart.
//! - in containers (real podman, the local registry): 2 replicas swapped
//!   onto a version that carries another image answer with 0 failed calls,
//!   and each node then runs one container, a new one, of the new image,
//!   on a port of its own; a version whose image does not exist fails the
//!   swap and the very same containers serve on.
use caldera_chaos_tests::container_host;
use caldera_chaos_tests::images::NodeStore;
use caldera_chaos_tests::models::task_events;
use caldera_chaos_tests::swap::{
    endpoints, infer_service, placements, register_versions, version_of, wait_endpoints,
    wait_swap_over, Poller,
};
use caldera_chaos_tests::weights::generate;
use caldera_chaos_tests::{cluster, wait_until, Agent, AgentSpec, Api, ControlPlane};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const SERVER: &str = env!("CARGO_BIN_EXE_infer-server");
const SIZE: u64 = 2_000_000;

const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

/// A control plane and `n` cached agents, one GPU each (so replicas spread).
fn rig(dir: &Path, n: usize) -> (ControlPlane, Vec<Agent>) {
    let specs: Vec<AgentSpec> = (0..n)
        .map(|i| AgentSpec::with_cache(&format!("node-{i}"), "1xA100-80GB", "0.1"))
        .collect();
    cluster(Path::new(BIN), dir, ENV, &specs)
}

fn swap(api: &Api, id: &str, body: &str) -> caldera_chaos_tests::http::Reply {
    api.post(&format!("/v1/tasks/{id}/model"), body)
}

/// A service of `n` replicas on v3 whose v4 process never gets ready (the
/// same command for both versions), with a 4 s readiness timeout.
fn never_ready_on_v4(id: &str, n: u32) -> Value {
    let script = format!(
        "if [ \"$CALDERA_MODEL_VERSION\" = v4 ]; then INFER_NEVER_READY=1 exec {SERVER}; else exec {SERVER}; fi"
    );
    let mut spec = infer_service(id, "m:v3", n, SERVER, &[]);
    spec["command"] = serde_json::json!(["sh", "-c", script]);
    spec["readiness"]["ready_timeout_s"] = 4.into();
    spec
}

fn versions(list: &[Value]) -> Vec<Option<String>> {
    list.iter().map(version_of).collect()
}

#[test]
fn three_replicas_are_swapped_in_place_without_a_failed_request() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 3);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let spec = infer_service("svc", "m:v3", 3, SERVER, &[("INFER_LOAD_MS", "300")]);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    let before = wait_endpoints(&api, "svc", 3, 90);
    assert_eq!(versions(&before), vec![Some("v3".to_string()); 3]);

    let poller = Poller::start(api.clone(), "svc");
    std::thread::sleep(Duration::from_millis(500));
    let r = swap(&api, "svc", r#"{"model":"m:v4"}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    assert_eq!(r.data()["outcome"], "started");
    // A second swap meanwhile is a 409 that says why.
    let again = swap(&api, "svc", r#"{"model":"m:v3"}"#);
    assert_eq!(again.status, 409, "{:#}", again.body);
    assert_eq!(again.body["code"], 40903, "{:#}", again.body);
    let view = wait_swap_over(&api, "svc", 120);
    std::thread::sleep(Duration::from_millis(500));
    let seen = poller.finish();

    assert_eq!(view["swap"]["phase"], "done", "{:#}", view["swap"]);
    assert_eq!(seen.failed, 0, "failed calls during the swap: {seen:?}");
    assert!(seen.min_ready >= 1, "a poll saw no ready replica: {seen:?}");
    assert!(seen.polls > 20, "the client polled too little: {seen:?}");
    let after = wait_endpoints(&api, "svc", 3, 30);
    assert_eq!(
        placements(&before),
        placements(&after),
        "allocation ids and GPU indices changed"
    );
    assert_eq!(versions(&after), vec![Some("v4".to_string()); 3]);
    assert!(seen.versions.contains_key("v3") && seen.versions.contains_key("v4"));
    // Swapping to what it serves is a no-op that says so.
    let noop = swap(&api, "svc", r#"{"model":"m:v4"}"#);
    assert_eq!(noop.status, 200, "{:#}", noop.body);
    assert_eq!(noop.data()["outcome"], "already_serving");
    let events = task_events(&cp.operator(), "team-a", "svc");
    assert!(
        events.iter().any(|e| e.contains("swap m:v3 -> m:v4 done")),
        "{events:#?}"
    );
    // The version knows who uses it: v3 no longer lists the replicas.
    let v3 = cp.operator().get("/v1/models/m/versions/v3");
    let users = v3.data()["tasks"].to_string();
    assert!(!users.contains("svc.r"), "v3 still lists {users}");
    // Cost by model bills each version the time it served: the replicas,
    // swapped on the allocations they held, count under both versions.
    let by_model = || {
        let cost = api.get("/v1/tenants/team-a/cost?group_by=model");
        cost.data()["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                (
                    g["key"].as_str().unwrap_or("").to_string(),
                    g["allocations"].as_u64().unwrap_or(0),
                )
            })
            .collect::<Vec<_>>()
    };
    let mut lines = by_model();
    caldera_chaos_tests::wait_until(Duration::from_secs(5), || {
        lines = by_model();
        lines.iter().any(|(k, n)| k == "m:v4" && *n == 3)
    });
    assert!(
        lines.contains(&("m:v3".to_string(), 3)) && lines.contains(&("m:v4".to_string(), 3)),
        "cost by model: {lines:?}"
    );
}

#[test]
fn a_v4_that_never_gets_ready_is_rolled_back_and_v3_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let spec = never_ready_on_v4("svc", 2);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    wait_endpoints(&api, "svc", 2, 90);
    let poller = Poller::start(api.clone(), "svc");
    assert_eq!(swap(&api, "svc", r#"{"model":"m:v4"}"#).status, 202);
    let view = wait_swap_over(&api, "svc", 90);
    let seen = poller.finish();
    let s = &view["swap"];
    assert_eq!(s["phase"], "rolled_back", "{s:#}");
    let reason = s["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("svc.r0") && reason.contains("not ready"),
        "{reason}"
    );
    assert!(seen.min_ready >= 1, "{seen:?}");
    let after = wait_endpoints(&api, "svc", 2, 60);
    assert_eq!(versions(&after), vec![Some("v3".to_string()); 2]);
    let events = task_events(&cp.operator(), "team-a", "svc");
    assert!(
        events.iter().any(|e| e.starts_with("model_swap")
            && e.contains("rolled back")
            && e.contains("svc.r0")),
        "{events:#?}"
    );
    // Ended, so another may start.
    assert_ne!(swap(&api, "svc", r#"{"model":"m:v4"}"#).status, 409);
}

/// A service released in the middle of its swap: every replica stops
/// wherever its swap stood (one mid-restart on a v4 that never gets ready),
/// nothing is left running or allocated, and the swap is recorded
/// `cancelled` with who released it, not shown in progress for good.
#[test]
fn a_service_released_mid_swap_stops_every_replica_and_cancels_the_swap() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let mut spec = never_ready_on_v4("svc", 2);
    spec["readiness"]["ready_timeout_s"] = 60.into();
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    wait_endpoints(&api, "svc", 2, 90);
    assert_eq!(swap(&api, "svc", r#"{"model":"m:v4"}"#).status, 202);
    // The first replica restarted on v4 and waits for a readiness that
    // never comes.
    let mid = api.wait_task("svc", 60, "a replica waiting to be ready", |v| {
        v["swap"]["replicas"][0]["step"] == "waiting_ready"
    });
    assert_eq!(mid["swap"]["phase"], "swapping", "{:#}", mid["swap"]);
    let r = api.post("/v1/tasks/svc/release", "{}");
    assert_eq!(r.status, 200, "{:#}", r.body);
    let view = api.task("svc");
    assert_eq!(view["state"], "released", "{view:#}");
    let s = &view["swap"];
    assert_eq!(s["phase"], "cancelled", "{s:#}");
    assert!(
        s["reason"].as_str().is_some_and(|r| r.contains("released")),
        "{s:#}"
    );
    assert!(s["finished_ms"].is_u64(), "{s:#}");
    for i in 0..2 {
        api.wait_task(&format!("svc.r{i}"), 30, "ended", |v| {
            v["state"] == "released"
        });
    }
    let held = || cp.operator().get("/v1/allocations").data().clone();
    let freed = wait_until(Duration::from_secs(30), || {
        let a = held();
        ["ledger", "stored"]
            .iter()
            .all(|k| a[*k].as_array().is_some_and(Vec::is_empty))
    });
    assert!(freed, "allocations left: {:#}", held());
    let events = task_events(&cp.operator(), "team-a", "svc");
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("model_swap") && e.contains("cancelled")),
        "{events:#?}"
    );
    // Nothing of the service runs on either node any more.
    assert!(endpoints(&api, "svc").is_empty());
}

#[test]
fn one_replica_is_refused_without_downtime_allowed_or_surge_room_and_bad_bodies_name_their_field() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 1);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let mut spec = infer_service("one", "m:v3", 1, SERVER, &[]);
    spec["resources"]["gpu"]["memory_gb"] = 40.into();
    let r = api.post("/v1/tasks", &spec.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    wait_endpoints(&api, "one", 1, 90);
    // The other half of the node's one GPU is held by a job: the GPU is full.
    let filler = r#"{"task_id":"filler","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":40}},"command":["sleep","600"]}"#;
    assert_eq!(api.post("/v1/tasks", filler).status, 201);
    api.wait_task("filler", 30, "running", |v| v["state"] == "running");
    let r = swap(&api, "one", r#"{"model":"m:v4"}"#);
    assert_eq!(r.status, 409, "{:#}", r.body);
    assert_eq!(r.body["code"], 40904);
    let msg = r.body["msg"].as_str().unwrap_or("");
    assert!(
        msg.contains("2 replicas") && msg.contains("allow_downtime"),
        "{msg}"
    );
    // No room to surge either (the GPU is full),
    // and nothing is recorded (no swap, no surge replica, still v3).
    let r = swap(&api, "one", r#"{"model":"m:v4","max_surge":1}"#);
    assert_eq!(r.status, 409, "{:#}", r.body);
    assert_eq!(r.body["code"], 40906, "{:#}", r.body);
    let msg = r.body["msg"].as_str().unwrap_or("");
    assert!(msg.contains("no free room for a surge replica"), "{msg}");
    let view = api.task("one");
    assert!(view["swap"].is_null(), "{view:#}");
    assert_eq!(view["spec"]["model"], "m:v3", "{view:#}");
    assert_eq!(api.get("/v1/tasks/one.r1000").status, 404);
    let now = endpoints(&api, "one");
    assert_eq!(versions(&now), vec![Some("v3".to_string())]);
    let events = task_events(&cp.operator(), "team-a", "one");
    assert!(
        !events.iter().any(|e| e.starts_with("model_swap")),
        "{events:#?}"
    );
    // Bad bodies name their field; unknown versions are 422.
    let r = swap(&api, "one", r#"{"model":"m:v4","surge":1}"#);
    assert_eq!(r.status, 400);
    assert_eq!(r.body["field"], "surge");
    assert_eq!(swap(&api, "one", r#"{"model":"m:v9"}"#).status, 422);
}

#[test]
fn one_replica_is_swapped_with_allow_downtime() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 1);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let spec = infer_service("one", "m:v3", 1, SERVER, &[]);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    wait_endpoints(&api, "one", 1, 90);
    let r = swap(&api, "one", r#"{"model":"m:v4","allow_downtime":true}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    let view = wait_swap_over(&api, "one", 90);
    assert_eq!(view["swap"]["phase"], "done", "{:#}", view["swap"]);
    let after = wait_endpoints(&api, "one", 1, 30);
    assert_eq!(versions(&after), vec![Some("v4".to_string())]);
}

#[test]
fn a_control_plane_killed_mid_swap_finishes_it_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    // A slow load keeps each replica in waiting_ready for 3 s.
    let spec = infer_service("svc", "m:v3", 2, SERVER, &[("INFER_LOAD_MS", "3000")]);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    let before = wait_endpoints(&api, "svc", 2, 90);
    assert_eq!(swap(&api, "svc", r#"{"model":"m:v4"}"#).status, 202);
    let mid = wait_until(Duration::from_secs(60), || {
        let v = api.task("svc");
        let steps = v["swap"]["replicas"].to_string();
        steps.contains("restarting") || steps.contains("waiting_ready")
    });
    assert!(
        mid,
        "the swap never reached a restart: {:#}",
        api.task("svc")
    );
    cp.kill9();
    cp.restart();
    let api = cp.api(&token);
    let view = wait_swap_over(&api, "svc", 120);
    assert_eq!(view["swap"]["phase"], "done", "{:#}", view["swap"]);
    let after = wait_endpoints(&api, "svc", 2, 60);
    assert_eq!(placements(&before), placements(&after));
    assert_eq!(versions(&after), vec![Some("v4".to_string()); 2]);
    assert!(endpoints(&api, "svc").len() == 2);
}

#[test]
fn one_replica_with_max_surge_is_swapped_make_before_break_on_free_capacity() {
    let dir = tempfile::tempdir().unwrap();
    // Two one-GPU nodes: the replica holds one GPU, the surge replica gets
    // the other (never the GPU its sibling holds: replica spread).
    let (cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let spec = infer_service("one", "m:v3", 1, SERVER, &[("INFER_LOAD_MS", "1000")]);
    let r = api.post("/v1/tasks", &spec.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    let before = wait_endpoints(&api, "one", 1, 90);
    assert_eq!(versions(&before), vec![Some("v3".to_string())]);
    let poller = Poller::start(api.clone(), "one");
    std::thread::sleep(Duration::from_millis(300));
    let r = swap(&api, "one", r#"{"model":"m:v4","max_surge":1}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    let started = r.data()["swap"]["replicas"].clone();
    let surge: Vec<&Value> = started
        .as_array()
        .map(|a| a.iter().filter(|r| r["surge"] == true).collect())
        .unwrap_or_default();
    assert_eq!(surge.len(), 1, "{started:#}");
    let surge_id = surge[0]["replica"].as_str().unwrap_or("");
    assert!(surge_id.ends_with("one.r1000"), "{started:#}");
    let view = wait_swap_over(&api, "one", 120);
    std::thread::sleep(Duration::from_millis(300));
    let seen = poller.finish();
    assert_eq!(
        view["swap"]["phase"],
        "done",
        "{:#}\nthe surge replica: {:#}",
        view["swap"],
        api.task("one.r1000")
    );
    assert_eq!(view["spec"]["model"], "m:v4", "{view:#}");
    assert!(seen.min_ready >= 1, "a poll saw no ready replica: {seen:?}");
    assert!(seen.polls > 20, "the client polled too little: {seen:?}");
    assert!(seen.versions.contains_key("v3") && seen.versions.contains_key("v4"));
    eprintln!("surge swap, the client saw: {seen:?}");
    // The old replica is released; the surge replica serves the slot on v4.
    let old_gone = wait_until(Duration::from_secs(30), || {
        api.task("one.r0")["state"] == "released"
    });
    assert!(old_gone, "{:#}", api.task("one.r0"));
    let after = wait_endpoints(&api, "one", 1, 30);
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(versions(&after), vec![Some("v4".to_string())]);
    assert_eq!(after[0]["replica"], "one.r1000", "{after:#?}");
    let events = task_events(&cp.operator(), "team-a", "one");
    assert!(
        events
            .iter()
            .any(|e| e.contains("swap m:v3 -> m:v4 done: surge replica one.r1000 ready")),
        "{events:#?}"
    );
}

#[test]
fn a_surge_replica_that_never_gets_ready_is_released_and_v3_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let api = cp.api(&cp.tenant("team-a"));
    let spec = never_ready_on_v4("one", 1);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    wait_endpoints(&api, "one", 1, 90);
    let poller = Poller::start(api.clone(), "one");
    let r = swap(&api, "one", r#"{"model":"m:v4","max_surge":1}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    let view = wait_swap_over(&api, "one", 90);
    let seen = poller.finish();
    let s = &view["swap"];
    assert_eq!(s["phase"], "rolled_back", "{s:#}");
    let reason = s["reason"].as_str().unwrap_or("");
    // The control plane's wait (from the swap's start) or the agent's own
    // probe timeout (from the process's start, which fails it) ends first.
    assert!(
        reason.contains("one.r1000")
            && (reason.contains("not ready within") || reason.contains("before it was ready")),
        "{reason}"
    );
    assert_eq!(view["spec"]["model"], "m:v3", "{view:#}");
    assert!(seen.min_ready >= 1, "{seen:?}");
    let released = wait_until(Duration::from_secs(30), || {
        matches!(
            api.task("one.r1000")["state"].as_str(),
            Some("released" | "failed")
        )
    });
    assert!(released, "{:#}", api.task("one.r1000"));
    let after = endpoints(&api, "one");
    assert_eq!(versions(&after), vec![Some("v3".to_string())]);
    assert_eq!(after[0]["replica"], "one.r0", "{after:#?}");
    // Ended, so it is not "in progress" any more.
    let again = swap(&api, "one", r#"{"model":"m:v4","max_surge":1}"#);
    assert_ne!(again.body["code"], 40903, "{:#}", again.body);
}

#[test]
fn a_control_plane_killed_mid_surge_finishes_the_swap_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, _agents) = rig(dir.path(), 2);
    register_versions(&cp.operator(), dir.path(), SIZE);
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    // A slow load keeps the surge replica unready for 3 s.
    let spec = infer_service("one", "m:v3", 1, SERVER, &[("INFER_LOAD_MS", "3000")]);
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    wait_endpoints(&api, "one", 1, 90);
    let r = swap(&api, "one", r#"{"model":"m:v4","max_surge":1}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    let running = wait_until(Duration::from_secs(60), || {
        api.task("one.r1000")["state"] == "running"
    });
    assert!(running, "{:#}", api.task("one.r1000"));
    let mid = api.task("one");
    assert_eq!(mid["swap"]["phase"], "swapping", "killed too late: {mid:#}");
    cp.kill9();
    cp.restart();
    let api = cp.api(&token);
    let view = wait_swap_over(&api, "one", 120);
    assert_eq!(view["swap"]["phase"], "done", "{:#}", view["swap"]);
    let old_gone = wait_until(Duration::from_secs(30), || {
        api.task("one.r0")["state"] == "released"
    });
    assert!(old_gone, "{:#}", api.task("one.r0"));
    let listed = wait_until(Duration::from_secs(60), || {
        endpoints(&api, "one").len() == 1
    });
    assert!(
        listed,
        "no endpoint; the surge replica: {:#}",
        api.task("one.r1000")
    );
    let after = endpoints(&api, "one");
    assert_eq!(versions(&after), vec![Some("v4".to_string())]);
    assert_eq!(after[0]["replica"], "one.r1000", "{after:#?}");
}

// ---- containers: a swap that changes the image ----

/// The seed image with `/etc/caldera-image` saying `mark`, pushed to the
/// local registry as `caldera-test/<name>:1`; built in a store of its own,
/// removed after (no node holds it until it pulls it).
fn push_marked_image(dir: &Path, name: &str, mark: &str) -> String {
    let work = dir.join(format!("build-{name}"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("image-mark"), mark).unwrap();
    let containerfile = format!(
        "FROM {}\nCOPY image-mark /etc/caldera-image\n",
        container_host::SEED_IMAGE
    );
    std::fs::write(work.join("Containerfile"), containerfile).unwrap();
    let image = format!("{}/caldera-test/{name}:1", container_host::registry());
    let store = NodeStore::new(&work, "builder");
    let context = work.display().to_string();
    let file = work.join("Containerfile").display().to_string();
    let built = store.podman(&["build", "--quiet", "-t", &image, "-f", &file, &context]);
    built.unwrap_or_else(|e| panic!("building {image}: {e}"));
    let pushed = store.podman(&["push", "--quiet", "--tls-verify=false", &image]);
    pushed.unwrap_or_else(|e| panic!("pushing {image}: {e}"));
    image
}

/// A unique name for this run's images.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{what}-{}-{nanos}", std::process::id())
}

/// A control plane and `n` agents with weight caches, each with a container
/// store of its own (so each pulls what it runs), one GPU each.
fn container_rig(dir: &Path, n: usize) -> (ControlPlane, Vec<Agent>, Vec<NodeStore>) {
    container_host::require();
    let stores: Vec<NodeStore> = (0..n)
        .map(|i| NodeStore::new(dir, &format!("node-{i}")))
        .collect();
    let specs: Vec<AgentSpec> = stores
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (k, v) = s.env();
            AgentSpec::with_cache(&format!("node-{i}"), "1xA100-80GB", "0.1").env(k, &v)
        })
        .collect();
    let (cp, agents) = cluster(Path::new(BIN), dir, ENV, &specs);
    (cp, agents, stores)
}

/// Registers `m:v3` (no image of its own) and `m:<version>` carrying
/// `image`, with different weights.
fn register_with_image(op: &Api, dir: &Path, version: &str, image: &str) {
    let v3 = generate(&dir.join("nfs/m-v3.bin"), SIZE, 3).expect("v3 weights");
    let other = generate(&dir.join(format!("nfs/m-{version}.bin")), SIZE, 4).expect("weights");
    let bodies = [
        json!({"name": "m", "version": "v3", "weights": v3.spec(&v3.file_uri())}),
        json!({"name": "m", "version": version, "weights": other.spec(&other.file_uri()), "image": image}),
    ];
    for body in bodies {
        let r = op.post("/v1/models", &body.to_string());
        assert_eq!(r.status, 201, "register {body}: {:#}", r.body);
    }
}

/// The service's replicas: busybox's httpd in the seed's image, answering
/// `/infer` with the version it was started on (CALDERA_MODEL_VERSION), the
/// image's mark and a checksum of the weights it reads; `/ready` once up,
/// except in an image marked `never-ready`.
fn container_service(id: &str, replicas: u32) -> Value {
    let script = r#"w=$CALDERA_SCRATCH_DIR/www-$CALDERA_MODEL_VERSION; mkdir -p $w; printf '{"version":"%s","image":"%s","weights":"%s"}' "$CALDERA_MODEL_VERSION" "$(cat /etc/caldera-image 2>/dev/null || echo seed)" "$(md5sum < $CALDERA_MODEL_PATH | cut -c1-12)" > $w/infer; [ "$(cat /etc/caldera-image 2>/dev/null)" = never-ready ] || echo ok > $w/ready; exec httpd -f -p $CALDERA_PORT -h $w"#;
    json!({
        "task_id": id, "task_type": "inference", "replicas": replicas, "model": "m:v3",
        "resources": {"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 1}, "memory": {"size_gb": 1}},
        "image": container_host::SEED_IMAGE,
        "command": ["sh", "-c", script],
        "readiness": {"http_path": "/ready", "period_s": 1, "ready_timeout_s": 30},
    })
}

/// What an endpoint answers on `/infer`.
fn infer(endpoint: &Value) -> Value {
    let addr = format!(
        "{}:{}",
        endpoint["address"].as_str().unwrap_or(""),
        endpoint["port"]
    );
    Api::new(&addr, None).get("/infer").body
}

/// The slice a container of `store` sits on as podman has it: its cgroup
/// parent, its devices and the user it runs as.
fn slice_of(store: &NodeStore, id: &str) -> String {
    let format = "{{.HostConfig.CgroupParent}} {{.HostConfig.Devices}} {{.Config.User}}";
    store
        .podman(&["inspect", "--format", format, id])
        .unwrap_or_else(|e| format!("inspect failed: {e}"))
        .trim()
        .to_string()
}

/// `(container id, image)` of each container running in `store`.
fn running_in(store: &NodeStore) -> Vec<(String, String)> {
    let out = store
        .podman(&["ps", "--format", "{{.ID}} {{.Image}}"])
        .unwrap_or_default();
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, image)| (id.to_string(), image.to_string()))
        .collect()
}

#[test]
fn a_hot_swap_that_changes_the_image_keeps_two_container_replicas_answering() {
    let dir = tempfile::tempdir().unwrap();
    let v4_image = push_marked_image(dir.path(), &unique("swap-v4"), "image-of-v4");
    let (cp, _agents, stores) = container_rig(dir.path(), 2);
    register_with_image(&cp.operator(), dir.path(), "v4", &v4_image);
    let api = cp.api(&cp.tenant("ctrswap"));
    let spec = container_service("svc", 2);
    let r = api.post("/v1/tasks", &spec.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    let before = wait_endpoints(&api, "svc", 2, 120);
    let answers: Vec<Value> = before.iter().map(infer).collect();
    assert!(
        answers
            .iter()
            .all(|a| a["version"] == "v3" && a["image"] == "seed"),
        "{answers:#?}"
    );
    let v3_weights = answers[0]["weights"].clone();
    assert!(
        v3_weights.as_str().is_some_and(|w| w.len() == 12),
        "{answers:#?}"
    );
    let old: Vec<Vec<(String, String)>> = stores.iter().map(running_in).collect();
    assert!(
        old.iter()
            .all(|c| c.len() == 1 && c[0].1 == container_host::SEED_IMAGE),
        "{old:?}"
    );

    let slices: Vec<String> = stores
        .iter()
        .zip(&old)
        .map(|(store, c)| slice_of(store, &c[0].0))
        .collect();
    // The workload's cgroup is the parent, its (simulated) GPU the device.
    assert!(
        slices
            .iter()
            .all(|s| s.starts_with('/') && s.contains("gpu")),
        "{slices:?}"
    );

    let poller = Poller::start(api.clone(), "svc");
    std::thread::sleep(Duration::from_millis(500));
    let r = swap(&api, "svc", r#"{"model":"m:v4"}"#);
    assert_eq!(r.status, 202, "{:#}", r.body);
    let view = wait_swap_over(&api, "svc", 240);
    std::thread::sleep(Duration::from_millis(500));
    let seen = poller.finish();

    let s = &view["swap"];
    assert_eq!(s["phase"], "done", "{s:#}");
    assert_eq!(seen.failed, 0, "failed calls during the swap: {seen:?}");
    assert!(seen.min_ready >= 1, "a poll saw no ready replica: {seen:?}");
    assert!(seen.polls > 20, "the client polled too little: {seen:?}");
    let after = wait_endpoints(&api, "svc", 2, 30);
    assert_eq!(
        placements(&before),
        placements(&after),
        "allocations changed"
    );
    let answers: Vec<Value> = after.iter().map(infer).collect();
    for a in &answers {
        assert_eq!(a["version"], "v4", "{answers:#?}");
        assert_eq!(a["image"], "image-of-v4", "{answers:#?}");
        // It reads the new version's weights.
        assert!(a["weights"].as_str().is_some_and(|w| w.len() == 12), "{a}");
        assert_ne!(a["weights"], v3_weights, "{answers:#?}");
    }
    // The new containers answer on ports of their own: the endpoints moved.
    let ports = |l: &[Value]| {
        let mut p: Vec<(String, u64)> = l
            .iter()
            .map(|e| (e["replica"].to_string(), e["port"].as_u64().unwrap_or(0)))
            .collect();
        p.sort();
        p
    };
    assert_ne!(
        ports(&before),
        ports(&after),
        "the endpoints kept their ports"
    );
    // Each node runs one container now: the new image's, a new container.
    for ((store, was), slice) in stores.iter().zip(&old).zip(&slices) {
        let now = running_in(store);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_eq!(now[0].1, v4_image, "{now:?}");
        assert_ne!(now[0].0, was[0].0, "the old container still runs");
        // On the same slice: cgroup parent, devices, user.
        assert_eq!(&slice_of(store, &now[0].0), slice, "another slice");
        let digest = store
            .podman(&["image", "inspect", "--format", "{{.Digest}}", &v4_image])
            .unwrap_or_default();
        let replicas = s["replicas"].as_array().cloned().unwrap_or_default();
        assert!(
            replicas
                .iter()
                .any(|r| r["image"] == v4_image.as_str() && r["image_digest"] == digest.trim()),
            "the swap's record does not name {v4_image} ({}): {s:#}",
            digest.trim()
        );
    }
    let events = task_events(&cp.operator(), "ctrswap", "svc");
    let done: Vec<&String> = events
        .iter()
        .filter(|e| e.contains("swapped to m:v4") && e.contains(&v4_image))
        .collect();
    assert_eq!(done.len(), 2, "{events:#?}");
    let replica = task_events(&cp.operator(), "ctrswap", "svc.r0");
    assert!(
        replica
            .iter()
            .any(|e| e.contains(&format!("in image {v4_image} (sha256:"))),
        "{replica:#?}"
    );
}

#[test]
fn a_swap_to_a_version_whose_image_is_missing_fails_and_the_old_containers_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let missing = format!(
        "{}/caldera-test/{}:1",
        container_host::registry(),
        unique("never-pushed")
    );
    let (cp, _agents, stores) = container_rig(dir.path(), 2);
    register_with_image(&cp.operator(), dir.path(), "v5", &missing);
    let api = cp.api(&cp.tenant("ctrmiss"));
    let r = api.post("/v1/tasks", &container_service("svc", 2).to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    wait_endpoints(&api, "svc", 2, 120);
    let old: Vec<Vec<(String, String)>> = stores.iter().map(running_in).collect();

    let poller = Poller::start(api.clone(), "svc");
    assert_eq!(swap(&api, "svc", r#"{"model":"m:v5"}"#).status, 202);
    let view = wait_swap_over(&api, "svc", 120);
    let seen = poller.finish();

    let s = &view["swap"];
    assert_eq!(s["phase"], "rolled_back", "{s:#}");
    let reason = s["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("could not be pulled") && reason.contains("keeps serving"),
        "{reason}"
    );
    assert_eq!(seen.failed, 0, "failed calls during the swap: {seen:?}");
    assert!(seen.min_ready >= 1, "{seen:?}");
    let after = wait_endpoints(&api, "svc", 2, 60);
    assert!(
        after.iter().map(infer).all(|a| a["version"] == "v3"),
        "{after:#?}"
    );
    // The very containers that served before: nothing was restarted.
    let now: Vec<Vec<(String, String)>> = stores.iter().map(running_in).collect();
    assert_eq!(now, old, "the old containers were replaced");
}

#[test]
fn a_new_container_that_never_gets_ready_is_removed_and_the_old_ones_keep_serving() {
    let dir = tempfile::tempdir().unwrap();
    let image = push_marked_image(dir.path(), &unique("never-ready"), "never-ready");
    let (cp, _agents, stores) = container_rig(dir.path(), 2);
    register_with_image(&cp.operator(), dir.path(), "v6", &image);
    let api = cp.api(&cp.tenant("ctrlate"));
    let mut spec = container_service("svc", 2);
    spec["readiness"]["ready_timeout_s"] = 6.into();
    let r = api.post("/v1/tasks", &spec.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    wait_endpoints(&api, "svc", 2, 120);
    let old: Vec<Vec<(String, String)>> = stores.iter().map(running_in).collect();

    let poller = Poller::start(api.clone(), "svc");
    assert_eq!(swap(&api, "svc", r#"{"model":"m:v6"}"#).status, 202);
    let view = wait_swap_over(&api, "svc", 120);
    let seen = poller.finish();

    assert_eq!(view["swap"]["phase"], "rolled_back", "{:#}", view["swap"]);
    assert_eq!(seen.failed, 0, "failed calls during the swap: {seen:?}");
    assert!(seen.min_ready >= 1, "{seen:?}");
    let events = task_events(&cp.operator(), "ctrlate", "svc.r0").join("\n");
    let after = wait_endpoints(&api, "svc", 2, 60);
    assert!(
        after.iter().map(infer).all(|a| a["version"] == "v3"),
        "{after:#?}\n{events}"
    );
    // The new container is gone; the old one never stopped.
    let only_old = wait_until(Duration::from_secs(20), || {
        stores.iter().map(running_in).collect::<Vec<_>>() == old
    });
    let now: Vec<Vec<(String, String)>> = stores.iter().map(running_in).collect();
    assert!(only_old, "before {old:?}, now {now:?}");
}

#[test]
fn retire_with_replace_with_moves_a_container_service_into_the_replacements_image() {
    let dir = tempfile::tempdir().unwrap();
    let v4_image = push_marked_image(dir.path(), &unique("retire-v4"), "image-of-v4");
    let (cp, _agents, stores) = container_rig(dir.path(), 2);
    register_with_image(&cp.operator(), dir.path(), "v4", &v4_image);
    let api = cp.api(&cp.tenant("ctrretire"));
    let r = api.post("/v1/tasks", &container_service("svc", 2).to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    wait_endpoints(&api, "svc", 2, 120);

    let poller = Poller::start(api.clone(), "svc");
    let r = cp.operator().post(
        "/v1/models/m/versions/v3/retire",
        r#"{"replace_with": "m:v4"}"#,
    );
    assert_eq!(r.status, 200, "{:#}", r.body);
    let swapped = wait_until(Duration::from_secs(180), || {
        api.task("svc")["swap"]["phase"] == "done"
    });
    let seen = poller.finish();
    assert!(swapped, "{:#}", api.task("svc")["swap"]);
    assert_eq!(seen.failed, 0, "failed calls during the swap: {seen:?}");
    let after = wait_endpoints(&api, "svc", 2, 30);
    assert!(
        after
            .iter()
            .map(infer)
            .all(|a| a["version"] == "v4" && a["image"] == "image-of-v4"),
        "{after:#?}"
    );
    for store in &stores {
        let now = running_in(store);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_eq!(now[0].1, v4_image, "{now:?}");
    }
    // New replicas of the service start in the image its replicas run now.
    assert_eq!(api.task("svc")["spec"]["image"], v4_image.as_str());
}
