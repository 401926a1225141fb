//! Model versions warm up with real processes: a
//! version registered with a generated weights file, on an `http://` origin
//! the test starts and on a `file://` mount. A service of 3 replicas on 3
//! agents reads the origin once and its peers twice — counted by the origin
//! itself and by the nodes' cache counters — and every replica's process
//! reads `CALDERA_MODEL_PATH` and prints the bytes' SHA-256, which must be
//! the registered one. A second service of the same version starts from the
//! caches: hits, and no byte moves.
use caldera_chaos_tests::models::{
    copy_on, logged, model_service, node_of, node_sized, on_node, one_core, passes_through,
    printed_sha256, submit, task_events, wait_running, Counters,
};
use caldera_chaos_tests::origin::{Origin, OriginOptions};
use caldera_chaos_tests::weights::{cached_copy, generate, sha256_file, WeightsFile};
use caldera_chaos_tests::{cluster, history_states, wait_until, AgentSpec};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
/// A few MB: big enough to be read in many chunks, small enough for CI.
const SIZE: u64 = 4 << 20;
/// The emulated shared storage's bandwidth, bytes/s: 4 MiB in about 0.5 s.
const ORIGIN_CAP: u64 = 8_000_000;

/// Long failure detection: on a loaded machine a late heartbeat must not
/// have a node declared lost and its replica replaced mid-test.
const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

fn agents(n: usize) -> Vec<AgentSpec> {
    (0..n)
        .map(|i| AgentSpec::with_cache(&format!("node-{i}"), "1xA100-80GB", "1"))
        .collect()
}

#[test]
fn three_replicas_read_the_origin_once_and_their_peers_twice_and_a_second_service_hits() {
    let dir = tempfile::tempdir().unwrap();
    let w = generate(&dir.path().join("origin/llama-v1.bin"), SIZE, 1).unwrap();
    // Capped (emulated slow storage) so that the read takes a few
    // heartbeats: the replicas waiting for a source are seen waiting.
    let origin = Origin::serve(&w.path, OriginOptions::capped(ORIGIN_CAP)).unwrap();
    let (cp, nodes) = cluster(Path::new(BIN), dir.path(), ENV, &agents(3));
    let op = cp.operator();
    let spec = w.spec(&origin.url());
    let r = op.register_model("llama", "v1", &spec);
    assert_eq!(r.status, 201, "{:#}", r.body);
    assert_eq!(r.data()["state"], "registered", "{:#}", r.body);
    // Idempotent with the same body; immutable under a different one.
    assert_eq!(op.register_model("llama", "v1", &spec).status, 200);
    let mut other = spec.clone();
    other["size_bytes"] = serde_json::json!(SIZE + 1);
    assert_eq!(op.register_model("llama", "v1", &other).status, 409);

    let tenant = cp.tenant("team-a");
    let api = cp.api(&tenant);
    submit(&api, &model_service("chat", "llama:v1", 3, node_sized()));
    let mut on = BTreeSet::new();
    let mut views = Vec::new();
    for i in 0..3 {
        let id = format!("chat.r{i}");
        let v = wait_running(&api, &id, 60);
        on.insert(node_of(&v));
        views.push(v.clone());
        assert_eq!(printed_sha256(&api, &id, 20), w.sha256, "{id}");
        assert_eq!(logged(&api, &id, "model").as_deref(), Some("llama:v1"));
    }
    assert_eq!(on.len(), 3, "one replica per agent: {on:?} {views:#?}");

    // The origin's own count: one GET, the file's bytes once.
    assert_eq!(
        origin.gets().len(),
        1,
        "GETs at offsets {:?}",
        origin.gets()
    );
    assert_eq!(origin.bytes_served(), SIZE);
    // The nodes' counters: one read the origin, two read a peer.
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let c = op.counters_when(&names, |c| {
        c.iter().map(Counters::bytes_fetched).sum::<u64>() >= 3 * SIZE
    });
    let from_origin: Vec<u64> = c.iter().map(|c| c.bytes_from_origin).collect();
    let from_peers: Vec<u64> = c.iter().map(|c| c.bytes_from_peers).collect();
    assert_eq!(from_origin.iter().sum::<u64>(), SIZE, "{c:#?}");
    assert_eq!(
        from_origin.iter().filter(|b| **b == SIZE).count(),
        1,
        "{c:#?}"
    );
    assert_eq!(
        from_peers.iter().filter(|b| **b == SIZE).count(),
        2,
        "{c:#?}"
    );
    assert_eq!(
        c.iter().map(|c| c.bytes_served).sum::<u64>(),
        2 * SIZE,
        "{c:#?}"
    );
    assert!(c.iter().all(|c| c.misses >= 1 && c.hits == 0), "{c:#?}");
    // Each node's copy on disk is the registered bytes, and the version's
    // view says so.
    for n in &nodes {
        let copy = cached_copy(&n.data_dir, &w.sha256)
            .unwrap_or_else(|| panic!("{}: no cached copy", n.name));
        assert_eq!(sha256_file(&copy).unwrap(), w.sha256);
    }
    let view = op.model_version("llama", "v1");
    assert_eq!(view["state"], "active", "{view:#}");
    for n in &nodes {
        assert_eq!(
            copy_on(&view, &n.name).as_deref(),
            Some("verified"),
            "{view:#}"
        );
    }
    assert_eq!(view["tasks"].as_array().map_or(0, Vec::len), 3, "{view:#}");
    // Each replica waited in warming until its copy was verified, and only
    // then was ready and ran.
    for i in 0..3 {
        let id = format!("chat.r{i}");
        let v = api.task(&id);
        let states = history_states(&v);
        assert!(
            passes_through(
                &states,
                &["scheduled", "preparing", "warming", "ready", "running"]
            ),
            "{id} went {states:?}: {v:#}; events {:#?}",
            task_events(&op, "team-a", &id)
        );
    }

    // A second service of the same version: every start is a hit and no
    // byte moves, from the origin or between peers.
    submit(&api, &model_service("chat-2", "llama:v1", 2, one_core()));
    for i in 0..2 {
        let id = format!("chat-2.r{i}");
        wait_running(&api, &id, 30);
        assert_eq!(printed_sha256(&api, &id, 20), w.sha256, "{id}");
    }
    let after = op.counters_when(&names, |c| c.iter().map(|c| c.hits).sum::<u64>() >= 2);
    let moved = |c: &[Counters]| {
        c.iter()
            .map(|c| c.bytes_fetched() + c.bytes_served)
            .sum::<u64>()
    };
    assert_eq!(moved(&after), moved(&c), "{after:#?}");
    let total = |c: &[Counters], f: fn(&Counters) -> u64| c.iter().map(f).sum::<u64>();
    assert_eq!(
        total(&after, |c| c.misses),
        total(&c, |c| c.misses),
        "{after:#?}"
    );
    assert!(
        total(&after, |c| c.hits) >= 2,
        "two starts, two hits: {after:#?}"
    );
    assert_eq!(origin.bytes_served(), SIZE);
}

/// A `file://` origin (a shared mount): the node copies the file into its
/// cache, and the workload, running as its own uid, reads it but cannot
/// write it.
#[test]
fn a_version_on_a_shared_mount_is_copied_verified_and_read_only_to_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let w: WeightsFile = generate(&dir.path().join("nfs/llama-v2.bin"), SIZE, 2).unwrap();
    // The workload runs as a uid of the range: the mount must be readable to
    // the agent, not to it; the cache copy must be readable, not writable.
    let spec = AgentSpec::with_cache("node-0", "1xA100-80GB", "1");
    let spec = AgentSpec {
        flags: spec
            .flags
            .into_iter()
            .map(|f| if f == "off" { "61000-61999".into() } else { f })
            .collect(),
        ..spec
    };
    let (cp, nodes) = cluster(Path::new(BIN), dir.path(), ENV, &[spec]);
    let op = cp.operator();
    let r = op.register_model("llama", "v2", &w.spec(&w.file_uri()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(&cp.tenant("team-a"));
    let mut body = on_node(model_service("mount", "llama:v2", 1, one_core()), "node-0");
    body["command"] = serde_json::json!(["sh", "-c",
        "echo \"sha256=$(sha256sum \"$CALDERA_MODEL_PATH\" | cut -d' ' -f1)\"; \
         if (echo x >> \"$CALDERA_MODEL_PATH\") 2>/dev/null; then echo writable=yes; else echo writable=no; fi; \
         exec sleep 3600"]);
    submit(&api, &body);
    wait_running(&api, "mount.r0", 60);
    assert_eq!(printed_sha256(&api, "mount.r0", 20), w.sha256);
    assert!(
        wait_until(Duration::from_secs(10), || logged(
            &api, "mount.r0", "writable"
        )
        .is_some()),
        "the workload never said whether it could write"
    );
    assert_eq!(logged(&api, "mount.r0", "writable").as_deref(), Some("no"));
    let c = op.counters_when(&["node-0"], |c| c[0].bytes_fetched() >= SIZE)[0];
    assert_eq!(c.bytes_from_origin, SIZE, "{c:#?}");
    assert_eq!(c.bytes_from_peers, 0, "{c:#?}");
    let copy = cached_copy(&nodes[0].data_dir, &w.sha256).expect("a cached copy");
    assert_eq!(sha256_file(&copy).unwrap(), w.sha256);
    assert_eq!(
        sha256_file(&w.path).unwrap(),
        w.sha256,
        "the origin is untouched"
    );
}

/// A task naming a version that was never registered is refused at
/// submission, naming the field.
#[test]
fn an_unknown_version_is_refused_naming_the_model_field() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), ENV, &agents(1));
    let api = cp.api(&cp.tenant("team-a"));
    let r = api.post(
        "/v1/tasks",
        &model_service("nope", "llama:v9", 1, one_core()).to_string(),
    );
    assert_eq!(r.status, 422, "{:#}", r.body);
    assert_eq!(r.body["error"], "unknown_model", "{:#}", r.body);
    assert_eq!(r.body["field"], "model", "{:#}", r.body);
    assert!(
        r.body.to_string().contains("llama:v9"),
        "the refusal names the version: {:#}",
        r.body
    );
}

/// A node checks a tenant's origin again just before it connects: the rules
/// travel with every warm command, so a version registered while the
/// operator allowed its loopback store is refused on the node once the
/// operator allows only public hosts again, and the store is never asked
/// for a byte.
#[test]
fn a_node_refuses_a_tenants_origin_its_rules_no_longer_admit_and_never_connects() {
    let dir = tempfile::tempdir().unwrap();
    let w = generate(&dir.path().join("store/m.bin"), SIZE, 7).unwrap();
    let origin = Origin::serve(&w.path, OriginOptions::default()).unwrap();
    let mut env = ENV.to_vec();
    env.push(("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true"));
    env.push(("CALDERA_TENANT_MODEL_ORIGINS", "https://*,http://127.0.0.1"));
    let (mut cp, _nodes) = cluster(Path::new(BIN), dir.path(), &env, &agents(1));
    let token = cp.tenant("team-a");
    let r = cp
        .api(&token)
        .register_model("@team-a.m", "v1", &w.spec(&origin.url()));
    assert_eq!(r.status, 201, "{:#}", r.body);

    cp.restart_with(&[("CALDERA_TENANT_MODEL_ORIGINS", "https://*")]);
    assert!(
        wait_until(
            Duration::from_secs(30),
            || caldera_chaos_tests::nodes_connected(&cp) == 1
        ),
        "the agent is back"
    );
    let api = cp.api(&token);
    submit(&api, &model_service("svc", "@team-a.m:v1", 1, one_core()));
    let refused = || {
        cp.operator().get("/v1/events?limit=500").data()["events"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["message"].as_str())
            .any(|m| m.contains("origin refused") && m.contains("127.0.0.1"))
    };
    let said = wait_until(Duration::from_secs(30), refused);
    let events = cp.operator().get("/v1/events?limit=500");
    assert!(
        said,
        "the node refuses the read and says why: {:#}",
        events.body
    );
    assert_eq!(
        origin.gets(),
        Vec::<u64>::new(),
        "no request reached the store"
    );
    assert_eq!(origin.bytes_served(), 0);
}
