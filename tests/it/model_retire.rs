//! Retire by control message and deprecate, with real
//! processes: a control plane and two agents with weight caches on disk.
//! A retired version takes no new tasks; while a service still uses it, it
//! stays `retiring` and lists that service — across a kill -9 of the
//! control plane; once the service is released it becomes `retired`, with
//! an event naming who asked, and every node's cache file is gone. A
//! deprecated version still serves, and a submission naming it succeeds
//! with a warning (the API's `data.warnings`; the CLI prints it).
use caldera_chaos_tests::models::{
    cached_versions, model_service, one_core, release_service, submit, wait_running,
};
use caldera_chaos_tests::weights::{cached_copy, generate};
use caldera_chaos_tests::{cluster, wait_until, Agent, AgentSpec, Api};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

/// Waits until `agent`'s cache directory holds a file of `sha256` (or, with
/// `present` false, holds none); panics after 30 s.
fn wait_cached(agent: &Agent, sha256: &str, present: bool) {
    let holds = || cached_copy(&agent.data_dir, sha256).is_some() == present;
    assert!(
        wait_until(Duration::from_secs(30), holds),
        "{}: a copy of {sha256} should be there: {present}",
        agent.data_dir.display()
    );
}

fn version(op: &Api, model: &str) -> Value {
    let (name, v) = model.split_once(':').expect("name:version");
    op.model_version(name, v)
}

#[test]
fn retire_waits_for_its_last_user_survives_a_restart_then_evicts_every_copy() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [
        AgentSpec::with_cache("node-0", "1xA100-80GB", "1"),
        AgentSpec::with_cache("node-1", "1xA100-80GB", "1"),
    ];
    let (mut cp, nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let w = generate(&dir.path().join("nfs/m-v1.bin"), 1_000_000, 7).unwrap();
    let r = op.register_model("m", "v1", &w.spec(&w.file_uri()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    // One replica per node (spread): both caches hold m:v1.
    submit(&api, &model_service("svc", "m:v1", 2, one_core()));
    wait_running(&api, "svc.r0", 60);
    wait_running(&api, "svc.r1", 60);
    for n in &nodes {
        wait_cached(n, &w.sha256, true);
    }

    let r = op.post("/v1/models/m/versions/v1/retire", "{}");
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["data"]["state"], "retiring", "{:#}", r.body);
    assert_eq!(r.body["data"]["retire"]["by"], "operator", "{:#}", r.body);
    // A tenant may not retire.
    let r = api.post("/v1/models/m/versions/v1/retire", "{}");
    assert_eq!(r.status, 403, "{:#}", r.body);

    // No new task may name it.
    let r = api.post(
        "/v1/tasks",
        &model_service("late", "m:v1", 1, one_core()).to_string(),
    );
    assert_eq!(r.status, 422, "{:#}", r.body);
    assert_eq!(r.body["code"], 42204, "{:#}", r.body);
    assert_eq!(r.body["field"], "model", "{:#}", r.body);

    // A kill -9 of the control plane: the retire is in sled.
    cp.restart();
    let op = cp.operator();
    let api = cp.api(&token);
    assert!(wait_until(Duration::from_secs(30), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == 2)
    }));
    // Still used: retiring, the service and its replicas listed by tenant.
    std::thread::sleep(Duration::from_secs(2));
    let v = version(&op, "m:v1");
    assert_eq!(v["state"], "retiring", "{v:#}");
    let users: Vec<String> = v["used_by"]["team-a"]
        .as_array()
        .map(|u| {
            u.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    for id in ["svc", "svc.r0", "svc.r1"] {
        assert!(users.iter().any(|u| u == id), "{id} not listed: {v:#}");
    }
    for n in &nodes {
        assert!(
            cached_copy(&n.data_dir, &w.sha256).is_some(),
            "in use, kept"
        );
    }

    // Released: retired, and no cache holds it any more.
    release_service(&api, "svc", 2);
    assert!(
        wait_until(Duration::from_secs(30), || version(&op, "m:v1")["state"]
            == "retired"),
        "{:#}",
        version(&op, "m:v1")
    );
    for n in &nodes {
        wait_cached(n, &w.sha256, false);
    }
    for n in ["node-0", "node-1"] {
        assert!(
            wait_until(Duration::from_secs(20), || !cached_versions(
                &op.node_cache(n)
            )
            .contains(&w.sha256)),
            "{n} still reports m:v1"
        );
    }
    let events = op.get("/v1/events?limit=1000").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.contains("model m:v1 retired (asked by operator)"))),
        "{events:#?}"
    );
}

#[test]
fn a_deprecated_version_still_serves_and_its_submissions_warn() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [AgentSpec::with_cache("node-0", "1xA100-80GB", "1")];
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let w = generate(&dir.path().join("nfs/m-v2.bin"), 100_000, 3).unwrap();
    assert_eq!(
        op.register_model("m", "v2", &w.spec(&w.file_uri())).status,
        201
    );
    let r = op.post("/v1/models/m/versions/v2/deprecate", "{}");
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["data"]["state"], "deprecated");

    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    let r = api.post(
        "/v1/tasks",
        &model_service("old", "m:v2", 1, one_core()).to_string(),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let warning = r.body["data"]["warnings"][0].as_str().unwrap_or("");
    assert!(warning.contains("model m:v2 is deprecated"), "{:#}", r.body);
    wait_running(&api, "old.r0", 60);

    // The CLI prints it.
    let file = dir.path().join("svc.json");
    std::fs::write(
        &file,
        model_service("cli", "m:v2", 1, one_core()).to_string(),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["submit", file.to_str().unwrap()])
        .env("CALDERA_SERVER", cp.url())
        .env("CALDERA_TOKEN", &token)
        .env_remove("CALDERA_CONTEXT")
        .env("CALDERA_CONTEXTS_FILE", dir.path().join("no-contexts"))
        .output()
        .expect("the caldera binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: model m:v2 is deprecated"),
        "stdout {} stderr {stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A version that is not deprecated: no warnings field.
    let w3 = generate(&dir.path().join("nfs/m-v3.bin"), 100_000, 4).unwrap();
    assert_eq!(
        op.register_model("m", "v3", &w3.spec(&w3.file_uri()))
            .status,
        201
    );
    let r = api.post(
        "/v1/tasks",
        &model_service("new", "m:v3", 1, one_core()).to_string(),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert!(r.body["data"]["warnings"].is_null(), "{:#}", r.body);
}

/// Retire with `replace_with`: every service on the old version is swapped
/// in place to the new one (the swap of h/swap), then the old version is
/// `retired` and gone from every node's cache.
#[test]
fn retire_with_replace_with_moves_every_service_then_evicts_the_old_version() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [
        AgentSpec::with_cache("node-0", "1xA100-80GB", "1"),
        AgentSpec::with_cache("node-1", "1xA100-80GB", "1"),
    ];
    let (cp, nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let v1 = generate(&dir.path().join("nfs/m-v1.bin"), 500_000, 1).unwrap();
    let v2 = generate(&dir.path().join("nfs/m-v2.bin"), 500_000, 2).unwrap();
    assert_eq!(
        op.register_model("m", "v1", &v1.spec(&v1.file_uri()))
            .status,
        201
    );
    assert_eq!(
        op.register_model("m", "v2", &v2.spec(&v2.file_uri()))
            .status,
        201
    );
    let api = cp.api(&cp.tenant("team-a"));
    for svc in ["a", "b"] {
        submit(&api, &model_service(svc, "m:v1", 2, one_core()));
        wait_running(&api, &format!("{svc}.r0"), 60);
        wait_running(&api, &format!("{svc}.r1"), 60);
    }
    let r = op.post(
        "/v1/models/m/versions/v1/retire",
        r#"{"replace_with": "m:v2"}"#,
    );
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert_eq!(r.body["data"]["retire"]["replace_with"], "m:v2");
    assert!(
        wait_until(Duration::from_secs(120), || version(&op, "m:v1")["state"]
            == "retired"),
        "{:#}",
        version(&op, "m:v1")
    );
    for svc in ["a", "b"] {
        for i in 0..2 {
            let v = api.task(&format!("{svc}.r{i}"));
            assert_eq!(v["state"], "running", "{v:#}");
            assert_eq!(v["spec"]["model"], "m:v2", "{v:#}");
        }
    }
    for n in &nodes {
        wait_cached(n, &v1.sha256, false);
        wait_cached(n, &v2.sha256, true);
    }
}

/// Retire with `replace_with` of a 1-replica service: its swap goes through
/// a surge replica (`max_surge: 1`), and the surge's end must set the
/// service's own record to the new version, or the old version stays
/// `retiring` for good. Fails without `swap_drive::serve_target` on the
/// surge path.
#[test]
fn retire_with_replace_with_moves_a_one_replica_service_by_surge_then_retires() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [AgentSpec::with_cache("node-0", "1xA100-80GB", "1")];
    let (cp, nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let v1 = generate(&dir.path().join("nfs/m-v1.bin"), 500_000, 11).unwrap();
    let v2 = generate(&dir.path().join("nfs/m-v2.bin"), 500_000, 12).unwrap();
    for (v, w) in [("v1", &v1), ("v2", &v2)] {
        let r = op.register_model("m", v, &w.spec(&w.file_uri()));
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, &model_service("solo", "m:v1", 1, one_core()));
    wait_running(&api, "solo.r0", 60);
    let r = op.post(
        "/v1/models/m/versions/v1/retire",
        r#"{"replace_with": "m:v2"}"#,
    );
    assert_eq!(r.status, 200, "{:#}", r.body);
    assert!(
        wait_until(Duration::from_secs(120), || version(&op, "m:v1")["state"]
            == "retired"),
        "{:#} service: {:#}",
        version(&op, "m:v1"),
        api.task("solo")
    );
    let svc = api.task("solo");
    assert_eq!(svc["swap"]["phase"], "done", "{svc:#}");
    assert_eq!(svc["spec"]["model"], "m:v2", "{svc:#}");
    wait_cached(&nodes[0], &v1.sha256, false);
}
