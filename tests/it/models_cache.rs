//! A node's weight cache on disk, with real processes and
//! real files: under a small `--cache-gb`, LRU eviction deletes the least
//! recently used version's file and never one a running workload uses; a
//! cached copy truncated or with one byte flipped is found before use and
//! fetched again, so the workload always reads the registered bytes.
use caldera_chaos_tests::models::{
    cached_versions, copy_on, model_service, on_node, one_core, printed_sha256, release_service,
    submit, wait_running,
};
use caldera_chaos_tests::origin::{Origin, OriginOptions};
use caldera_chaos_tests::weights::{cached_copy, flip_byte, generate, sha256_file, WeightsFile};
use caldera_chaos_tests::{cluster, wait_until, Agent, AgentSpec, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

/// A control plane and one cached agent, `node-0`, of `cache_gb`.
fn one_node(dir: &Path, cache_gb: &str) -> (ControlPlane, Vec<Agent>) {
    let spec = AgentSpec::with_cache("node-0", "1xA100-80GB", cache_gb);
    cluster(Path::new(BIN), dir, ENV, &[spec])
}

/// Runs a one-replica service `id` of `model` on node-0 and checks the bytes
/// its process read.
fn serve(api: &Api, id: &str, model: &str, w: &WeightsFile) {
    submit(
        api,
        &on_node(model_service(id, model, 1, one_core()), "node-0"),
    );
    let replica = format!("{id}.r0");
    wait_running(api, &replica, 60);
    assert_eq!(printed_sha256(api, &replica, 20), w.sha256, "{replica}");
}

/// Versions v1..v4 of model `m`, 3 MB each (`seed` + i), registered from
/// `file://` copies: a 10 MB cache holds three of them, not a fourth.
fn four_versions(op: &Api, dir: &Path, seed: u64) -> Vec<WeightsFile> {
    const SIZE: u64 = 3_000_000;
    let versions: Vec<WeightsFile> = (1..=4)
        .map(|i| generate(&dir.join(format!("nfs/m-v{i}.bin")), SIZE, seed + i).unwrap())
        .collect();
    for (i, w) in versions.iter().enumerate() {
        let r = op.register_model("m", &format!("v{}", i + 1), &w.spec(&w.file_uri()));
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    versions
}

#[test]
fn eviction_deletes_the_least_recently_used_unused_version_and_never_one_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, nodes) = one_node(dir.path(), "0.01");
    let op = cp.operator();
    let versions = four_versions(&op, dir.path(), 10);
    let api = cp.api(&cp.tenant("team-a"));
    // v1 is used first and stays in use: the oldest, but not evictable.
    serve(&api, "keep", "m:v1", &versions[0]);
    // v2 then v3 are used and released: v2 is the least recently used.
    serve(&api, "b", "m:v2", &versions[1]);
    release_service(&api, "b", 1);
    serve(&api, "c", "m:v3", &versions[2]);
    release_service(&api, "c", 1);
    // v4 needs room: v2 goes.
    serve(&api, "d", "m:v4", &versions[3]);

    let data = &nodes[0].data_dir;
    assert_eq!(
        cached_copy(data, &versions[1].sha256),
        None,
        "v2's file is deleted"
    );
    for i in [0, 2, 3] {
        let copy = cached_copy(data, &versions[i].sha256)
            .unwrap_or_else(|| panic!("v{} was evicted", i + 1));
        assert_eq!(sha256_file(&copy).unwrap(), versions[i].sha256);
    }
    let mut want: Vec<String> = [0, 2, 3]
        .iter()
        .map(|i| versions[*i].sha256.clone())
        .collect();
    want.sort();
    // The cache report comes with heartbeats: wait for the one after v4.
    let (mut cache, mut held) = (Value::Null, Vec::new());
    wait_until(Duration::from_secs(15), || {
        cache = op.node_cache("node-0");
        held = cached_versions(&cache);
        held.sort();
        held == want
    });
    assert_eq!(held, want, "{cache:#}");
    assert_eq!(cache["counters"]["evictions"], 1, "{cache:#}");
    assert!(
        cache["used_bytes"].as_u64().unwrap_or(u64::MAX) <= 10_000_000,
        "{cache:#}"
    );
    let v2 = op.model_version("m", "v2");
    assert_eq!(copy_on(&v2, "node-0").as_deref(), Some("evicted"), "{v2:#}");
    // The replica using v1 still runs on its copy.
    assert_eq!(api.task("keep.r0")["state"], "running");
}

/// Room in a node's cache that appears with no allocation released (here:
/// an operator unpins a version) lets a waiting task in. The Scheduler used
/// to look again at waiting tasks only after a release, so a task turned
/// down for cache room waited for good whenever the cache report showing the
/// room came after the release's own pass — the 60 s wait of the test above,
/// seen once under load. This test fails on every run without the fix.
#[test]
fn a_task_waiting_for_cache_room_starts_when_an_unpin_makes_room() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, nodes) = one_node(dir.path(), "0.01");
    let op = cp.operator();
    let versions = four_versions(&op, dir.path(), 30);
    // Three pinned copies fill the 10 MB cache: no room for a fourth.
    for v in ["v1", "v2", "v3"] {
        let path = format!("/v1/models/m/versions/{v}/prewarm");
        let r = op.post(&path, r#"{"nodes":["node-0"],"pin":true}"#);
        assert_eq!(r.status, 202, "{v}: {:#}", r.body);
    }
    let mut cache = Value::Null;
    let pinned = wait_until(Duration::from_secs(30), || {
        cache = op.node_cache("node-0");
        cache["entries"]
            .as_array()
            .is_some_and(|e| e.iter().filter(|e| e["pinned"] == true).count() == 3)
    });
    assert!(pinned, "three pinned copies: {cache:#}");
    let api = cp.api(&cp.tenant("team-a"));
    submit(
        &api,
        &on_node(model_service("d", "m:v4", 1, one_core()), "node-0"),
    );
    let waiting = api.wait_task("d.r0", 20, "turned down for cache room", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("do not fit the node cache"))
    });
    assert_eq!(waiting["state"], "queued", "{waiting:#}");
    let r = op.put("/v1/models/m/versions/v1/pin", r#"{"pinned":false}"#);
    assert_eq!(r.status, 200, "{:#}", r.body);
    wait_running(&api, "d.r0", 30);
    assert_eq!(printed_sha256(&api, "d.r0", 20), versions[3].sha256);
    // v1, unpinned and unused, made the room.
    assert_eq!(cached_copy(&nodes[0].data_dir, &versions[0].sha256), None);
}

/// The damaged copy is found and reported `evicted`, and the version's actor
/// must believe that eviction over the node's last cache report (sent before
/// the check, still listing the copy): believing the report would mark the
/// copy verified and send no warm, so the start would wait in warming for
/// good. Without that check this test fails on every run (the task never
/// reaches running within 60 s).
#[test]
fn a_truncated_or_flipped_cached_copy_is_found_before_use_and_fetched_again() {
    const SIZE: u64 = 4 << 20;
    let dir = tempfile::tempdir().unwrap();
    let w = generate(&dir.path().join("origin/m.bin"), SIZE, 21).unwrap();
    let origin = Origin::serve(&w.path, OriginOptions::default()).unwrap();
    let (cp, nodes) = one_node(dir.path(), "1");
    let op = cp.operator();
    let r = op.register_model("m", "v1", &w.spec(&origin.url()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(&cp.tenant("team-a"));
    serve(&api, "first", "m:v1", &w);
    release_service(&api, "first", 1);
    assert_eq!(origin.bytes_served(), SIZE);
    let data = &nodes[0].data_dir;

    type Damage = fn(&Path);
    let damages: [(&str, Damage); 2] = [
        ("truncated", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(SIZE / 2).unwrap();
        }),
        ("flipped", |p| flip_byte(p, SIZE / 3).unwrap()),
    ];
    for (n, (what, damage)) in damages.iter().enumerate() {
        let copy = cached_copy(data, &w.sha256).expect("a verified copy to damage");
        damage(&copy);
        assert_ne!(sha256_file(&copy).unwrap(), w.sha256);
        let served = origin.bytes_served();
        let id = format!("after-{what}");
        // The workload must read the registered bytes, not the damaged ones.
        serve(&api, &id, "m:v1", &w);
        release_service(&api, &id, 1);
        assert!(
            origin.bytes_served() > served,
            "{what}: nothing was fetched again (origin GETs at {:?})",
            origin.gets()
        );
        let c = op.counters_when(&["node-0"], |c| c[0].corrupt_found > n as u64)[0];
        assert_eq!(c.corrupt_found, n as u64 + 1, "{what}: {c:#?}");
        let copy = cached_copy(data, &w.sha256).expect("the copy fetched again");
        assert_eq!(sha256_file(&copy).unwrap(), w.sha256, "{what}");
    }
}
