//! Model versions, the control plane's side, against the real
//! server: registration errors name their field, versions are immutable, a
//! task naming an unknown version is refused naming it, a rollout to three
//! (fake) nodes reads the origin once and peers twice, a warming timeout
//! names the stage and the source, and versions survive a restart.
//!
//! The nodes are `fake_node`s speaking the real wire protocol: each reports
//! a weight cache and answers `warm` with warmup reports, so the test sees
//! exactly what the control plane told each node, in order.
use caldera_chaos_tests::fake_node::{self, WeightCache};
use caldera_chaos_tests::{wait_until, ControlPlane, JOIN_TOKEN};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const SHA: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
const SIZE: u64 = 4_000_000;

/// A control plane whose fake nodes are never lost for silence (they do
/// not heartbeat), with `env` on top.
fn control_plane(dir: &Path, env: &[(&str, &str)]) -> ControlPlane {
    let mut all = vec![
        ("CALDERA_HEARTBEAT_INTERVAL_MS", "1000"),
        ("CALDERA_NODE_TIMEOUT_MS", "600000"),
        ("CALDERA_WORKLOAD_LEASE_MS", "600000"),
    ];
    all.extend_from_slice(env);
    ControlPlane::start(Path::new(BIN), &dir.join("cp"), &all)
}

fn registration(version: &str, uri: &str, size: u64, sha: &str) -> String {
    json!({"name": "llama", "version": version,
        "weights": {"uri": uri, "size_bytes": size, "sha256": sha}})
    .to_string()
}

fn register(cp: &ControlPlane, version: &str) {
    let r = cp.operator().post(
        "/v1/models",
        &registration(version, "file:///mnt/models/llama.bin", SIZE, SHA),
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
}

fn task_with_model(id: &str, model: &str) -> String {
    json!({"task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}},
        "command": ["serve"], "model": model})
    .to_string()
}

/// A fake node with one GPU, a 1 GB cache holding `cached`, serving peers.
fn fake(cp: &ControlPlane, name: &str, cached: &[&str]) -> (TcpStream, u64) {
    let cache = WeightCache {
        capacity_bytes: 1 << 30,
        cached: cached.iter().map(|s| (s.to_string(), SIZE)).collect(),
        peer_url: Some(format!("http://{name}.peers:9000")),
    };
    fake_node::join_with_cache(&cp.addr, JOIN_TOKEN, name, 1, &cache).unwrap()
}

/// Every message the control plane sent on `s` within `wait`.
fn received(s: &mut TcpStream, wait: Duration) -> Vec<Value> {
    let mut out = Vec::new();
    let _ = s.set_read_timeout(Some(wait));
    while let Ok(m) = fake_node::read_json(s) {
        out.push(m);
    }
    let _ = s.set_read_timeout(None);
    out
}

fn of_type<'a>(msgs: &'a [Value], t: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["type"] == t).collect()
}

fn version_view(cp: &ControlPlane, v: &str) -> Value {
    cp.operator()
        .get(&format!("/v1/models/llama/versions/{v}"))
        .data()
        .clone()
}

fn copy_of<'a>(view: &'a Value, node: &str) -> &'a Value {
    view["nodes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["node"] == node))
        .unwrap_or(&Value::Null)
}

#[test]
fn registration_errors_name_fields_versions_are_immutable_and_unknown_models_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), &[]);
    let op = cp.operator();
    for (body, field) in [
        (
            registration("v1", "file:///m.bin", SIZE, "ABC"),
            "weights.sha256",
        ),
        (
            registration("v1", "s3://bucket/m.bin", SIZE, SHA),
            "weights.uri",
        ),
        (
            registration("v1", "file:///m.bin", 0, SHA),
            "weights.size_bytes",
        ),
        (
            registration("bad/version", "file:///m.bin", SIZE, SHA),
            "version",
        ),
    ] {
        // 400 for a malformed value, 422 for one out of range: each names its field.
        let r = op.post("/v1/models", &body);
        assert!(matches!(r.status, 400 | 422), "{body}: {:?}", r.body);
        assert_eq!(r.body["field"], field, "{:?}", r.body);
    }
    register(&cp, "v1");
    // The identical registration again: 200, the same version.
    let again = op.post(
        "/v1/models",
        &registration("v1", "file:///mnt/models/llama.bin", SIZE, SHA),
    );
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.data()["state"], "registered");
    // Another body for llama:v1: versions are immutable.
    let other = op.post(
        "/v1/models",
        &registration("v1", "file:///mnt/models/other.bin", SIZE, SHA),
    );
    assert_eq!(other.status, 409, "{:?}", other.body);
    assert_eq!(other.body["error"], "conflict");
    // A tenant may not register unless the operator allows it.
    let token = cp.tenant("acme");
    let t = cp.api(&token);
    let r = t.post(
        "/v1/models",
        &registration("v9", "file:///mnt/models/llama.bin", SIZE, SHA),
    );
    assert_eq!(r.status, 403, "{:?}", r.body);
    // The operator's version is visible to the tenant.
    let list = t.get("/v1/models");
    assert_eq!(
        list.data()[0]["versions"][0]["version"],
        "v1",
        "{:?}",
        list.body
    );

    // A task naming a version that is not registered: 422 naming it.
    let r = t.post("/v1/tasks", &task_with_model("t1", "llama:v7"));
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.body["error"], "unknown_model");
    assert_eq!(r.body["field"], "model");
    assert!(r.body["msg"]
        .as_str()
        .unwrap_or_default()
        .contains("llama:v7"));
    let r = t.post("/v1/tasks", &task_with_model("t2", "llama"));
    assert_eq!(r.body["field"], "model", "{:?}", r.body);
    // A known one is accepted.
    let r = t.post("/v1/tasks", &task_with_model("t3", "llama:v1"));
    assert_eq!(r.status, 201, "{:?}", r.body);
}

/// Three nodes need llama:v1 at once: exactly one reads the origin; once its
/// copy is verified the two others are pointed at it, each after the peer
/// was granted that receiver's token. (Verified copies only: with
/// `peer-stream-partial`, the default, the two would stream from the first
/// while it reads; `actors/src/model/tests.rs` and `models_warmup` hold that.)
#[test]
fn three_nodes_warm_with_one_origin_read_and_two_peer_reads_each_granted_first() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), &[("CALDERA_PEER_STREAM_PARTIAL", "false")]);
    register(&cp, "v1");
    let names = ["node-a", "node-b", "node-c"];
    let mut nodes: Vec<(String, TcpStream, u64)> = names
        .iter()
        .map(|n| {
            let (s, e) = fake(&cp, n, &[]);
            (n.to_string(), s, e)
        })
        .collect();
    let token = cp.tenant("acme");
    for i in 0..3 {
        let r = cp
            .api(&token)
            .post("/v1/tasks", &task_with_model(&format!("r{i}"), "llama:v1"));
        assert_eq!(r.status, 201, "{:?}", r.body);
    }
    // Each node is started with the model mount; one of them is warmed from the origin.
    let mut origin = None;
    let ok = wait_until(Duration::from_secs(20), || {
        for (name, s, _) in nodes.iter_mut() {
            for m in received(s, Duration::from_millis(100)) {
                if m["type"] == "start" {
                    assert_eq!(m["model"]["sha256"], SHA, "{m}");
                }
                if m["type"] == "warm" {
                    assert_eq!(m["source"]["kind"], "origin", "{m}");
                    assert!(origin.is_none(), "a second origin warm: {m}");
                    origin = Some((name.clone(), m));
                }
            }
        }
        origin.is_some()
    });
    assert!(ok, "no node was told to warm from the origin");
    let (first, warm) = origin.unwrap_or_default();
    let view = version_view(&cp, "v1");
    assert_eq!(view["origin_pulls_now"], 1, "{view:#}");
    assert_eq!(view["state"], "active");
    let waiting: Vec<&str> = names.iter().copied().filter(|n| *n != first).collect();
    for n in &waiting {
        assert_eq!(copy_of(&view, n)["copy"], "waiting", "{view:#}");
    }

    // The origin node verifies its copy.
    let (_, s, epoch) = nodes.iter_mut().find(|(n, _, _)| *n == first).unwrap();
    fake_node::answer_warm(s, *epoch, &warm).unwrap();
    let mut grants = Vec::new();
    let mut peer_warms = Vec::new();
    let ok = wait_until(Duration::from_secs(20), || {
        for (name, s, _) in nodes.iter_mut() {
            let msgs = received(s, Duration::from_millis(100));
            for g in of_type(&msgs, "peer_grant") {
                assert_eq!(*name, first, "a grant to a node that holds nothing: {g}");
                grants.push(g.clone());
            }
            for w in of_type(&msgs, "warm") {
                peer_warms.push((name.clone(), w.clone()));
            }
        }
        peer_warms.len() >= 2
    });
    assert!(
        ok,
        "the waiting nodes were not pointed at the peer: {peer_warms:?}"
    );
    assert_eq!(peer_warms.len(), 2, "{peer_warms:?}");
    for (receiver, w) in &peer_warms {
        assert_eq!(w["source"]["kind"], "peer", "exactly one origin read: {w}");
        assert_eq!(w["source"]["node"], first.as_str());
        let token = &w["source"]["token"];
        let grant = grants
            .iter()
            .find(|g| g["token"] == *token)
            .unwrap_or_else(|| panic!("no grant to {first} for {receiver}'s token: {grants:?}"));
        assert_eq!(grant["receiver"], receiver.as_str());
        assert_eq!(grant["sha256"], SHA);
        assert!(grant["expires_at_ms"].as_u64().unwrap_or(0) > 0);
    }
    assert_eq!(grants.len(), 2, "{grants:?}");
    for (receiver, w) in &peer_warms {
        let (_, s, epoch) = nodes.iter_mut().find(|(n, _, _)| n == receiver).unwrap();
        fake_node::answer_warm(s, *epoch, w).unwrap();
    }
    let mut view = Value::Null;
    let ok = wait_until(Duration::from_secs(20), || {
        view = version_view(&cp, "v1");
        names
            .iter()
            .all(|n| copy_of(&view, n)["copy"] == "verified")
    });
    assert!(ok, "not every copy verified: {view:#}");
    assert_eq!(view["origin_pulls_now"], 0);
    for n in &waiting {
        assert_eq!(copy_of(&view, n)["source"], format!("peer {first}"));
    }
    assert_eq!(view["tasks"].as_array().map(Vec::len), Some(3), "{view:#}");
    // Nothing more was sent from the origin.
    for (_, s, _) in nodes.iter_mut() {
        let late = received(s, Duration::from_millis(200));
        assert!(of_type(&late, "warm").is_empty(), "{late:?}");
    }
    // The node view shows the cache the node reported.
    let nv = cp.operator().get("/v1/nodes/node-a");
    assert_eq!(
        nv.data()["cache"]["capacity_bytes"],
        1u64 << 30,
        "{:?}",
        nv.body
    );
}

/// A task stuck in warming fails once `warming-timeout-ms` passes, naming
/// the stage, the source it was reading and the bytes done.
#[test]
fn a_warming_timeout_names_the_stage_and_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(dir.path(), &[("CALDERA_WARMING_TIMEOUT_MS", "1000")]);
    register(&cp, "v1");
    let (mut s, epoch) = fake(&cp, "node-w", &[]);
    let token = cp.tenant("acme");
    let api = cp.api(&token);
    let r = api.post("/v1/tasks", &task_with_model("slow", "llama:v1"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let start = fake_node::expect(&mut s, "start", Duration::from_secs(20)).unwrap();
    let (alloc, task) = (
        start["allocation_id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        start["task_id"].as_str().unwrap_or_default().to_string(),
    );
    let warming = json!({"kind": "warming", "model": "llama:v1", "source": "origin",
        "bytes_done": 1_200_000, "size_bytes": SIZE, "rate_bytes_per_s": 100_000});
    fake_node::event(&mut s, epoch, &alloc, &task, warming).unwrap();
    let v = api.wait_task("slow", 20, "failed", |v| v["state"] == "failed");
    let failure = v["failure"].as_str().unwrap_or_default();
    assert_eq!(
        failure,
        "warming_timeout: stuck in warming for 1 s reading llama:v1 from origin: 1.2 of 4 MB",
        "{v:#}"
    );
    let states: Vec<&str> = v["history"]
        .as_array()
        .map(|h| h.iter().filter_map(|t| t["state"].as_str()).collect())
        .unwrap_or_default();
    assert!(states.contains(&"warming"), "{states:?}");
}

/// Versions, their state and where their copies are survive a kill -9 of
/// the control plane.
#[test]
fn versions_and_their_state_survive_a_control_plane_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut cp = control_plane(dir.path(), &[]);
    register(&cp, "v1");
    register(&cp, "v2");
    // node-h already holds the weights: its hello makes it a verified holder.
    let (_s, _) = fake(&cp, "node-h", &[SHA]);
    let token = cp.tenant("acme");
    let r = cp
        .api(&token)
        .post("/v1/tasks", &task_with_model("user", "llama:v1"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let mut view = Value::Null;
    let ok = wait_until(Duration::from_secs(20), || {
        view = version_view(&cp, "v1");
        view["state"] == "active" && copy_of(&view, "node-h")["copy"] == "verified"
    });
    assert!(ok, "{view:#}");
    let r = cp
        .operator()
        .post("/v1/models/llama/versions/v2/deprecate", "{}");
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.data()["state"], "deprecated");

    cp.restart();
    let v1 = version_view(&cp, "v1");
    assert_eq!(v1["state"], "active", "{v1:#}");
    assert_eq!(copy_of(&v1, "node-h")["copy"], "verified", "{v1:#}");
    assert_eq!(v1["tasks"], json!(["acme/user"]));
    assert_eq!(v1["weights"]["sha256"], SHA);
    assert_eq!(version_view(&cp, "v2")["state"], "deprecated");
    // The registry still refuses a different body for a recorded version.
    let r = cp.operator().post(
        "/v1/models",
        &registration("v2", "file:///elsewhere.bin", SIZE, SHA),
    );
    assert_eq!(r.status, 409, "{:?}", r.body);
}

/// With `tenants-may-register-models`, a tenant's own version is its own:
/// another tenant neither sees it nor may name it; the operator sees it.
/// A tenant changes only its own versions.
#[test]
fn a_tenants_version_is_visible_to_it_and_the_operator_only() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(
        dir.path(),
        &[("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true")],
    );
    register(&cp, "v1");
    let (a, b) = (cp.api(&cp.tenant("team-a")), cp.api(&cp.tenant("team-b")));
    let mine = json!({"name": "@team-a.mine", "version": "v1",
        "weights": {"uri": "https://93.184.216.34/mine.bin", "size_bytes": SIZE, "sha256": SHA}})
    .to_string();
    let r = a.post("/v1/models", &mine);
    assert_eq!(r.status, 201, "{:?}", r.body);
    assert_eq!(r.data()["owner"], "team-a");
    let names = |api: &caldera_chaos_tests::Api| -> Vec<String> {
        api.get("/v1/models")
            .data()
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["name"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(names(&a), ["@team-a.mine", "llama"]);
    assert_eq!(
        names(&b),
        ["llama"],
        "another tenant's version is not listed"
    );
    assert_eq!(names(&cp.operator()), ["@team-a.mine", "llama"]);
    assert_eq!(b.get("/v1/models/@team-a.mine/versions/v1").status, 404);
    let r = b.post("/v1/tasks", &task_with_model("t", "@team-a.mine:v1"));
    assert_eq!(
        (r.status, r.body["error"].as_str()),
        (422, Some("unknown_model")),
        "{:?}",
        r.body
    );
    assert_eq!(
        a.post("/v1/tasks", &task_with_model("t", "@team-a.mine:v1"))
            .status,
        201
    );
    // Its own it may deprecate; the operator's it may not.
    let r = a.post("/v1/models/@team-a.mine/versions/v1/deprecate", "{}");
    assert_eq!(r.data()["state"], "deprecated", "{:?}", r.body);
    let r = a.post("/v1/models/llama/versions/v1/deprecate", "{}");
    assert_eq!(r.status, 403, "{:?}", r.body);
    // A prewarm names its nodes or a count; a bad body names the field.
    let r = a.post(
        "/v1/models/@team-a.mine/versions/v1/prewarm",
        r#"{"count":0}"#,
    );
    assert_eq!(r.body["field"], "count", "{:?}", r.body);
    let r = a.post(
        "/v1/models/@team-a.mine/versions/v1/prewarm",
        r#"{"nodes":["nowhere"]}"#,
    );
    assert_eq!(r.body["field"], "nodes", "{:?}", r.body);
}

/// A registration of `name:version` at `uri` (the test weights' size and sha).
fn version_at(name: &str, version: &str, uri: &str) -> String {
    json!({"name": name, "version": version,
        "weights": {"uri": uri, "size_bytes": SIZE, "sha256": SHA}})
    .to_string()
}

/// A tenant's origins are what the operator allows: by default https to
/// public hosts only. `file://` (the node's own files), the control plane's
/// own API on loopback, link-local and private addresses in any spelling are
/// refused naming `weights.uri`, before anything is read; the operator's own
/// registrations may use a shared mount. Listing a host opens it to
/// tenants, and every warm command carries the registrant's rules so the
/// node checks the addresses again before it connects.
#[test]
fn a_tenants_origins_are_limited_to_what_the_operator_allows() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(
        dir.path(),
        &[("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true")],
    );
    let a = cp.api(&cp.tenant("team-a"));
    let own_api = format!("http://{}/v1/tenants", cp.addr);
    let refused = [
        "file:///etc/shadow",
        "file:///proc/self/environ",
        own_api.as_str(),
        "http://localhost:1/m",
        "https://127.0.0.1/m",
        "https://127.1/m",
        "https://2130706433/m",
        "https://[::1]/m",
        "https://[::ffff:127.0.0.1]/m",
        "https://0.0.0.0/m",
        "https://169.254.169.254/latest/meta-data",
        "https://10.1.2.3/m",
        "https://user:pw@93.184.216.34/m",
    ];
    for (i, uri) in refused.iter().enumerate() {
        let r = a.post(
            "/v1/models",
            &version_at("@team-a.m", &format!("v{i}"), uri),
        );
        assert_eq!(
            (r.status, r.body["error"].as_str(), r.body["field"].as_str()),
            (422, Some("origin_not_allowed"), Some("weights.uri")),
            "{uri}: {:?}",
            r.body
        );
    }
    assert_eq!(a.get("/v1/models").data(), &json!([]), "nothing registered");
    let r = a.post(
        "/v1/models",
        &version_at("@team-a.m", "public", "https://93.184.216.34/m.bin"),
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
    // The operator's own registrations may read a shared mount.
    register(&cp, "v1");
    drop(cp);

    // Listed by the operator, a loopback store is open to tenants.
    let cp = control_plane(
        &dir.path().join("allowed"),
        &[
            ("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true"),
            ("CALDERA_TENANT_MODEL_ORIGINS", "https://*,http://127.0.0.1"),
        ],
    );
    let a = cp.api(&cp.tenant("team-a"));
    let r = a.post(
        "/v1/models",
        &version_at("@team-a.m", "v1", "http://127.0.0.1:9/m.bin"),
    );
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = a.post(
        "/v1/models",
        &version_at("@team-a.m", "v2", "file:///etc/shadow"),
    );
    assert_eq!(r.status, 422, "only what is listed: {:?}", r.body);
    let (mut n1, _) = fake(&cp, "n1", &[]);
    let r = a.post(
        "/v1/models/@team-a.m/versions/v1/prewarm",
        r#"{"nodes":["n1"]}"#,
    );
    assert_eq!(r.status, 202, "{:?}", r.body);
    let msgs = received(&mut n1, Duration::from_secs(2));
    let warm = of_type(&msgs, "warm");
    assert_eq!(warm.len(), 1, "{msgs:?}");
    assert_eq!(
        warm[0]["origin"]["rules"]["allow"],
        json!(["https://*", "http://127.0.0.1"]),
        "the node is told the tenant's rules: {:?}",
        warm[0]
    );
}

/// Names are scoped to their owner. Tenant team-b can neither register in
/// team-a's namespace nor learn what is there: the same 403 whether team-a
/// holds the name or not, and the same 404 on read as for an absent one;
/// its own namespace takes the same body without a collision. No tenant can
/// take a shared name before the operator.
#[test]
fn model_names_belong_to_their_namespace_and_reveal_nothing_of_others() {
    let dir = tempfile::tempdir().unwrap();
    let cp = control_plane(
        dir.path(),
        &[("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true")],
    );
    let (a, b) = (cp.api(&cp.tenant("team-a")), cp.api(&cp.tenant("team-b")));
    let uri = "https://93.184.216.34/m.bin";
    let r = a.post("/v1/models", &version_at("@team-a.secret", "v1", uri));
    assert_eq!(r.status, 201, "{:?}", r.body);

    let held = b.post("/v1/models", &version_at("@team-a.secret", "v1", uri));
    let absent = b.post("/v1/models", &version_at("@team-a.absent", "v1", uri));
    assert_eq!(
        (
            held.status,
            held.body["error"].as_str(),
            held.body["field"].as_str()
        ),
        (403, Some("model_name_reserved"), Some("name")),
        "{:?}",
        held.body
    );
    let answer = |v: &Value| (v["code"].clone(), v["field"].clone(), v["msg"].clone());
    assert_eq!(
        answer(&held.body),
        answer(&absent.body),
        "a held name and an absent one answer alike"
    );
    let held = b.get("/v1/models/@team-a.secret/versions/v1");
    let absent = b.get("/v1/models/@team-a.absent/versions/v1");
    assert_eq!((held.status, absent.status), (404, 404));
    assert_eq!(held.body["code"], absent.body["code"]);
    let r = b.post("/v1/models", &version_at("@team-b.secret", "v1", uri));
    assert_eq!(r.status, 201, "its own namespace: {:?}", r.body);

    // A shared name is the operator's, even before it registers it.
    let r = a.post("/v1/models", &version_at("llama", "v9", uri));
    assert_eq!(
        (r.status, r.body["error"].as_str()),
        (403, Some("model_name_reserved")),
        "{:?}",
        r.body
    );
    let r = cp
        .operator()
        .post("/v1/models", &version_at("llama", "v9", uri));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let r = cp
        .operator()
        .post("/v1/models", &version_at("@team-a.x", "v1", uri));
    assert_eq!(
        r.status, 403,
        "a tenant's namespace is its own: {:?}",
        r.body
    );
}

/// A store from before names were scoped: team-a's version sits under the
/// bare `llama:v9`, named so by its task. The boot moves it to
/// `@team-a.llama:v9` with its task, keeps the node's verified copy (the
/// cache is by digest: nothing is fetched again), tells team-a in a
/// `model_renamed` event (and no one else), and frees `llama:v9` for the
/// operator. A second boot changes nothing.
#[test]
fn a_version_a_tenant_named_before_namespaces_moves_into_its_own_and_frees_the_name() {
    use caldera_storage::{Store, StoreConfig};
    let dir = tempfile::tempdir().unwrap();
    let mut cp = control_plane(
        dir.path(),
        &[("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true")],
    );
    let (a, b) = (cp.tenant("team-a"), cp.tenant("team-b"));
    let uri = "https://93.184.216.34/m.bin";
    let r = cp
        .api(&a)
        .post("/v1/models", &version_at("@team-a.llama", "v9", uri));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let (stream, _) = fake(&cp, "node-h", &[SHA]);
    let r = cp
        .api(&a)
        .post("/v1/tasks", &task_with_model("user", "@team-a.llama:v9"));
    assert_eq!(r.status, 201, "{:?}", r.body);
    let path = "/v1/models/@team-a.llama/versions/v9";
    let used = |cp: &ControlPlane| {
        let v = cp.operator().get(path).data().clone();
        v["state"] == "active" && copy_of(&v, "node-h")["copy"] == "verified"
    };
    assert!(wait_until(Duration::from_secs(20), || used(&cp)));
    cp.kill9();
    drop(stream);
    {
        // As the code before namespaces left it: the bare name everywhere.
        let store = Store::open(&cp.data_dir.join("sled"), &StoreConfig::default()).unwrap();
        let mut b = store.batch();
        let mut v = store.model_version("@team-a.llama:v9").unwrap().unwrap();
        b.remove_model_version("@team-a.llama:v9");
        v.spec.name = "llama".into();
        b.put_model_version(&v);
        let mut t = store.task("team-a/user").unwrap().unwrap();
        t.spec.model = Some("llama:v9".into());
        t.serving_model = Some("llama:v9".into());
        b.put_task(&t);
        for bill in store.open_billings() {
            let mut bill = bill.unwrap();
            bill.model = bill.model.map(|_| "llama:v9".to_string());
            b.put_open_billing(&bill);
        }
        store.commit(b).unwrap();
        store.flush().unwrap();
    }
    cp.restart();

    let moved = cp.api(&a).get(path);
    assert_eq!(moved.status, 200, "{:?}", moved.body);
    let view = cp.operator().get(path).data().clone();
    assert_eq!(view["tasks"], json!(["team-a/user"]), "{view:#}");
    assert_eq!(view["owner"], "team-a", "{view:#}");
    assert_eq!(
        copy_of(&view, "node-h")["copy"],
        "verified",
        "the node's copy is kept: {view:#}"
    );
    assert_eq!(cp.api(&a).task("user")["spec"]["model"], "@team-a.llama:v9");
    let renamed = |cp: &ControlPlane, token: &str| {
        let r = cp.api(token).get("/v1/events?kind=model_renamed");
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.data()["events"].as_array().cloned().unwrap_or_default()
    };
    let events = renamed(&cp, &a);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(
        events[0]["detail"],
        json!({"old": "llama:v9", "new": "@team-a.llama:v9"}),
        "{events:#?}"
    );
    assert!(
        renamed(&cp, &b).is_empty(),
        "team-b hears nothing of team-a's"
    );

    let r = cp
        .operator()
        .post("/v1/models", &version_at("llama", "v9", uri));
    assert_eq!(r.status, 201, "the freed shared name: {:?}", r.body);

    // Once: a second boot renames nothing more.
    cp.restart();
    assert_eq!(renamed(&cp, &a).len(), 1);
    assert_eq!(
        cp.operator().get("/v1/models/llama/versions/v9").data()["owner"],
        Value::Null
    );
    assert_eq!(cp.api(&a).task("user")["spec"]["model"], "@team-a.llama:v9");
}
