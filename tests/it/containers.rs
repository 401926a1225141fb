//! Containers with real podman, a real registry on 127.0.0.1 and the real
//! binary: images pulled, run and isolated on their slice, and the images a
//! node holds (reported, pre-pulled, evicted). Each test needs the container
//! host that `scripts/container-host` sets up and FAILS without it.
use caldera_chaos_tests::container_host;
use caldera_chaos_tests::images::{push_image, NodeStore, RegistryMeter, TestImage};
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
    image_cluster(dir, names, flags, &[], |_| Vec::new())
}

/// [`image_nodes`] with the control plane's `cp_env`, and `env(i)` added
/// to agent `i`'s environment; each agent is labelled `node=<name>`.
fn image_cluster(
    dir: &Path,
    names: &[&str],
    flags: &[(&str, &str)],
    cp_env: &[(&str, &str)],
    env: impl Fn(usize) -> Vec<(String, String)>,
) -> (ControlPlane, Vec<Agent>, Vec<NodeStore>) {
    container_host::require();
    let stores: Vec<NodeStore> = names.iter().map(|n| NodeStore::new(dir, n)).collect();
    let specs: Vec<AgentSpec> = names
        .iter()
        .zip(&stores)
        .enumerate()
        .map(|(i, (n, s))| {
            let (k, v) = s.env();
            let mut spec = AgentSpec::new(n, "1xA100-80GB")
                .flag("image-refresh-ms", "300")
                .flag("label", &format!("node={n}"))
                .env(k, &v);
            for (f, v) in flags {
                spec = spec.flag(f, v);
            }
            for (k, v) in env(i) {
                spec = spec.env(&k, &v);
            }
            spec
        })
        .collect();
    let (cp, agents) = cluster(Path::new(BIN), dir, cp_env, &specs);
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

/// A container task of `image` (the seed's, under some name) on `node`,
/// printing its OS and sleeping `secs`.
fn seed_task_on(id: &str, image: &str, node: &str, secs: u32) -> Value {
    serde_json::json!({
        "task_id": id, "task_type": "training",
        "resources": {"cpu": {"cores": 1}, "memory": {"size_gb": 1}},
        "image": image,
        "command": ["sh", "-c", format!("cat /etc/os-release; sleep {secs}")],
        "labels": {"node": node},
    })
}

/// The report's entry for `name`, if listed.
fn entry_of(report: &Value, name: &str) -> Option<Value> {
    report["images"]
        .as_array()?
        .iter()
        .find(|e| names(e).iter().any(|n| n == name))
        .cloned()
}

#[test]
fn a_node_reports_the_image_a_start_pulled_in_use_while_its_container_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents, stores) = image_nodes(dir.path(), &["node-0"], &[]);
    assert!(!stores[0].has(container_host::SEED_IMAGE));
    let api = cp.api(&cp.tenant("team-a"));
    let r = api.post(
        "/v1/tasks",
        &seed_task_on("pulls", container_host::SEED_IMAGE, "node-0", 30).to_string(),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    api.wait_task("pulls", 60, "running", |v| v["state"] == "running");
    let op = cp.operator();
    let mut report = Value::Null;
    let seen = wait_until(Duration::from_secs(15), || {
        report = images_of(&op, "node-0");
        entry_of(&report, container_host::SEED_IMAGE).is_some_and(|e| e["in_use"] == 1)
    });
    assert!(seen, "{report:#}");
    let e = entry_of(&report, container_host::SEED_IMAGE).unwrap();
    assert_eq!(e["managed"], true, "{e:#}");
    assert!(e["last_used_ms"].as_u64().unwrap() > 0, "{e:#}");
    assert!(e["size_bytes"].as_u64().unwrap() > 0, "{e:#}");
    assert!(stores[0].has(container_host::SEED_IMAGE));
    // Released: its container goes, the image stays, no longer in use.
    let r = api.post("/v1/tasks/pulls/release", "{}");
    assert!(r.status < 300, "{:#}", r.body);
    let idle = wait_until(Duration::from_secs(30), || {
        report = images_of(&op, "node-0");
        entry_of(&report, container_host::SEED_IMAGE).is_some_and(|e| e["in_use"] == 0)
    });
    assert!(idle, "{report:#}");
}

#[test]
fn starts_of_one_image_on_three_nodes_pull_one_at_a_time_under_max_image_pulls_1() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["node-0", "node-1", "node-2"];
    // The seed's image under a registry name of the meter's: each agent
    // pulls it through its own port of the meter.
    let meter = RegistryMeter::start(names.len()).unwrap();
    let confs: Vec<_> = (0..names.len())
        .map(|i| meter.registries_conf(dir.path(), i, "meter.internal"))
        .collect();
    let image = container_host::SEED_IMAGE.replace("registry.internal", "meter.internal");
    let (cp, _agents, stores) = image_cluster(
        dir.path(),
        &names,
        &[],
        &[("CALDERA_MAX_IMAGE_PULLS", "1")],
        |i| {
            vec![(
                "CONTAINERS_REGISTRIES_CONF".to_string(),
                confs[i].display().to_string(),
            )]
        },
    );
    let api = cp.api(&cp.tenant("team-a"));
    for (i, node) in names.iter().enumerate() {
        let r = api.post(
            "/v1/tasks",
            &seed_task_on(&format!("s{i}"), &image, node, 20).to_string(),
        );
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    for i in 0..names.len() {
        api.wait_task(&format!("s{i}"), 90, "running", |v| v["state"] == "running");
    }
    // Every node pulled (each has a store of its own) ...
    for s in &stores {
        assert!(s.has(&image));
    }
    assert!(meter.served() > 0);
    // ... one at a time at the registry, and the control plane said why
    // the others waited.
    assert_eq!(meter.max_pulling(), 1, "served {} bytes", meter.served());
    let events = cp
        .operator()
        .get("/v1/events?kind=image_pull&limit=100")
        .body
        .to_string();
    assert!(events.contains("waits to pull"), "{events}");
    assert!(
        events.contains("(scheduling.max-image-pulls 1)"),
        "{events}"
    );
}

#[test]
fn a_container_task_goes_to_the_node_that_holds_its_image_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agents, stores) = image_nodes(dir.path(), &["node-0", "node-1", "node-2"], &[]);
    let op = cp.operator();
    let seed = TestImage {
        name: container_host::SEED_IMAGE.to_string(),
        payload_bytes: 0,
    };
    prepull(&op, &seed, &["node-2"]);
    assert!(wait_until(Duration::from_secs(30), || reports(
        &op, "node-2", &seed
    )));
    // Three equal nodes, no label: only the image tells them apart.
    let api = cp.api(&cp.tenant("team-a"));
    let mut task = seed_task_on("near", container_host::SEED_IMAGE, "", 30);
    task.as_object_mut().unwrap().remove("labels");
    let r = api.post("/v1/tasks", &task.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    let view = api.wait_task("near", 60, "running", |v| v["state"] == "running");
    assert_eq!(view["allocation"]["node"], "node-2", "{view:#}");
    let events = op
        .get("/v1/events?task=team-a/near&limit=50")
        .body
        .to_string();
    assert!(events.contains("image present"), "{events}");
    // It pulled nothing: the other nodes still lack the image.
    assert!(!stores[0].has(container_host::SEED_IMAGE));
    assert!(!stores[1].has(container_host::SEED_IMAGE));
}

/// The pull stagger's benchmark (figures in docs/benchmarks/containers.md): 8 agents, each
/// with a container store of its own and its own port of the registry
/// meter, start the same image of about 1 GiB (`CALDERA_BENCH_IMAGE_MB`,
/// default 1024) at once under `max-image-pulls` (`CALDERA_BENCH_MAX_IMAGE_PULLS`,
/// default 2). Prints the most nodes pulling at once at the registry, the
/// bytes it served and when each task ran.
#[test]
#[ignore = "benchmark: 8 agents pull a 1 GiB image (minutes, about 10 GB of disk); cargo test --test it containers:: -- --ignored bench_"]
fn bench_eight_nodes_start_one_image_under_the_pull_stagger() {
    let env_or = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let size = env_or("CALDERA_BENCH_IMAGE_MB", 1024) << 20;
    let limit = env_or("CALDERA_BENCH_MAX_IMAGE_PULLS", 2).to_string();
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..8).map(|i| format!("node-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let meter = RegistryMeter::start(names.len()).unwrap();
    let confs: Vec<_> = (0..names.len())
        .map(|i| meter.registries_conf(dir.path(), i, "meter.internal"))
        .collect();
    let (cp, _agents, _stores) = image_cluster(
        dir.path(),
        &names,
        &[],
        &[("CALDERA_MAX_IMAGE_PULLS", limit.as_str())],
        |i| {
            vec![(
                "CONTAINERS_REGISTRIES_CONF".to_string(),
                confs[i].display().to_string(),
            )]
        },
    );
    let built = std::time::Instant::now();
    let pushed = container_host::registry();
    let image =
        caldera_chaos_tests::images::push_runnable_image(dir.path(), &unique("bench"), size, 7)
            .unwrap();
    let image = image.name.replace(&pushed, "meter.internal");
    println!(
        "image {image} of {} MiB built and pushed in {:?}",
        size >> 20,
        built.elapsed()
    );
    let api = cp.api(&cp.tenant("team-a"));
    let start = std::time::Instant::now();
    for (i, node) in names.iter().enumerate() {
        let mut task = seed_task_on(&format!("b{i}"), &image, node, 600);
        task["prepare_timeout"] = "00:20:00".into();
        let r = api.post("/v1/tasks", &task.to_string());
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    let mut ran = vec![None; names.len()];
    let all = wait_until(Duration::from_secs(1200), || {
        for (i, t) in ran.iter_mut().enumerate() {
            if t.is_none() && api.get(&format!("/v1/tasks/b{i}")).data()["state"] == "running" {
                *t = Some(start.elapsed());
            }
        }
        ran.iter().all(Option::is_some)
    });
    assert!(all, "not all running: {ran:?}");
    let served = meter.served();
    println!(
        "max-image-pulls {limit}: most nodes pulling at once at the registry {}, \
         bytes served {served} ({:.2} x the image's {} MiB payload), all 8 running after {:?}",
        meter.max_pulling(),
        served as f64 / size as f64,
        size >> 20,
        start.elapsed()
    );
    for (i, t) in ran.iter().enumerate() {
        println!("  b{i} running after {:?}", t.unwrap_or_default());
    }
    assert!(meter.max_pulling() <= limit.parse::<usize>().unwrap());
    assert!(served >= 8 * size, "served {served}");
}

// ---- the control plane's container rules: placement, require-images,
// ---- data volumes, registry credentials (fake agents: no podman needed) ----

use caldera_chaos_tests::{fake_node, JOIN_TOKEN};
use std::net::TcpStream;

const SEED_IMAGE: &str = "registry.internal/deeplearning/pytorch:2.1-cu12.1";

/// A CPU task named `id` with `extra` fields (`,"image":"..."`).
fn cpu_task(id: &str, extra: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"command":["sleep","60"]{extra}}}"#
    )
}

/// What a podman node's inventory says of its runtimes.
fn podman_up() -> Value {
    serde_json::json!([
        {"kind": "container", "engine": "podman", "version": "4.3.1", "up": true},
        {"kind": "process", "engine": "caldera-shim", "up": true}
    ])
}

/// What a node without podman says: the container runtime down, and why.
fn podman_missing() -> Value {
    serde_json::json!([
        {"kind": "container", "engine": "podman", "up": false, "detail": "podman is not installed"},
        {"kind": "process", "engine": "caldera-shim", "up": true}
    ])
}

/// A control plane whose fake nodes need not heartbeat, with `env` added.
fn rules_cp(dir: &Path, env: &[(&str, &str)]) -> ControlPlane {
    let mut all = vec![("CALDERA_NODE_TIMEOUT_MS", "60000")];
    all.extend_from_slice(env);
    ControlPlane::start(Path::new(BIN), &dir.join("cp"), &all)
}

fn fake(cp: &ControlPlane, name: &str, runtimes: Value) -> (TcpStream, u64) {
    fake_node::join_with_runtimes(&cp.addr, JOIN_TOKEN, name, 1, runtimes).unwrap()
}

/// A task with an image waits, saying why, where no node runs containers;
/// the same image with `"runtime": "process"` runs at once; a node whose
/// podman is up then takes the waiting one. Node views and /metrics say
/// which runtime each node has.
#[test]
fn a_container_task_waits_for_a_node_with_a_container_runtime_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cp = rules_cp(dir.path(), &[]);
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    let (mut plain, _) = fake(&cp, "plain-1", podman_missing());
    let (mut old, _) = fake(&cp, "old-agent", serde_json::json!([]));

    let seed = cpu_task("in-image", &format!(r#","image":"{SEED_IMAGE}""#));
    assert_eq!(api.post("/v1/tasks", &seed).status, 201);
    let waiting = api.wait_task("in-image", 20, "a pending reason", |v| {
        v["pending_reason"].as_str().is_some()
    });
    assert_eq!(
        waiting["pending_reason"],
        "no node with a container runtime up: 2 nodes run processes only",
        "{waiting:#}"
    );
    assert_eq!(waiting["state"], "queued");
    assert_eq!(waiting["runtime"], "container");
    assert_eq!(waiting["image"], SEED_IMAGE);

    // The image only recorded: a host process, placed at once.
    let on_host = cpu_task(
        "on-host",
        &format!(r#","image":"{SEED_IMAGE}","runtime":"process""#),
    );
    assert_eq!(api.post("/v1/tasks", &on_host).status, 201);
    let start = [&mut plain, &mut old]
        .into_iter()
        .find_map(|s| fake_node::expect(s, "start", Duration::from_millis(3000)).ok())
        .expect("the process task was started on one of the nodes");
    assert!(start["container"].is_null(), "{start:#}");
    assert!(start["task_id"].as_str().unwrap().ends_with("/on-host"));
    assert_eq!(api.get("/v1/tasks/on-host").data()["runtime"], "process");

    // What each node runs, as the API, `caldera nodes` and /metrics say it.
    let nodes = op.get("/v1/nodes").data()["nodes"].clone();
    let runtime_of = |name: &str| {
        nodes
            .as_array()
            .and_then(|l| l.iter().find(|n| n["name"] == name).cloned())
            .map(|n| (n["runtime"].clone(), n["runtimes"].clone()))
            .unwrap()
    };
    let (label, all) = runtime_of("plain-1");
    assert_eq!(label, "process");
    assert_eq!(all[0]["detail"], "podman is not installed", "{all:#}");
    assert_eq!(runtime_of("old-agent").0, "process");

    let (mut podman, _) = fake(&cp, "podman-1", podman_up());
    let start = fake_node::expect(&mut podman, "start", Duration::from_secs(20)).unwrap();
    assert!(start["task_id"].as_str().unwrap().ends_with("/in-image"));
    assert_eq!(start["container"]["image"], SEED_IMAGE, "{start:#}");
    assert_eq!(
        op.get("/v1/nodes/podman-1").data()["runtime"],
        "podman 4.3.1"
    );
    let metrics = op
        .get("/metrics")
        .body
        .as_str()
        .unwrap_or_default()
        .to_string();
    for (node, runtime, up) in [
        ("podman-1", "container", "1.0"),
        ("plain-1", "container", "0.0"),
        ("plain-1", "process", "1.0"),
        ("old-agent", "process", "1.0"),
    ] {
        let series =
            format!("caldera_node_runtime_up{{node=\"{node}\",runtime=\"{runtime}\"}} {up}");
        let ours: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("caldera_node_runtime_up"))
            .collect();
        assert!(ours.contains(&series.as_str()), "{series} not in {ours:#?}");
    }
    let list = std::process::Command::new(BIN)
        .args(["nodes", "--server", &cp.url(), "--token"])
        .arg(caldera_chaos_tests::OPERATOR_TOKEN)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(
        list.lines().next().unwrap_or("").contains("RUNTIME"),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l.starts_with("podman-1") && l.contains("podman 4.3.1")),
        "{list}"
    );
    // The portal's node cards, and the task page.
    let mut portal = caldera_chaos_tests::portal::Browser::logged_in(
        &cp.addr,
        caldera_chaos_tests::OPERATOR_TOKEN,
    );
    let page = portal.get("/nodes");
    let html = caldera_chaos_tests::portal::text(&page);
    assert!(
        html.contains("Runtime: <strong>podman 4.3.1</strong>"),
        "{html}"
    );
    assert!(
        html.contains("podman down: podman is not installed"),
        "{html}"
    );
    let page = portal.get("/tasks/in-image?tenant=team-a");
    let html = caldera_chaos_tests::portal::text(&page);
    assert!(
        html.contains("Runs as <strong>container</strong> of image <code>registry.internal/deeplearning/pytorch:2.1-cu12.1</code>"),
        "{html}"
    );
}

/// With `require-images` a task that would run on the host is refused at
/// submission (and in a dry run), naming the field; an image task passes.
#[test]
fn require_images_refuses_tasks_that_would_run_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let cp = rules_cp(dir.path(), &[("CALDERA_REQUIRE_IMAGES", "true")]);
    let api = cp.api(&cp.tenant("team-a"));
    for (body, field) in [
        (cpu_task("no-image", ""), "image"),
        (
            cpu_task(
                "as-process",
                &format!(r#","image":"{SEED_IMAGE}","runtime":"process""#),
            ),
            "runtime",
        ),
    ] {
        for path in ["/v1/tasks", "/v1/tasks?dry_run=true"] {
            let r = api.post(path, &body);
            assert_eq!(r.status, 422, "{path} {body}: {:#}", r.body);
            assert_eq!(r.body["error"], "image_required", "{:#}", r.body);
            assert_eq!(r.body["code"], 42240, "{:#}", r.body);
            assert_eq!(r.body["field"], field, "{:#}", r.body);
            assert!(
                r.body["msg"].as_str().unwrap().contains("require-images"),
                "{:#}",
                r.body
            );
        }
    }
    assert_eq!(api.get("/v1/tasks/no-image").status, 404);
    let ok = cpu_task("in-image", &format!(r#","image":"{SEED_IMAGE}""#));
    assert_eq!(api.post("/v1/tasks", &ok).status, 201);
}

/// Data volumes come only from the operator's allow-list: one not offered
/// to the tenant, or read-write where it is read-only, is refused naming
/// `volumes[i]`; one offered is mounted at the host path the operator set,
/// read-only unless asked and allowed.
#[test]
fn data_volumes_come_only_from_the_operators_list() {
    let dir = tempfile::tempdir().unwrap();
    let cp = rules_cp(
        dir.path(),
        &[(
            "CALDERA_DATA_VOLUMES",
            "datasets=/srv/datasets:*,results=/srv/results:team-a:rw",
        )],
    );
    let a = cp.api(&cp.tenant("team-a"));
    let b = cp.api(&cp.tenant("team-b"));
    let with = |id: &str, volumes: &str| {
        cpu_task(
            id,
            &format!(r#","image":"{SEED_IMAGE}","volumes":{volumes}"#),
        )
    };
    let refused = |api: &Api, body: &str, code: u64, field: &str| {
        let r = api.post("/v1/tasks", body);
        assert_eq!(r.status / 100, 4, "{body}: {:#}", r.body);
        assert_eq!(r.body["code"], code, "{body}: {:#}", r.body);
        assert_eq!(r.body["field"], field, "{body}: {:#}", r.body);
        r.body["msg"].as_str().unwrap_or_default().to_string()
    };
    // Not on the list at all.
    let msg = refused(
        &a,
        &with("v1", r#"[{"name":"home","path":"/home"}]"#),
        42241,
        "volumes[0].name",
    );
    assert!(msg.contains("datasets, results"), "{msg}");
    // On the list, for another tenant: told as if it did not exist.
    let msg = refused(
        &b,
        &with(
            "v2",
            r#"[{"name":"datasets","path":"/data"},{"name":"results","path":"/out"}]"#,
        ),
        42241,
        "volumes[1].name",
    );
    assert!(!msg.contains("team-a"), "{msg}");
    // Read-write where the entry is read-only.
    refused(
        &a,
        &with(
            "v3",
            r#"[{"name":"datasets","path":"/data","read_write":true}]"#,
        ),
        42241,
        "volumes[0].read_write",
    );
    // What any spec says wrong is named the same way.
    refused(
        &a,
        &with("v4", r#"[{"name":"datasets","path":"data"}]"#),
        40006,
        "volumes[0].path",
    );
    refused(
        &a,
        &with(
            "v5",
            r#"[{"name":"datasets","path":"/d"},{"name":"datasets","path":"/e"}]"#,
        ),
        40007,
        "volumes[1].name",
    );

    let (mut s, _) = fake(&cp, "podman-1", podman_up());
    let ok = with(
        "v6",
        r#"[{"name":"datasets","path":"/data"},{"name":"results","path":"/out","read_write":true}]"#,
    );
    assert_eq!(a.post("/v1/tasks", &ok).status, 201);
    let start = fake_node::expect(&mut s, "start", Duration::from_secs(20)).unwrap();
    assert_eq!(
        start["container"]["volumes"],
        serde_json::json!([
            {"host_path": "/srv/datasets", "container_path": "/data", "read_only": true},
            {"host_path": "/srv/results", "container_path": "/out", "read_only": false}
        ]),
        "{start:#}"
    );
}

/// Registry credentials: set by the tenant (or the operator for it),
/// listed without the secret, invisible to another tenant (404), never in
/// an event or the server's log, and handed to the agent only in the start
/// command of that tenant's task whose image comes from that registry.
#[test]
fn registry_credentials_reach_only_their_tenants_starts_and_are_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let cp = rules_cp(dir.path(), &[]);
    let op = cp.operator();
    let a_token = cp.tenant("team-a");
    let a = cp.api(&a_token);
    let b = cp.api(&cp.tenant("team-b"));
    let secret = "pa55-w0rd-never-shown";
    let user = "robot-user-never-shown";
    let login = format!(r#"{{"username":"{user}","password":"{secret}"}}"#);
    let path = "/v1/tenants/team-a/registry-credentials";

    let r = a.put(&format!("{path}/registry.internal"), &login);
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.data()["registry"], "registry.internal");
    // Set again: replaced, 200.
    assert_eq!(
        a.put(&format!("{path}/registry.internal"), &login).status,
        200
    );
    // The operator sets one for the tenant; a port in the name reads back.
    let r = op.put(&format!("{path}/127.0.0.1:5555"), &login);
    assert_eq!(r.status, 201, "{:#}", r.body);

    // Another tenant: 404 for every operation, as for no such tenant.
    assert_eq!(b.get(path).status, 404);
    assert_eq!(
        b.put(&format!("{path}/registry.internal"), &login).status,
        404
    );
    assert_eq!(
        b.request("DELETE", &format!("{path}/registry.internal"), None)
            .status,
        404
    );
    // A bad body names the field and quotes nothing of it.
    let r = a.put(
        &format!("{path}/registry.internal"),
        &format!(r#"{{"username":"{user}","password":7}}"#),
    );
    assert_eq!(
        (r.status, r.body["field"].as_str()),
        (400, Some("password"))
    );
    let r = a.put("/v1/tenants/team-a/registry-credentials/Bad_Host!", &login);
    assert_eq!(
        (r.status, r.body["field"].as_str()),
        (400, Some("registry"))
    );

    let listed = a.get(path);
    assert_eq!(listed.status, 200);
    let registries: Vec<&str> = listed.data()["registry_credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["registry"].as_str().unwrap())
        .collect();
    assert_eq!(registries, ["127.0.0.1:5555", "registry.internal"]);
    assert!(listed.data()["registry_credentials"][0]["set_at"].is_string());

    // The start command of team-a's task carries the auth file for the
    // image's registry alone; team-b's task on the same registry none.
    let (mut s, _) = fake(&cp, "podman-1", podman_up());
    let task = cpu_task("pull-me", &format!(r#","image":"{SEED_IMAGE}""#));
    assert_eq!(a.post("/v1/tasks", &task).status, 201);
    let start = fake_node::expect(&mut s, "start", Duration::from_secs(20)).unwrap();
    let auth: Value =
        serde_json::from_str(start["container"]["registry_auth"].as_str().unwrap()).unwrap();
    let auths = auth["auths"].as_object().unwrap();
    assert_eq!(auths.keys().collect::<Vec<_>>(), ["registry.internal"]);
    let encoded = auths["registry.internal"]["auth"].as_str().unwrap();
    assert_eq!(encoded, base64_of(&format!("{user}:{secret}")));
    assert_eq!(a.post("/v1/tasks/pull-me/release", "").status / 100, 2);
    let theirs = cpu_task("theirs", &format!(r#","image":"{SEED_IMAGE}""#));
    assert_eq!(b.post("/v1/tasks", &theirs).status, 201);
    let start = loop {
        let m = fake_node::expect(&mut s, "start", Duration::from_secs(20)).unwrap();
        if m["task_id"].as_str().unwrap_or("").ends_with("/theirs") {
            break m;
        }
    };
    assert!(start["container"]["registry_auth"].is_null(), "{start:#}");

    // Deleted: listed no more, and a second delete is a 404.
    assert_eq!(
        a.request("DELETE", &format!("{path}/registry.internal"), None)
            .status,
        200
    );
    assert_eq!(
        a.request("DELETE", &format!("{path}/registry.internal"), None)
            .status,
        404
    );
    assert_eq!(
        a.get(path).data()["registry_credentials"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // The CLI: the password from stdin only, the registry's port through
    // the path, the tenant from the token.
    let cli = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = std::process::Command::new(BIN)
            .args(args)
            .args(["--server", &cp.url(), "--token", &a_token])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        input.write_all(stdin.as_bytes()).unwrap();
        drop(input);
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    };
    let cli_secret = "cli-s3cret-from-stdin";
    let login = [
        "registry-login",
        "127.0.0.1:5555",
        "--username",
        "cli-user",
        "--password-stdin",
    ];
    let (ok, out) = cli(&login, &format!("{cli_secret}\n"));
    assert!(ok, "{out}");
    assert!(
        out.contains("credentials for 127.0.0.1:5555 set for tenant team-a"),
        "{out}"
    );
    let (ok, out) = cli(&login[..4], "");
    assert!(!ok && out.contains("--password-stdin"), "{out}");
    let (ok, out) = cli(&["registry-credentials"], "");
    assert!(ok && out.contains("127.0.0.1:5555"), "{out}");
    assert!(
        !out.contains(cli_secret) && !out.contains("cli-user"),
        "{out}"
    );
    let (ok, out) = cli(&["registry-logout", "127.0.0.1:5555"], "");
    assert!(ok, "{out}");
    assert_eq!(
        a.get(path).data()["registry_credentials"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );

    // Never in a view, an event or the log.
    let log = std::fs::read_to_string(&cp.log).unwrap_or_default();
    assert!(!log.contains(cli_secret), "{log}");
    for shown in [
        a.get(path).body.to_string(),
        op.get("/v1/events?limit=1000").body.to_string(),
        a.get("/v1/tasks/pull-me").body.to_string(),
        std::fs::read_to_string(&cp.log).unwrap_or_default(),
    ] {
        assert!(!shown.contains(secret) && !shown.contains(user), "{shown}");
        assert!(!shown.contains(encoded), "{shown}");
    }
}

/// Standard base64 (what an auth file holds), computed here independently.
fn base64_of(text: &str) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bits: String = text.bytes().map(|b| format!("{b:08b}")).collect();
    let mut out: String = bits
        .as_bytes()
        .chunks(6)
        .map(|c| {
            let s = format!("{:0<6}", String::from_utf8_lossy(c));
            ABC[usize::from_str_radix(&s, 2).unwrap()] as char
        })
        .collect();
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
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
        failure.contains(&image)
            && failure.contains("no layer started yet (still reaching the registry), 0 B done"),
        "{failure}"
    );
    assert!(took >= Duration::from_secs(5), "{took:?}");
    assert!(registry.connections() >= 1, "the registry was reached");
}

/// Under `max-image-pulls 1` the second start of an image waits at the
/// control plane (the task preparing) while the first one's pull hangs;
/// once that one fails, the second is sent and its pull gets its whole
/// prepare timeout on the node: it fails by the node's verdict, not by the
/// control plane's timer that started while it waited.
#[test]
fn a_start_that_waited_for_its_turn_to_pull_still_gets_its_whole_prepare_timeout() {
    let dir = tempfile::tempdir().unwrap();
    container_host::require();
    let registry = StandinRegistry::start(Answer::Silent).unwrap();
    let conf = registry
        .registries_conf(dir.path(), STANDIN_PREFIX)
        .unwrap();
    let conf = conf.display().to_string();
    let stores: Vec<NodeStore> = ["node-0", "node-1"]
        .iter()
        .map(|n| NodeStore::new(dir.path(), n))
        .collect();
    let specs: Vec<AgentSpec> = ["node-0", "node-1"]
        .iter()
        .zip(&stores)
        .map(|(n, store)| {
            let (k, v) = store.env();
            AgentSpec::new(n, "1xA100-80GB")
                .env(k, &v)
                .env("CONTAINERS_REGISTRIES_CONF", &conf)
        })
        .collect();
    let (cp, _agents) = cluster(
        Path::new(BIN),
        dir.path(),
        &[("CALDERA_MAX_IMAGE_PULLS", "1")],
        &specs,
    );
    let api = cp.api(&cp.tenant("team-a"));
    let image = format!("{STANDIN_PREFIX}/stuck:1");
    // A whole GPU each: one task per node.
    for id in ["first", "second"] {
        let task = format!(
            r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1}}}},"command":["true"],"image":"{image}","prepare_timeout":"00:00:04"}}"#
        );
        assert_eq!(api.post("/v1/tasks", &task).status, 201);
    }
    let a = api.wait_task("first", 60, "an end", ended);
    let b = api.wait_task("second", 60, "an end", ended);
    // Both are placed in one pass, so either may be the one that waits.
    let waited: Vec<Vec<String>> = ["first", "second"]
        .iter()
        .map(|id| events_of(&api, id, "image_pull"))
        .collect();
    let waiters = waited
        .iter()
        .filter(|e| e.iter().any(|m| m.contains("waits to pull")))
        .count();
    assert_eq!(
        waiters, 1,
        "one start waited for the other's pull: {waited:#?}"
    );
    let node_verdict = format!(
        "pulling {image} did not finish within the prepare timeout of 4 s: no layer started yet"
    );
    for t in [&a, &b] {
        assert_eq!(t["state"], "failed", "{t:#}");
        assert_eq!(t["failure_code"], 10224, "{t:#}");
        let failure = t["failure"].as_str().unwrap_or_default();
        assert!(failure.starts_with(&node_verdict), "{failure}");
    }
}

// ---- running in a container: adoption, leases, what a workload can read ----

/// A ticker in the seed's image: its OS once, then the host's uptime every
/// 100 ms (busybox's `date` has no sub-second field; every container on the
/// host reads the same uptime, so two nodes' ticks compare).
const TICKER_IN_IMAGE: &str = r#"["sh","-c","cat /etc/os-release; trap 'echo got-sigterm; exit 0' TERM; while :; do read up rest < /proc/uptime; echo t=$up; sleep 0.1; done"]"#;

/// The seed's task with `command`, as written plus what running it needs.
fn seed_task(id: &str, command: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1}},"memory":{{"size_gb":1}}}},"image":"{}","command":{command}}}"#,
        container_host::SEED_IMAGE
    )
}

/// The id of the container podman runs for `allocation` on `agent`, if any
/// (found by the agent's labels, as the agent finds its own).
fn container_of(agent: &Agent, allocation: &str) -> Option<String> {
    let data = agent.data_dir.canonicalize().ok()?;
    let node = caldera_node::container::run_args::agent_identity(&agent.name, &data);
    let out = container_host::podman(&[
        "ps",
        "--all",
        "--filter",
        &format!("label=caldera.node={node}"),
        "--filter",
        &format!("label=caldera.allocation={allocation}"),
        "--format",
        "{{.ID}}",
    ])
    .ok()?;
    out.lines()
        .next()
        .map(str::to_string)
        .filter(|s| !s.is_empty())
}

/// The timestamps (`t=...`) a workload printed into its log on `agent`.
fn ticks_on(agent: &Agent, tenant: &str, task: &str) -> Vec<f64> {
    let log = agent
        .data_dir
        .join(format!("logs/{tenant}/{tenant}+{task}.log"));
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("t=")?.trim().parse().ok())
        .collect()
}

/// What one running container workload keeps resident on the node, besides
/// the workload itself: its shim and podman's monitor (conmon); the podman
/// client is let go once the container runs. A line for the docs' figure.
fn resident_memory(agent: &Agent, id: &str) -> String {
    use caldera_chaos_tests::shims::{shims, status_kb};
    let kb = |pid: Option<u32>| pid.and_then(|p| status_kb(p, "VmRSS")).unwrap_or(0);
    let shim = kb(shims(&agent.data_dir)
        .into_iter()
        .next()
        .and_then(|s| s.shim));
    let conmon = container_host::podman(&["inspect", "--format", "{{.State.ConmonPid}}", id])
        .ok()
        .and_then(|o| o.trim().parse::<u32>().ok());
    let monitor = kb(conmon);
    format!(
        "resident per container workload: shim {shim} kB + conmon {monitor} kB = {} kB",
        shim + monitor
    )
}

#[test]
fn a_killed_agent_comes_back_to_the_same_container_with_no_retry_spent() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let mut agent = Agent::start(Path::new(BIN), &cp, "ctr-adopt", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let api = cp.api(&cp.tenant("ctradopt"));
    let r = api.post("/v1/tasks", &seed_task("ticker", TICKER_IN_IMAGE));
    assert_eq!(r.status, 201, "{}", r.body);
    api.wait_task("ticker", 60, "running", |v| v["state"] == "running");
    let alloc = "ctradopt/ticker.1";
    let mut before = None;
    wait_until(Duration::from_secs(10), || {
        before = container_of(&agent, alloc);
        before.is_some()
    });
    let before = before.unwrap_or_else(|| {
        let log = std::fs::read_to_string(&agent.log).unwrap_or_default();
        panic!("no container runs {alloc}: {:#}\n{log}", api.task("ticker"))
    });

    eprintln!("{}", resident_memory(&agent, &before));

    agent.restart(); // kill -9, then the same command on the same data dir
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    std::thread::sleep(Duration::from_millis(1500));
    let v = api.task("ticker");
    assert_eq!(v["state"], "running", "{v:#}");
    assert_eq!(v["attempts"], 1, "a retry was spent: {v:#}");
    assert_eq!(
        container_of(&agent, alloc),
        Some(before),
        "the same container, not a new one"
    );
    let log = api.get("/v1/tasks/ticker/logs?tail_bytes=1048576").data()["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        log.matches(container_host::SEED_IMAGE_OS).count(),
        2,
        "its image's OS, printed by one start only (NAME and PRETTY_NAME): {log}"
    );
    let ticks = ticks_on(&agent, "ctradopt", "ticker");
    assert!(ticks.len() > 10, "it ticked all along: {log}");
    let gap = ticks.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    assert!(gap < 1.0, "its output has a gap of {gap:.2} s");

    // Released: the container is gone once the task says so.
    assert_eq!(api.post("/v1/tasks/ticker/release", "{}").status, 200);
    api.wait_task("ticker", 30, "released", |v| v["state"] == "released");
    assert!(
        wait_until(Duration::from_secs(10), || container_of(&agent, alloc)
            .is_none()),
        "its container outlived the release"
    );
}

#[test]
fn a_frozen_agents_container_is_gone_before_its_task_runs_elsewhere() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let (cp, a, b) = caldera_chaos_tests::two_nodes(
        Path::new(BIN),
        dir.path(),
        &[],
        "1xA100-80GB",
        "1xA100-80GB",
    );
    let api = cp.api(&cp.tenant("ctrlease"));
    assert_eq!(
        api.post("/v1/tasks", &seed_task("train", TICKER_IN_IMAGE))
            .status,
        201
    );
    let v = api.wait_task("train", 60, "running", |v| v["state"] == "running");
    let (first, second) = match v["allocation"]["node"].as_str() {
        Some(n) if n == a.name => (&a, &b),
        _ => (&b, &a),
    };
    let alloc = "ctrlease/train.1";
    assert!(
        container_of(first, alloc).is_some(),
        "it runs in a container"
    );

    first.pause();
    // Requeued once lease + grace have passed, then started on the other node.
    let moved = api.wait_task("train", 60, "running elsewhere", |v| {
        v["state"] == "running" && v["allocation"]["node"] == second.name.as_str()
    });
    assert_eq!(
        container_of(first, alloc),
        None,
        "the frozen node's container is gone"
    );
    assert!(wait_until(Duration::from_secs(20), || {
        !ticks_on(second, "ctrlease", "train").is_empty()
    }));
    first.resume();
    let old = ticks_on(first, "ctrlease", "train");
    let new = ticks_on(second, "ctrlease", "train");
    let (last_old, first_new) = (old.last().copied().unwrap_or(0.0), new[0]);
    let overlap = last_old - first_new;
    eprintln!(
        "frozen node's container last ticked {:.2} s before the new one first did",
        -overlap
    );
    assert!(!old.is_empty(), "the first container ran");
    assert!(
        overlap <= 0.0,
        "both ran at once for {overlap:.2} s: {moved:#}"
    );
}

#[test]
fn a_container_reads_nothing_of_the_control_plane_the_agent_or_another_tenant() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // Tenants get uids of their own here (the default range).
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "ctr-iso",
        "2xA100-80GB",
        dir.path(),
        &[],
    );
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    // Another tenant's task leaves a checkpoint in its tree on the node.
    let other = cp.api(&cp.tenant("ctrother"));
    let saver = r#"["sh","-c","echo secret-weights > $CALDERA_CHECKPOINT_DIR/step-1.ckpt"]"#;
    assert_eq!(
        other.post("/v1/tasks", &seed_task("saver", saver)).status,
        201
    );
    other.wait_task("saver", 60, "finished", |v| v["state"] == "finished");
    let cp_data = dir.path().join("cp").canonicalize().unwrap();
    let node_data = agent.data_dir.canonicalize().unwrap();
    let theirs = node_data.join("checkpoints/ctrother+saver/step-1.ckpt");
    assert!(
        theirs.exists(),
        "the other tenant's checkpoint is on the host"
    );
    let secret = node_data.join("secrets/node-secret");
    assert!(secret.exists(), "the node secret is on the host");
    let targets = [
        cp_data.clone(),
        node_data.clone(),
        secret,
        theirs,
        node_data.join("checkpoints/ctrother+saver"),
    ];
    let probes: Vec<String> = targets
        .iter()
        .map(|p| {
            let p = p.display();
            format!("if cat {p} >/dev/null 2>&1 || ls {p} >/dev/null 2>&1; then echo READ {p}; else echo DENIED {p}; fi")
        })
        .collect();
    // And where it runs: a user namespace whose root is a tenant's uid.
    let probes = [
        probes.join("; "),
        "echo UIDMAP $(cat /proc/self/uid_map)".into(),
    ];
    let script = serde_json::to_string(&["sh", "-c", &probes.join("; ")]).unwrap();
    let mine = cp.api(&cp.tenant("ctrreader"));
    assert_eq!(
        mine.post("/v1/tasks", &seed_task("reader", &script)).status,
        201
    );
    mine.wait_task("reader", 60, "finished", |v| v["state"] == "finished");
    let log = mine.get("/v1/tasks/reader/logs?tail_bytes=65536").data()["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(log.matches("DENIED").count(), targets.len(), "{log}");
    assert!(!log.contains("READ "), "{log}");
    let map: Vec<u64> = log
        .lines()
        .find_map(|l| l.strip_prefix("UIDMAP "))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        matches!(map[..], [0, host, 65536] if host > 0),
        "not in a user namespace whose root is an unprivileged uid: {map:?} in {log}"
    );
}

#[test]
fn a_container_killed_at_its_memory_limit_fails_its_task_as_oom_killed() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "ctr-oom", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let api = cp.api(&cp.tenant("ctroom"));
    // 64 MiB (the least a task may ask), and a workload that wants 200 MB.
    let task = format!(
        r#"{{"task_id":"hog","task_type":"training","resources":{{"gpu":{{"count":1}},"memory":{{"size_gb":0.0625}}}},"image":"{}","command":["sh","-c","x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo SURVIVED"]}}"#,
        container_host::SEED_IMAGE
    );
    let r = api.post("/v1/tasks", &task);
    assert_eq!(r.status, 201, "{}", r.body);
    let v = api.wait_task("hog", 60, "failed", |v| v["state"] == "failed");
    let text = v.to_string();
    assert!(
        text.contains("oom_killed"),
        "not named an out-of-memory kill: {v:#}"
    );
    let history = v["history"].as_array().cloned().unwrap_or_default();
    assert!(
        history.iter().any(|h| h["state"] == "failed"
            && h["reason"].as_str().unwrap_or("").starts_with("oom_killed")),
        "{history:#?}"
    );
}

/// A container task's scratch holds its `disk.size_gb`: 64 MiB asked (the
/// least a task may ask), 200 MB written into it as the tenant's uid in its
/// user namespace: the write fails inside with ENOSPC, the task's log says
/// so, and once it ended the node holds no image or mount of it.
#[test]
fn a_container_tasks_scratch_holds_its_disk_size_and_a_write_past_it_fails_inside() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // Tenants get uids of their own here (the default range).
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "ctr-disk",
        "1xA100-80GB",
        dir.path(),
        &[],
    );
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let api = cp.api(&cp.tenant("ctrdisk"));
    let task = format!(
        r#"{{"task_id":"filler","task_type":"training","resources":{{"gpu":{{"count":1}},"memory":{{"size_gb":1}},"disk":{{"size_gb":0.0625}}}},"image":"{}","command":["sh","-c","dd if=/dev/zero of=$CALDERA_SCRATCH_DIR/big bs=1M count=200 2>&1; echo DD-EXIT=$?; df -k $CALDERA_SCRATCH_DIR"]}}"#,
        container_host::SEED_IMAGE
    );
    let r = api.post("/v1/tasks", &task);
    assert_eq!(r.status, 201, "{}", r.body);
    let v = api.wait_task("filler", 60, "finished", |v| v["state"] == "finished");
    let log = api.get("/v1/tasks/filler/logs?tail_bytes=65536").data()["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(log.contains("No space left on device"), "{log}\n{v:#}");
    assert!(!log.contains("DD-EXIT=0"), "the write must fail: {log}");
    let ready = v["history"].to_string();
    assert!(
        ready.contains("scratch 64 MiB") && ready.contains("(tenant ctrdisk)"),
        "sized, and written as the tenant's uid: {ready}"
    );
    let data = agent.data_dir.canonicalize().unwrap();
    let images: Vec<_> = std::fs::read_dir(data.join("scratch-images"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(images.is_empty(), "images left: {images:?}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let data = data.to_string_lossy().into_owned();
    assert!(
        !mounts.lines().any(|l| l.contains(&data)),
        "a mount left under {data}: {mounts}"
    );
}

// ---- the seed's request, exactly as written ----

/// The request the product this replaces was given, as its article writes it:
/// four A100s of 80 GB, 32 cores, 256 GB, 200 GB of disk, one hour, and an
/// image. No command: in a container, the image's own runs.
const SEED_REQUEST: &str = r#"{"task_id":"train_20240716_001","task_type":"training","priority":"high","resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},"memory":{"size_gb":256},"disk":{"size_gb":200}},"duration":"01:00:00","image":"registry.internal/deeplearning/pytorch:2.1-cu12.1"}"#;

/// The seed's request runs in a container of the image it names, pulled
/// from the local registry through registries.conf as `registry.internal`:
/// the workload's output is the image's OS, not the host's, and the digest
/// it ran is on the allocation and in the history. Released, its container
/// is gone.
#[test]
fn the_seeds_request_as_written_runs_in_its_image() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let store = NodeStore::new(dir.path(), "node-0");
    let (k, v) = store.env();
    let host = AgentSpec::new("node-0", "4xA100-80GB")
        .env(k, &v)
        .flag("simulate-cpu-cores", "64")
        .flag("simulate-memory-gb", "512")
        .flag("simulate-disk-gb", "1000");
    let (cp, _agents) = cluster(Path::new(BIN), dir.path(), &[], &[host]);
    let api = cp.api(&cp.tenant("alldata"));
    let r = api.post("/v1/tasks", SEED_REQUEST);
    assert_eq!(r.status, 201, "{:#}", r.body);
    let id = "train_20240716_001";
    let running = api.wait_task(id, 90, "running", |v| v["state"] == "running");
    assert_eq!(running["image"], container_host::SEED_IMAGE, "{running:#}");
    let mut log = String::new();
    let printed = wait_until(Duration::from_secs(30), || {
        log = api
            .get(&format!("/v1/tasks/{id}/logs?tail_bytes=65536"))
            .data()["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        log.contains("training...")
    });
    assert!(printed, "{log}");
    assert!(log.contains(container_host::SEED_IMAGE_OS), "{log}");
    let host_os = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let host_name = host_os
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .unwrap_or("the host's")
        .to_string();
    assert!(!log.contains(&host_name), "the host's OS in {log}");
    let digest = running["allocation"]["image_digest"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let held = store
        .podman(&[
            "image",
            "inspect",
            "--format",
            "{{.Digest}}",
            container_host::SEED_IMAGE,
        ])
        .unwrap_or_default();
    assert!(digest.starts_with("sha256:"), "{running:#}");
    assert_eq!(digest, held.trim(), "{running:#}");
    let history = running["history"].to_string();
    assert!(history.contains(&digest), "{history}");
    // Its four GPUs reached it as CDI devices (the simulated spec's).
    let cdi = "gpus: nvidia.com/gpu=0,1,2,3 through CDI (simulated devices)";
    assert!(history.contains(cdi), "{history}");
    let allocation = running["allocation"]["allocation_id"]
        .as_str()
        .unwrap_or("?");
    // The node labels it with the allocation's full key (`tenant/id`).
    let label = "{{index .Labels \"caldera.allocation\"}}";
    let containers = || {
        store
            .podman(&["ps", "-a", "--format", label])
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == format!("alldata/{allocation}"))
            .count()
    };
    assert_eq!(containers(), 1, "{allocation}");
    assert_eq!(api.post(&format!("/v1/tasks/{id}/release"), "").status, 200);
    api.wait_task(id, 60, "released", ended);
    let gone = wait_until(Duration::from_secs(20), || containers() == 0);
    assert!(gone, "its container is still there after the release");
}

#[test]
fn a_replica_in_a_container_is_probed_ready_and_answers_on_its_claimed_port() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // Ports of this test's own: tests running at once hand out others.
    let first = caldera_chaos_tests::free_port().clamp(1024, 65000);
    let range = format!("{first}-{}", first + 9);
    let _agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "ctr-web",
        "1xA100-80GB",
        dir.path(),
        &["--workload-uid-range", "off", "--replica-ports", &range],
    );
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let api = cp.api(&cp.tenant("ctrweb"));
    let svc = serde_json::json!({
        "task_id": "web", "task_type": "inference", "replicas": 1,
        "resources": {"cpu": {"cores": 1}}, "image": container_host::SEED_IMAGE,
        "command": ["sh", "-c", "exec httpd -f -p $CALDERA_PORT -h /etc"],
        "readiness": {"http_path": "/os-release", "period_s": 1, "timeout_s": 1},
    });
    let r = api.post("/v1/tasks", &svc.to_string());
    assert_eq!(r.status, 201, "{}", r.body);
    let mut listed = Value::Null;
    let ready = wait_until(Duration::from_secs(60), || {
        listed = api.get("/v1/tasks/web/endpoints").data()["endpoints"].clone();
        listed.as_array().is_some_and(|l| !l.is_empty())
    });
    assert!(ready, "never listed ready: {:#}", api.task("web.r0"));
    let e = &listed[0];
    let at = format!("{}:{}", e["address"].as_str().unwrap(), e["port"]);
    let mut conn = std::net::TcpStream::connect(&at).unwrap();
    use std::io::{Read, Write};
    conn.write_all(b"GET /os-release HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains(container_host::SEED_IMAGE_OS),
        "the endpoint is not the container's: {answer}"
    );
}

#[test]
fn an_agent_removes_at_start_the_containers_of_allocations_it_no_longer_holds() {
    container_host::require();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let data = dir.path().join("ctr-orphans");
    std::fs::create_dir_all(&data).unwrap();
    let data = data.canonicalize().unwrap();
    let mine = caldera_node::container::run_args::agent_identity("ctr-orphans", &data);
    let orphan = format!("caldera-test-{}", unique("orphan"));
    let stranger = format!("caldera-test-{}", unique("stranger"));
    for (name, node) in [(&orphan, mine.as_str()), (&stranger, "another-agent-0000")] {
        let made = container_host::podman(&[
            "run",
            "-d",
            "--name",
            name,
            "--label",
            &format!("caldera.node={node}"),
            "--label",
            "caldera.allocation=ctrgone/old.1",
            "--pull=never",
            container_host::SEED_IMAGE,
            "sleep",
            "300",
        ]);
        assert!(made.is_ok(), "{made:?}");
    }
    let running = |name: &str| container_host::podman(&["inspect", name]).is_ok();
    let _agent = Agent::start(
        Path::new(BIN),
        &cp,
        "ctr-orphans",
        "1xA100-80GB",
        dir.path(),
    );
    assert!(wait_until(Duration::from_secs(20), || {
        caldera_chaos_tests::nodes_connected(&cp) == 1
    }));
    let stranger_kept = running(&stranger);
    let _ = container_host::podman(&["rm", "-f", "--ignore", "-t", "0", &stranger, &orphan]);
    assert!(!running(&orphan), "the orphan of this agent's still runs");
    assert!(stranger_kept, "another agent's container was removed");
}
