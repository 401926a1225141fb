//! Containers with real podman, a real registry on 127.0.0.1 and the real
//! binary: images pulled, run and isolated on their slice, and the images a
//! node holds (reported, pre-pulled, evicted). Each test needs the container
//! host that `scripts/container-host` sets up and FAILS without it.
use caldera_chaos_tests::container_host;
use caldera_chaos_tests::images::{push_image, NodeStore, TestImage};
use caldera_chaos_tests::{cluster, wait_until, Agent, AgentSpec, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

// ---- images on the nodes: reports, pre-pulls, eviction ----

/// A unique suffix for this test run's image names.
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{what}-{}-{nanos}", std::process::id())
}

/// A control plane and agents `names`, each with a container store of its
/// own (so an image on one is not on the others), reading it every 300 ms,
/// with `flags` added.
fn image_nodes(
    dir: &Path,
    names: &[&str],
    flags: &[(&str, &str)],
) -> (ControlPlane, Vec<Agent>, Vec<NodeStore>) {
    container_host::require();
    let stores: Vec<NodeStore> = names.iter().map(|n| NodeStore::new(dir, n)).collect();
    let specs: Vec<AgentSpec> = names
        .iter()
        .zip(&stores)
        .map(|(n, s)| {
            let (k, v) = s.env();
            let mut spec = AgentSpec::new(n, "1xA100-80GB")
                .flag("image-refresh-ms", "300")
                .env(k, &v);
            for (f, v) in flags {
                spec = spec.flag(f, v);
            }
            spec
        })
        .collect();
    let (cp, agents) = cluster(Path::new(BIN), dir, &[], &specs);
    (cp, agents, stores)
}

/// The node's image report as the operator reads it.
fn images_of(op: &Api, node: &str) -> Value {
    op.get(&format!("/v1/nodes/{node}")).data()["images"].clone()
}

/// Whether the node's report lists `image`.
fn reports(op: &Api, node: &str, image: &TestImage) -> bool {
    images_of(op, node)["images"]
        .as_array()
        .is_some_and(|l| l.iter().any(|e| names(e).contains(&image.name)))
}

fn names(entry: &Value) -> Vec<String> {
    entry["names"]
        .as_array()
        .map(|n| {
            n.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn prepull(op: &Api, image: &TestImage, nodes: &[&str]) -> Value {
    let body = serde_json::json!({"image": image.name, "nodes": nodes}).to_string();
    let r = op.post("/v1/images/prepull", &body);
    assert_eq!(r.status, 202, "{:#}", r.body);
    r.data().clone()
}

#[test]
fn a_prepull_puts_the_image_on_the_chosen_node_and_its_report_and_caldera_nodes_show_it() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents, stores) = image_nodes(dir.path(), &["node-0", "node-1"], &[]);
    let image = push_image(dir.path(), &unique("prepull"), 1 << 20, 1).unwrap();
    let op = cp.operator();

    let answer = prepull(&op, &image, &["node-1"]);
    assert_eq!(
        answer["pulling"],
        serde_json::json!(["node-1"]),
        "{answer:#}"
    );
    assert!(
        wait_until(Duration::from_secs(30), || reports(&op, "node-1", &image)),
        "node-1 never reported {}: {:#}",
        image.name,
        images_of(&op, "node-1")
    );
    // On node-1's store, not node-0's, and node-0's report says so.
    assert!(stores[1].has(&image.name));
    assert!(!stores[0].has(&image.name));
    assert!(
        !reports(&op, "node-0", &image),
        "{:#}",
        images_of(&op, "node-0")
    );
    let entry = images_of(&op, "node-1")["images"]
        .as_array()
        .and_then(|l| l.iter().find(|e| names(e).contains(&image.name)).cloned())
        .unwrap();
    assert!(
        entry["size_bytes"].as_u64().unwrap() >= image.payload_bytes,
        "{entry:#}"
    );
    assert!(
        entry["digest"].as_str().unwrap().starts_with("sha256:"),
        "{entry:#}"
    );
    assert_eq!(entry["managed"], true, "{entry:#}");
    assert!(entry["last_used_ms"].as_u64().unwrap() > 0, "{entry:#}");
    // The pre-pull's end is an event.
    assert!(
        wait_until(Duration::from_secs(10), || {
            let events = op
                .get("/v1/events?kind=image_pull&limit=50")
                .body
                .to_string();
            events.contains(&format!("pre-pull of {} on node-1: done", image.name))
        }),
        "{:#}",
        op.get("/v1/events?kind=image_pull&limit=50").body
    );

    // `caldera nodes` shows it: a count in the list, the name in the detail.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .args([
                "--server",
                &cp.url(),
                "--token",
                caldera_chaos_tests::OPERATOR_TOKEN,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let list = cli(&["nodes"]);
    assert!(list.contains("IMAGES"), "{list}");
    let detail = cli(&["nodes", "node-1"]);
    assert!(detail.contains(&image.name), "{detail}");
    assert!(!cli(&["nodes", "node-0"]).contains(&image.name));
    // A tenant sees no image names.
    let tenant = cp.api(&cp.tenant("team-a"));
    assert!(tenant.get("/v1/nodes/node-1").data()["images"].is_null());
    assert!(tenant.get("/v1/nodes").data()["nodes"][1]["images"].is_null());

    // Bad requests name their field.
    let bad = |body: &str, field: &str| {
        let r = op.post("/v1/images/prepull", body);
        assert_eq!(r.status, 400, "{body}: {:#}", r.body);
        assert_eq!(r.body["field"], field, "{body}: {:#}", r.body);
    };
    bad(
        &format!(r#"{{"image":"{}","nodes":["nope"]}}"#, image.name),
        "nodes",
    );
    bad(r#"{"image":"Bad Image!","count":1}"#, "image");
    bad(&format!(r#"{{"image":"{}"}}"#, image.name), "nodes");
    // A tenant may not pre-pull.
    let r = tenant.post(
        "/v1/images/prepull",
        &format!(r#"{{"image":"{}","count":1}}"#, image.name),
    );
    assert_eq!(r.status, 403, "{:#}", r.body);
}

#[test]
fn an_image_in_use_is_not_evicted_while_another_is() {
    let dir = tempfile::tempdir().unwrap();
    // Room for two images of 1 MiB, not three.
    let (cp, _agents, stores) =
        image_nodes(dir.path(), &["node-0"], &[("image-cache-gb", "0.0025")]);
    let op = cp.operator();
    let tag = unique("evict");
    let [a, b, c] =
        [1, 2, 3].map(|i| push_image(dir.path(), &format!("{tag}-{i}"), 1 << 20, 100 + i).unwrap());
    // A is pulled first (the least recently used) and a container is made
    // from it; B after it; then C goes over the cap.
    prepull(&op, &a, &["node-0"]);
    assert!(wait_until(Duration::from_secs(30), || reports(
        &op, "node-0", &a
    )));
    let container = format!("caldera-test-{tag}");
    stores[0]
        .podman(&["create", "--name", &container, &a.name, "/payload"])
        .unwrap();
    prepull(&op, &b, &["node-0"]);
    assert!(wait_until(Duration::from_secs(30), || reports(
        &op, "node-0", &b
    )));
    prepull(&op, &c, &["node-0"]);
    // B goes, though A is older: A is in use.
    let evicted = wait_until(Duration::from_secs(30), || {
        reports(&op, "node-0", &c) && !reports(&op, "node-0", &b)
    });
    let report = images_of(&op, "node-0");
    assert!(evicted, "{report:#}");
    assert!(reports(&op, "node-0", &a), "{report:#}");
    assert!(!stores[0].has(&b.name));
    assert!(stores[0].has(&a.name) && stores[0].has(&c.name));
    assert_eq!(report["evictions"], 1, "{report:#}");
    assert!(
        report["managed_bytes"].as_u64().unwrap() <= report["capacity_bytes"].as_u64().unwrap(),
        "{report:#}"
    );
    let a_entry = report["images"]
        .as_array()
        .and_then(|l| l.iter().find(|e| names(e).contains(&a.name)).cloned())
        .unwrap();
    assert_eq!(a_entry["in_use"], 1, "{a_entry:#}");
    stores[0].podman(&["rm", "-f", &container]).unwrap();
}

// ---- Preparing is the pull: progress, failures with their code, the digest run ----

use caldera_chaos_tests::registry_standin::{Answer, StandinRegistry};

/// Image names under this prefix pull from a test's stand-in registry (the
/// host's registries.conf.d maps `registry.internal` to the local registry
/// whatever the agent's registries.conf says).
const STANDIN_PREFIX: &str = "caldera-test.internal";

/// A control plane and one agent `node-0` with a container store of its
/// own (an image there was pulled by this test), with `env` for the agent.
fn pull_node(dir: &Path, env: &[(&str, String)]) -> (ControlPlane, Vec<Agent>, NodeStore) {
    container_host::require();
    let store = NodeStore::new(dir, "node-0");
    let (k, v) = store.env();
    let mut spec = AgentSpec::new("node-0", "1xA100-80GB").env(k, &v);
    for (k, v) in env {
        spec = spec.env(k, v);
    }
    let (cp, agents) = cluster(Path::new(BIN), dir, &[], &[spec]);
    (cp, agents, store)
}

/// A CPU task in a container of `image`, with `extra` fields.
fn image_task(id: &str, image: &str, command: &str, extra: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"command":{command},"image":"{image}"{extra}}}"#
    )
}

/// The messages of the task's events of `kind`, oldest first.
fn events_of(api: &Api, task: &str, kind: &str) -> Vec<String> {
    api.get(&format!("/v1/events?task={task}&limit=500")).data()["events"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter(|e| e["kind"] == kind)
                .filter_map(|e| e["message"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn ended(v: &Value) -> bool {
    matches!(
        v["state"].as_str(),
        Some("finished" | "failed" | "cancelled" | "released")
    )
}

#[test]
fn a_container_tasks_pull_shows_its_progress_and_the_digest_it_ran_is_in_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents, store) = pull_node(dir.path(), &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let task = image_task(
        "pulled",
        container_host::SEED_IMAGE,
        r#"["cat","/etc/os-release"]"#,
        r#","pull_policy":"always""#,
    );
    assert_eq!(api.post("/v1/tasks", &task).status, 201);
    let done = api.wait_task("pulled", 90, "an end", ended);
    assert_eq!(done["state"], "finished", "{done:#}");

    // The pull as it went: events while preparing, the last one complete.
    let seed = container_host::SEED_IMAGE;
    let progress = events_of(&api, "pulled", "pull_progress");
    assert!(
        progress.iter().any(|m| m
            == &format!(
                "pulling {seed}: no layer started yet (still reaching the registry), 0 B done"
            )),
        "{progress:#?}"
    );
    assert!(
        progress
            .iter()
            .any(|m| m.starts_with(&format!("pulling {seed}: 1 of 1 layers, "))),
        "{progress:#?}"
    );
    assert_eq!(done["pull"]["layers_done"], 1, "{done:#}");
    assert_eq!(done["pull"]["layers_total"], 1, "{done:#}");

    // The digest run: the one the node's store holds, on the allocation and
    // in the history's running entry.
    let held = store
        .podman(&["image", "inspect", "--format", "{{.Digest}}", seed])
        .unwrap();
    let held = held.trim();
    assert!(held.starts_with("sha256:"), "{held}");
    assert_eq!(done["allocation"]["image_digest"], held, "{done:#}");
    let running = done["history"]
        .as_array()
        .and_then(|h| h.iter().find(|t| t["state"] == "running"))
        .and_then(|t| t["reason"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(running.ends_with(&format!(", image {held}")), "{running}");
    let transitions = events_of(&api, "pulled", "task_transition");
    assert!(
        transitions.iter().any(|m| m.contains(held)),
        "{transitions:#?}"
    );
}

#[test]
fn a_missing_image_fails_in_seconds_with_its_code_and_the_registry_is_asked_once() {
    let dir = tempfile::tempdir().unwrap();
    let registry = StandinRegistry::start(Answer::NotFound).unwrap();
    let conf = registry
        .registries_conf(dir.path(), STANDIN_PREFIX)
        .unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", conf.display().to_string())];
    let (cp, _agents, _store) = pull_node(dir.path(), &env);
    let api = cp.api(&cp.tenant("team-a"));
    let image = format!("{STANDIN_PREFIX}/nope:1");
    let began = std::time::Instant::now();
    let task = image_task("nope", &image, r#"["true"]"#, "");
    assert_eq!(api.post("/v1/tasks", &task).status, 201);
    let done = api.wait_task("nope", 60, "an end", ended);
    let took = began.elapsed();
    assert_eq!(done["state"], "failed", "{done:#}");
    assert_eq!(done["failure_code"], 10220, "{done:#}");
    let failure = done["failure"].as_str().unwrap_or_default();
    assert!(
        failure.starts_with(&format!("image {image} not found in its registry")),
        "{failure}"
    );
    // Failed at once: long before the prepare timeout (120 s by default),
    // and the registry was asked for the manifest once, not in a loop.
    assert!(took < Duration::from_secs(30), "{took:?}");
    let asked: Vec<String> = registry
        .requests()
        .into_iter()
        .filter(|r| r.contains("/manifests/"))
        .collect();
    assert_eq!(
        asked,
        ["GET /v2/nope/manifests/1"],
        "{:?}",
        registry.requests()
    );
}

#[test]
fn a_registry_that_never_answers_fails_the_task_at_its_prepare_timeout_saying_where_it_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let registry = StandinRegistry::start(Answer::Silent).unwrap();
    let conf = registry
        .registries_conf(dir.path(), STANDIN_PREFIX)
        .unwrap();
    let env = [("CONTAINERS_REGISTRIES_CONF", conf.display().to_string())];
    let (cp, _agents, _store) = pull_node(dir.path(), &env);
    let api = cp.api(&cp.tenant("team-a"));
    let image = format!("{STANDIN_PREFIX}/stuck:1");
    let began = std::time::Instant::now();
    let task = image_task(
        "stuck",
        &image,
        r#"["true"]"#,
        r#","prepare_timeout":"00:00:05""#,
    );
    assert_eq!(api.post("/v1/tasks", &task).status, 201);
    let pulling = api.wait_task("stuck", 30, "its pull shown", |v| v["pull"].is_object());
    assert_eq!(pulling["state"], "preparing", "{pulling:#}");
    let done = api.wait_task("stuck", 60, "an end", ended);
    let took = began.elapsed();
    assert_eq!(done["state"], "failed", "{done:#}");
    assert_eq!(done["failure_code"], 10224, "{done:#}");
    let failure = done["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("prepare timeout"), "{failure}");
    assert!(
        failure.contains(&format!("{image}"))
            && failure.contains("no layer started yet (still reaching the registry), 0 B done"),
        "{failure}"
    );
    assert!(took >= Duration::from_secs(5), "{took:?}");
    assert!(registry.connections() >= 1, "the registry was reached");
}
