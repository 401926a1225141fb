//! Endpoints and readiness, with real processes: a
//! control plane, real agents, and `infer-server` replicas. A replica is
//! listed in `GET /v1/tasks/{service}/endpoints` only once its readiness
//! probe passes (never, for one that is never ready); the listed address
//! and port answer with the model version; a long poll returns when the
//! list changes, else at its timeout. Every workload gets a port of its own
//! on its node (CALDERA_PORT), kept across an agent restart (adoption),
//! and never handed out twice.
use caldera_chaos_tests::cluster::{cluster, AgentSpec};
use caldera_chaos_tests::models::{logged, submit, wait_running};
use caldera_chaos_tests::origin::{Origin, OriginOptions};
use caldera_chaos_tests::weights::generate;
use caldera_chaos_tests::{free_port, nodes_connected, wait_until, Api};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const SERVER: &str = env!("CARGO_BIN_EXE_infer-server");

/// A range of `n` ports of this test's own, so agents of tests running at
/// the same time do not hand out the same ones.
fn port_range(n: u16) -> (u16, String) {
    let first = free_port().clamp(1024, 65535 - n);
    (first, format!("{first}-{}", first + n - 1))
}

/// A service of `replicas` infer-servers serving `model`, probed on /ready.
fn inference(id: &str, model: &str, replicas: u32, env: Value) -> Value {
    json!({
        "task_id": id, "task_type": "inference", "replicas": replicas, "model": model,
        "resources": {"cpu": {"cores": 1}}, "command": [SERVER], "env": env,
        "readiness": {"http_path": "/ready", "period_s": 1, "timeout_s": 1},
    })
}

fn endpoints(api: &Api, service: &str, query: &str) -> Value {
    let r = api.get(&format!("/v1/tasks/{service}/endpoints{query}"));
    assert_eq!(r.status, 200, "{:#}", r.body);
    r.data().clone()
}

fn listed(answer: &Value) -> Vec<Value> {
    answer["endpoints"].as_array().cloned().unwrap_or_default()
}

#[test]
fn only_ready_replicas_are_listed_and_they_answer_with_their_version() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = port_range(20);
    let spec = AgentSpec::with_cache("node-1", "1xA100-80GB", "1").flag("replica-ports", &range);
    let (cp, _agents) = cluster(Path::new(BIN), dir.path(), &[], &[spec]);
    let w = generate(&dir.path().join("nfs/llm-v3.bin"), 64 * 1024, 3).unwrap();
    let r = cp
        .operator()
        .register_model("llm", "v3", &w.spec(&w.file_uri()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(&cp.tenant("team-a"));
    submit(
        &api,
        &inference("chat", "llm:v3", 2, json!({"INFER_LOAD_MS": "6000"})),
    );
    submit(
        &api,
        &inference("stuck", "llm:v3", 1, json!({"INFER_NEVER_READY": "1"})),
    );

    let r0 = api.wait_task("chat.r0", 60, "running with a port", |v| {
        v["state"] == "running" && v["endpoint"]["port"].is_u64()
    });
    wait_running(&api, "chat.r1", 60);
    wait_running(&api, "stuck.r0", 60);
    // Running, listening, still loading: not ready, not listed.
    let first = endpoints(&api, "chat", "");
    assert_eq!(listed(&first), Vec::<Value>::new(), "listed before ready");
    assert_eq!(r0["ready"], false, "{r0:#}");
    assert_eq!(r0["serving_model"], "llm:v3", "{r0:#}");
    assert_eq!(r0["generation"], 0, "{r0:#}");
    assert!(r0["endpoint"]["port"].as_u64().is_some(), "{r0:#}");

    // The long poll returns on each change, until both are listed.
    let begun = Instant::now();
    let mut rev = first["revision"].as_u64().unwrap();
    let mut answer = first;
    while listed(&answer).len() < 2 && begun.elapsed() < Duration::from_secs(60) {
        let asked = Instant::now();
        answer = endpoints(&api, "chat", &format!("?wait=30&since={rev}"));
        let new = answer["revision"].as_u64().unwrap();
        assert!(new > rev, "the revision went from {rev} to {new}");
        assert!(
            asked.elapsed() < Duration::from_secs(29),
            "it changed, yet the poll waited out"
        );
        rev = new;
    }
    let list = listed(&answer);
    assert_eq!(list.len(), 2, "{answer:#}");
    assert!(
        begun.elapsed() + Duration::from_secs(1) >= Duration::from_secs(3),
        "listed before the servers loaded"
    );
    let mut ports = BTreeSet::new();
    for e in &list {
        assert_eq!(e["node"], "node-1");
        assert_eq!(e["model"], "llm:v3");
        let port = e["port"].as_u64().unwrap();
        ports.insert(port);
        let at = format!("{}:{port}", e["address"].as_str().unwrap());
        let info = Api::new(&at, None).get("/infer");
        assert_eq!(info.status, 200, "{at}: {:#}", info.body);
        assert_eq!(info.body["version"], "v3", "{at}: {:#}", info.body);
        assert_eq!(info.body["port"], port);
        let replica = e["replica"].as_str().unwrap();
        assert_eq!(api.task(replica)["ready"], true);
    }
    assert_eq!(ports.len(), 2, "two replicas on one port: {list:?}");

    // Unchanged: a poll waits out its timeout and answers the same list.
    let asked = Instant::now();
    let same = endpoints(&api, "chat", &format!("?wait=2&since={rev}"));
    assert!(asked.elapsed() >= Duration::from_millis(1900));
    assert_eq!(same["revision"], rev);
    assert_eq!(listed(&same), list);

    // Never ready: never listed, though it runs and listens.
    let stuck = endpoints(&api, "stuck", "");
    assert_eq!(listed(&stuck), Vec::<Value>::new());
    let s0 = api.task("stuck.r0");
    assert_eq!(
        (s0["state"].as_str(), s0["ready"].as_bool()),
        (Some("running"), Some(false))
    );

    // Bad asks are named; another tenant's service is not found.
    let bad = api.get("/v1/tasks/chat/endpoints?wait=61");
    assert_eq!(bad.status, 400, "{:#}", bad.body);
    assert!(bad.body.to_string().contains("wait"), "{:#}", bad.body);
    assert_eq!(api.get("/v1/tasks/chat.r0/endpoints").status, 422);
    let other = cp.api(&cp.tenant("team-b"));
    assert_eq!(other.get("/v1/tasks/chat/endpoints").status, 404);
}

#[test]
fn ports_are_unique_on_a_node_and_kept_across_an_agent_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (first, range) = port_range(8);
    let spec = AgentSpec::new("node-1", "1xA100-80GB").flag("replica-ports", &range);
    let (cp, mut agents) = cluster(Path::new(BIN), dir.path(), &[], &[spec]);
    let api = cp.api(&cp.tenant("team-a"));
    // No probe: ready once started. Each prints the port it was given.
    let svc = |replicas: u32| {
        json!({"task_id": "web", "task_type": "inference", "replicas": replicas,
            "resources": {"cpu": {"cores": 1}},
            "command": ["sh", "-c", "echo port=$CALDERA_PORT; exec sleep 3600"]})
    };
    submit(&api, &svc(3));
    let ports_of = |api: &Api, n: usize| -> Vec<u64> {
        (0..n)
            .map(|i| {
                // Running and its port come with the start's own event.
                let v = api.wait_task(&format!("web.r{i}"), 60, "running with a port", |v| {
                    v["state"] == "running" && v["endpoint"]["port"].is_u64()
                });
                v["endpoint"]["port"].as_u64().unwrap_or(0)
            })
            .collect()
    };
    let before = ports_of(&api, 3);
    let unique: BTreeSet<u64> = before.iter().copied().collect();
    assert_eq!(unique.len(), 3, "a port handed out twice: {before:?}");
    for (i, p) in before.iter().enumerate() {
        assert!(
            (u64::from(first)..u64::from(first) + 8).contains(p),
            "{p} outside {range}"
        );
        let printed = (0..50).find_map(|_| {
            let got = logged(&api, &format!("web.r{i}"), "port");
            if got.is_none() {
                std::thread::sleep(Duration::from_millis(100));
            }
            got
        });
        assert_eq!(printed, Some(p.to_string()), "web.r{i}'s CALDERA_PORT");
    }
    assert!(wait_until(Duration::from_secs(20), || listed(&endpoints(
        &api, "web", ""
    ))
    .len()
        == 3));

    // The agent restarts and adopts the three: same ports, and a fourth
    // replica gets none of theirs (the restarted agent starts its search
    // at the range's first port, which the first replica holds).
    agents[0].restart();
    assert!(wait_until(Duration::from_secs(30), || nodes_connected(&cp) == 1));
    assert_eq!(
        api.put("/v1/tasks/web/replicas", r#"{"replicas": 4}"#)
            .status,
        200
    );
    let after = ports_of(&api, 4);
    assert_eq!(&after[..3], &before[..], "adopted replicas changed ports");
    assert!(
        !before.contains(&after[3]),
        "port {} handed out twice",
        after[3]
    );
    assert!(wait_until(Duration::from_secs(20), || listed(&endpoints(
        &api, "web", ""
    ))
    .len()
        == 4));
}

/// Two agents on one host with the same `replica-ports` range (as `caldera
/// up` runs them), each starting a replica whose server binds its port a
/// second after it starts. Checking that a port is free is not enough —
/// neither server has bound it yet, so both agents would find the range's
/// first port free and hand it out twice: the second server would exit
/// "Address already in use" while its readiness probe passed against the
/// other node's server. Ports are claimed host-wide; this fails on every
/// run without that.
#[test]
fn two_agents_on_one_host_never_give_their_replicas_the_same_port() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = port_range(10);
    let specs: Vec<AgentSpec> = ["node-1", "node-2"]
        .iter()
        .map(|n| AgentSpec::with_cache(n, "1xA100-80GB", "1").flag("replica-ports", &range))
        .collect();
    let (cp, _agents) = cluster(Path::new(BIN), dir.path(), &[], &specs);
    let w = generate(&dir.path().join("nfs/llm-v3.bin"), 64 * 1024, 4).unwrap();
    let r = cp
        .operator()
        .register_model("llm", "v3", &w.spec(&w.file_uri()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(&cp.tenant("team-a"));
    let mut spec = inference("late", "llm:v3", 2, json!({}));
    spec["resources"] = json!({"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 1}});
    spec["command"] = json!(["sh", "-c", format!("sleep 1; exec {SERVER}")]);
    submit(&api, &spec);
    let mut list = Vec::new();
    let both = wait_until(Duration::from_secs(30), || {
        list = listed(&endpoints(&api, "late", ""));
        list.len() == 2
    });
    assert!(both, "two ready replicas: {list:#?}");
    let nodes: BTreeSet<&str> = list.iter().filter_map(|e| e["node"].as_str()).collect();
    assert_eq!(nodes.len(), 2, "one replica per node: {list:#?}");
    let ports: BTreeSet<u64> = list.iter().filter_map(|e| e["port"].as_u64()).collect();
    assert_eq!(ports.len(), 2, "one port handed out twice: {list:#?}");
    for i in 0..2 {
        let replica = format!("late.r{i}");
        let v = api.task(&replica);
        assert_eq!(v["state"], "running", "{v:#}");
        assert_eq!(v["attempts"], 1, "{replica} was started again: {v:#}");
    }
}

/// Readiness is persisted before it counts: a replica whose `ready` commit
/// fails is not listed, and its rebuilt task hears it again from the resync
/// it asks its node for (the node's digest carries each workload's last
/// readiness), then lists it.
#[test]
fn a_readiness_whose_commit_fails_is_heard_again_from_the_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = port_range(4);
    let spec = AgentSpec::new("node-1", "1xA100-80GB").flag("replica-ports", &range);
    let (cp, _agents) = cluster(Path::new(BIN), dir.path(), &[], &[spec]);
    let api = cp.api(&cp.tenant("team-a"));
    let op = cp.operator();
    // Ready 3 s after it starts (the probe finds the file its command writes).
    let flag = dir.path().join("slow-ready").display().to_string();
    let svc = json!({"task_id": "slow", "task_type": "inference", "replicas": 1,
        "resources": {"cpu": {"cores": 1}},
        "command": ["sh", "-c", format!("sleep 3; touch {flag}; exec sleep 3600")],
        "readiness": {"command": ["test", "-e", flag], "period_s": 1}});
    submit(&api, &svc);
    api.wait_task("slow.r0", 60, "running with a port", |v| {
        v["state"] == "running" && v["endpoint"]["port"].is_u64()
    });
    let (_, refused) = op.commit_counts("task_record");
    op.arm_fault("task_record", 0, 1);
    op.wait_refused("task_record", refused + 1, 20);
    assert!(
        wait_until(Duration::from_secs(20), || {
            listed(&endpoints(&api, "slow", "")).len() == 1
        }),
        "never listed after its readiness commit failed: {:#}",
        api.task("slow.r0")
    );
    assert_eq!(api.task("slow.r0")["ready"], true);
}

/// A replica whose `running` (and with it the port of the start's own
/// event) could not be recorded learns its endpoint from the resync its
/// rebuilt task asks for (the node's digest carries each workload's port);
/// otherwise the rebuilt task would be
/// `running` with no endpoint and never listed (a control plane killed -9
/// just as a surge replica starts meets this). Here every
/// task transition and record commit is refused while the replica's
/// process starts, then allowed again.
#[test]
fn a_start_whose_commit_fails_still_gets_its_endpoint_from_the_resync() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = port_range(4);
    let spec = AgentSpec::with_cache("node-1", "1xA100-80GB", "1").flag("replica-ports", &range);
    let (cp, _agents) = cluster(Path::new(BIN), dir.path(), &[], &[spec]);
    let op = cp.operator();
    // 3 MB at 1 MB/s: three seconds of warming to arm the fault in.
    let w = generate(&dir.path().join("nfs/llm-v3.bin"), 3_000_000, 5).unwrap();
    let origin = Origin::serve(&w.path, OriginOptions::capped(1_000_000)).unwrap();
    let r = op.register_model("llm", "v3", &w.spec(&origin.url()));
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(&cp.tenant("team-a"));
    let started = dir.path().join("started");
    let mut svc = inference("late", "llm:v3", 1, json!({}));
    svc["command"] = json!([
        "sh",
        "-c",
        format!("touch {}; exec {SERVER}", started.display())
    ]);
    submit(&api, &svc);
    api.wait_task("late.r0", 30, "warming", |v| v["state"] == "warming");
    for site in ["task_transition", "task_record"] {
        op.arm_fault(site, 0, 1_000_000);
    }
    assert!(
        wait_until(Duration::from_secs(30), || started.exists()),
        "the process never started"
    );
    // Its Started event (the one that named the port) is refused meanwhile.
    std::thread::sleep(Duration::from_millis(1500));
    let (_, refused) = op.commit_counts("task_transition");
    assert!(refused > 0, "the start's transition was not refused");
    op.clear_faults();
    let listed_once = wait_until(Duration::from_secs(20), || {
        listed(&endpoints(&api, "late", "")).len() == 1
    });
    assert!(listed_once, "never listed: {:#}", api.task("late.r0"));
    let v = api.task("late.r0");
    assert_eq!(v["state"], "running", "{v:#}");
    assert!(v["endpoint"]["port"].is_u64(), "{v:#}");
}
