//! Warmup under faults, with real processes: storage
//! that never answers fails the task once `warming-timeout-ms` passes, with
//! a reason naming the stage and the source; a peer killed mid-transfer
//! leaves the receiver to resume from another source; an agent killed -9
//! mid-fetch resumes from its partial file after a restart, and a partial
//! damaged while it was down is never used.
use caldera_chaos_tests::models::{
    model_service, on_node, one_core, printed_sha256, release_service, submit, task_events,
    wait_running,
};
use caldera_chaos_tests::origin::{Origin, OriginOptions};
use caldera_chaos_tests::weights::{
    cached_copy, flip_byte, generate, partial_copy, sha256_file, WeightsFile,
};
use caldera_chaos_tests::{cluster, wait_until, Agent, AgentSpec, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const SIZE: u64 = 8 << 20;
/// What a slowed peer serves, megabits/s (`--peer-max-mbps`): 2 MB/s, so
/// 8 MiB takes ~4 s.
const PEER_MBPS: &str = "16";
/// The emulated slow origin of the kill -9 tests, bytes/s: 8 MiB takes ~4 s.
const SLOW_ORIGIN: u64 = 2_000_000;

const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

fn weights(dir: &Path, seed: u64) -> WeightsFile {
    generate(&dir.join("origin/m.bin"), SIZE, seed).unwrap()
}

fn register(cp: &ControlPlane, uri: &str, w: &WeightsFile) {
    let r = cp.operator().register_model("m", "v1", &w.spec(uri));
    assert_eq!(r.status, 201, "{:#}", r.body);
}

/// Every reason in `v`'s history and its failure, joined.
fn reasons(v: &Value) -> String {
    let mut out: Vec<String> = v["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .filter_map(|t| t["reason"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    out.extend(v["failure"].as_str().map(str::to_string));
    out.join(" | ")
}

#[test]
fn a_warming_timeout_fails_the_task_naming_the_stage_and_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let w = weights(dir.path(), 31);
    let hung = Origin::serve(&w.path, OriginOptions::silent()).unwrap();
    let mut env = ENV.to_vec();
    env.push(("CALDERA_WARMING_TIMEOUT_MS", "2000"));
    let (cp, _nodes) = cluster(
        Path::new(BIN),
        dir.path(),
        &env,
        &[AgentSpec::with_cache("node-0", "1xA100-80GB", "1")],
    );
    register(&cp, &hung.url(), &w);
    let api = cp.api(&cp.tenant("team-a"));
    let mut body = model_service("stuck", "m:v1", 1, one_core());
    body["max_retries"] = serde_json::json!(0);
    submit(&api, &body);
    let v = api.wait_task("stuck.r0", 60, "a failure in warming", |v| {
        v["state"] == "failed" || reasons(v).contains("warming")
    });
    let why = reasons(&v).to_lowercase();
    assert!(why.contains("warming"), "the stage is not named: {v:#}");
    assert!(why.contains("origin"), "the source is not named: {v:#}");
    assert!(
        !hung.gets().is_empty(),
        "the agent never asked the origin (GETs {:?})",
        hung.gets()
    );
}

/// Bytes in the partial file of `sha256` under `data` (0 without one).
fn partial_len(data: &Path, sha256: &str) -> u64 {
    partial_copy(data, sha256)
        .and_then(|p| std::fs::metadata(p).ok())
        .map_or(0, |m| m.len())
}

/// The receiver's fetch and its source, from its cache report.
fn fetching_from(op: &Api, node: &str) -> Option<(String, u64)> {
    let cache = op.node_cache(node);
    cache["fetching"].as_array()?.iter().find_map(|f| {
        let done = f["bytes_done"].as_u64()?;
        let source = f["source"].as_str()?;
        (done > 0 && source.starts_with("peer ")).then(|| (source.to_string(), done))
    })
}

#[test]
fn a_peer_killed_mid_transfer_and_the_receiver_resumes_from_another_source() {
    let dir = tempfile::tempdir().unwrap();
    let w = weights(dir.path(), 32);
    let origin = Origin::serve(&w.path, OriginOptions::default()).unwrap();
    let slow = |name: &str| {
        AgentSpec::with_cache(name, "1xA100-80GB", "1").flag("peer-max-mbps", PEER_MBPS)
    };
    let specs = [
        slow("node-0"),
        slow("node-1"),
        AgentSpec::with_cache("node-2", "1xA100-80GB", "1"),
    ];
    let (cp, mut nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    register(&cp, &origin.url(), &w);
    // Two peers hold verified copies before the receiver asks.
    let r = op.post(
        "/v1/models/m/versions/v1/prewarm",
        r#"{"nodes":["node-0","node-1"]}"#,
    );
    assert_eq!(r.status, 202, "{:#}", r.body);
    let both = wait_until(Duration::from_secs(60), || {
        let v = op.model_version("m", "v1");
        ["node-0", "node-1"]
            .iter()
            .all(|n| caldera_chaos_tests::models::copy_on(&v, n).as_deref() == Some("verified"))
    });
    assert!(both, "prewarm: {:#}", op.model_version("m", "v1"));
    let origin_before = origin.bytes_served();
    let served_before: Vec<u64> = ["node-0", "node-1"]
        .iter()
        .map(|n| op.counters(n).bytes_served)
        .collect();

    let tenant = "team-a";
    let api = cp.api(&cp.tenant(tenant));
    submit(
        &api,
        &on_node(model_service("recv", "m:v1", 1, one_core()), "node-2"),
    );
    let mut seen = None;
    let reading = wait_until(Duration::from_secs(30), || {
        seen = fetching_from(&op, "node-2");
        seen.is_some()
    });
    assert!(
        reading,
        "node-2 never read a peer: {:#}",
        op.node_cache("node-2")
    );
    let (source, _) = seen.unwrap_or_default();
    let killed = source.trim_start_matches("peer ").to_string();
    let (k, other) = if killed == "node-0" { (0, 1) } else { (1, 0) };
    nodes[k].kill9();
    let at_kill = partial_len(&nodes[2].data_dir, &w.sha256);
    assert!(
        at_kill > 0 && at_kill < SIZE,
        "the kill was not mid-transfer: {at_kill}"
    );

    wait_running(&api, "recv.r0", 60);
    assert_eq!(printed_sha256(&api, "recv.r0", 20), w.sha256);
    let copy = cached_copy(&nodes[2].data_dir, &w.sha256).expect("a verified copy");
    assert_eq!(sha256_file(&copy).unwrap(), w.sha256);
    // Resumed, not restarted: what the other sources sent after the kill
    // is less than the whole file.
    let other_node = format!("node-{other}");
    let received = op.counters_when(&["node-2"], |c| c[0].bytes_fetched() >= SIZE);
    assert!(received[0].bytes_fetched() >= SIZE, "{received:#?}");
    let rest = (op.counters(&other_node).bytes_served - served_before[other])
        + (origin.bytes_served() - origin_before);
    assert!(
        rest > 0 && rest < SIZE,
        "after the kill at {at_kill} bytes the other sources sent {rest} of {SIZE}"
    );
    // Its progress events name the source it resumed from.
    let events = task_events(&op, tenant, "recv.r0").join("\n");
    let resumed = [format!("from peer node-{other}"), "from origin".to_string()];
    assert!(
        resumed.iter().any(|s| events.contains(s.as_str())),
        "no warming progress names the source after {source}: {events}"
    );
}

/// A cluster of one slow-origin agent with a fetch cut by kill -9 at
/// between 1 MiB and the whole file; returns the size of its partial file.
fn cut_fetch(dir: &Path, seed: u64) -> (ControlPlane, Agent, Origin, WeightsFile, Api, u64) {
    let w = weights(dir, seed);
    let origin = Origin::serve(&w.path, OriginOptions::capped(SLOW_ORIGIN)).unwrap();
    let (cp, mut nodes) = cluster(
        Path::new(BIN),
        dir,
        ENV,
        &[AgentSpec::with_cache("node-0", "1xA100-80GB", "1")],
    );
    register(&cp, &origin.url(), &w);
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, &model_service("cut", "m:v1", 1, one_core()));
    let mut agent = nodes.remove(0);
    let data = agent.data_dir.clone();
    let midway = wait_until(Duration::from_secs(30), || {
        partial_len(&data, &w.sha256) >= 1 << 20
    });
    assert!(midway, "no partial file grew: {:#}", api.task("cut.r0"));
    agent.kill9();
    let cut = partial_len(&data, &w.sha256);
    assert!(cut > 0 && cut < SIZE, "not cut mid-fetch: {cut}");
    assert_ne!(api.task("cut.r0")["state"], "running");
    (cp, agent, origin, w, api, cut)
}

#[test]
fn kill_9_of_an_agent_mid_fetch_then_restart_resumes_from_its_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_cp, mut agent, origin, w, api, cut) = cut_fetch(dir.path(), 33);
    origin.set_bytes_per_s(None);
    agent.start_again();
    wait_running(&api, "cut.r0", 60);
    assert_eq!(printed_sha256(&api, "cut.r0", 20), w.sha256);
    assert_eq!(partial_copy(&agent.data_dir, &w.sha256), None);
    let copy = cached_copy(&agent.data_dir, &w.sha256).expect("a verified copy");
    assert_eq!(sha256_file(&copy).unwrap(), w.sha256);
    let gets = origin.gets();
    assert!(
        gets.iter().skip(1).any(|at| *at > 0 && *at <= cut),
        "the restarted agent did not resume from its {cut} bytes: GETs at {gets:?}"
    );
}

#[test]
fn a_partial_damaged_while_the_agent_was_down_is_never_used() {
    let dir = tempfile::tempdir().unwrap();
    let (_cp, mut agent, origin, w, api, cut) = cut_fetch(dir.path(), 34);
    let partial = partial_copy(&agent.data_dir, &w.sha256).expect("the partial file");
    flip_byte(&partial, cut / 2).unwrap();
    origin.set_bytes_per_s(None);
    agent.start_again();
    wait_running(&api, "cut.r0", 60);
    // Resuming trusts the partial's bytes; the checksum over the whole file
    // must catch the damage, and the workload read the registered bytes.
    assert_eq!(printed_sha256(&api, "cut.r0", 20), w.sha256);
    let copy = cached_copy(&agent.data_dir, &w.sha256).expect("a verified copy");
    assert_eq!(sha256_file(&copy).unwrap(), w.sha256);
    assert_eq!(partial_copy(&agent.data_dir, &w.sha256), None);
}

/// The copy on `node` in a version view, as the API shows it.
fn copy_view(v: &Value, node: &str) -> Value {
    v["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|c| c["node"] == node))
        .cloned()
        .unwrap_or(Value::Null)
}

/// `model_warmup` events that name `model` (operator view).
fn warmup_events(op: &Api, model: &str) -> Vec<String> {
    op.get("/v1/events?kind=model_warmup&limit=1000").data()["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["message"].as_str())
                .filter(|m| m.contains(model))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// A cluster of one caching agent with `bad:v1` registered at an origin
/// that answers 500 to every GET and `good:v1` at a healthy one, warm
/// retries on the schedule `retry` (first, max, attempts).
fn bad_and_good(
    dir: &Path,
    retry: (&str, &str, &str),
) -> (ControlPlane, Vec<Agent>, Origin, Origin, WeightsFile) {
    let bad_w = generate(&dir.join("origin/bad.bin"), SIZE, 35).unwrap();
    let good_w = generate(&dir.join("origin/good.bin"), SIZE, 36).unwrap();
    let broken = Origin::serve(&bad_w.path, OriginOptions::broken()).unwrap();
    let good = Origin::serve(&good_w.path, OriginOptions::default()).unwrap();
    let mut env = ENV.to_vec();
    env.push(("CALDERA_WARM_RETRY_FIRST_MS", retry.0));
    env.push(("CALDERA_WARM_RETRY_MAX_MS", retry.1));
    env.push(("CALDERA_WARM_RETRY_ATTEMPTS", retry.2));
    let (cp, nodes) = cluster(
        Path::new(BIN),
        dir,
        &env,
        &[AgentSpec::with_cache("node-0", "1xA100-80GB", "1")],
    );
    let op = cp.operator();
    for (name, origin, w) in [("bad", &broken, &bad_w), ("good", &good, &good_w)] {
        let r = op.register_model(name, "v1", &w.spec(&origin.url()));
        assert_eq!(r.status, 201, "{:#}", r.body);
    }
    (cp, nodes, broken, good, good_w)
}

#[test]
fn a_failing_origin_is_read_with_backoff_a_healthy_version_warms_meanwhile_and_a_release_stops_the_reads(
) {
    let dir = tempfile::tempdir().unwrap();
    // Waits 300 ms, 600 ms, then 1.2 s each; never gives up in this test.
    let (cp, _nodes, broken, good, good_w) = bad_and_good(dir.path(), ("300", "1200", "1000"));
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, &model_service("bad", "bad:v1", 1, one_core()));
    assert!(
        wait_until(Duration::from_secs(30), || !broken.gets().is_empty()),
        "the agent never read the broken origin: {:#}",
        api.task("bad.r0")
    );
    // A healthy version on the same node warms while the other fails.
    submit(&api, &model_service("good", "good:v1", 1, one_core()));
    wait_running(&api, "good.r0", 60);
    assert_eq!(printed_sha256(&api, "good.r0", 20), good_w.sha256);
    assert!(!good.gets().is_empty());

    // 6 s after the first read: at 0 s, at once, +0.3, +0.6, then every
    // 1.2 s is 8 reads at most (a tight loop made ~40 a second).
    let first = broken.gets_at()[0];
    std::thread::sleep(Duration::from_secs(6).saturating_sub(first.elapsed()));
    let at = broken.gets_at();
    let in_window = at
        .iter()
        .filter(|t| t.duration_since(first) <= Duration::from_secs(6))
        .count();
    assert!(
        (4..=9).contains(&in_window),
        "{in_window} reads of the broken origin in 6 s (backoff 0, 0.3, 0.6, 1.2 s...)"
    );
    // From the third read on, each waited out its backoff (a timer fires
    // late, never early).
    for (i, pair) in at.windows(2).enumerate().skip(1) {
        let gap = pair[1].duration_since(pair[0]);
        assert!(
            gap >= Duration::from_millis(290),
            "read {} came {gap:?} after read {} (backoff at least 300 ms)",
            i + 2,
            i + 1
        );
    }
    let v = op.model_version("bad", "v1");
    let c = copy_view(&v, "node-0");
    assert!(
        c["failures"].as_u64().unwrap_or(0) >= 3,
        "the failures are not counted: {v:#}"
    );
    let reason = c["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("origin") && reason.contains("500"),
        "the reason does not say what failed: {v:#}"
    );
    // Events are coalesced: not one per read.
    let events = warmup_events(&op, "bad:v1");
    assert!(
        events.len() <= 5,
        "{} warmup events for {} reads: {events:#?}",
        events.len(),
        at.len()
    );

    // Released: nothing needs it on node-0, so the reads stop.
    release_service(&api, "bad", 1);
    let dropped = wait_until(Duration::from_secs(10), || {
        copy_view(&op.model_version("bad", "v1"), "node-0").is_null()
    });
    assert!(
        dropped,
        "the copy is still tried after the release: {:#}",
        op.model_version("bad", "v1")
    );
    let after_release = broken.gets().len();
    // Past two of the longest backoffs.
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(
        broken.gets().len(),
        after_release,
        "reads after the release was seen"
    );
    let events = warmup_events(&op, "bad:v1").join("\n");
    assert!(events.contains("nothing needs"), "{events}");
}

#[test]
fn a_copy_whose_reads_keep_failing_gives_up_says_why_and_a_prewarm_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    // Reads at 0 s, at once, +0.1 s, +0.2 s: the fourth failure gives up.
    let (cp, _nodes, broken, _good, _) = bad_and_good(dir.path(), ("100", "200", "4"));
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    submit(&api, &model_service("bad", "bad:v1", 1, one_core()));
    let failed = wait_until(Duration::from_secs(30), || {
        copy_view(&op.model_version("bad", "v1"), "node-0")["copy"] == "failed"
    });
    let v = op.model_version("bad", "v1");
    assert!(failed, "the copy never gave up: {v:#}");
    let c = copy_view(&v, "node-0");
    assert_eq!(c["failures"], 4, "{v:#}");
    let reason = c["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("origin") && reason.contains("500"),
        "the failed copy does not say why: {v:#}"
    );
    assert_eq!(broken.gets().len(), 4, "one read per attempt");
    // Given up: no reads however long the task waits.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(broken.gets().len(), 4, "reads after giving up");
    let events = warmup_events(&op, "bad:v1").join("\n");
    assert!(events.contains("gave up"), "{events}");

    // The operator asking again is a change: the node reads again.
    let r = op.post(
        "/v1/models/bad/versions/v1/prewarm",
        r#"{"nodes":["node-0"]}"#,
    );
    assert_eq!(r.status, 202, "{:#}", r.body);
    assert!(
        wait_until(Duration::from_secs(10), || broken.gets().len() > 4),
        "a prewarm did not read the failed copy again: {:#}",
        op.model_version("bad", "v1")
    );
}
