//! A node speaks only for itself. Real processes: a control
//! plane, real agents, and fake agents (`fake_node`) that speak the real wire
//! protocol but say whatever a test tells them to: a rogue that joined under
//! its own name, an impostor that takes another node's name.
use caldera_chaos_tests::fake_node;
use caldera_chaos_tests::{wait_until, Agent, Api, ControlPlane, JOIN_TOKEN, OPERATOR_TOKEN};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn sleeper(id: &str) -> String {
    json!({
        "task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 10}, "cpu": {"cores": 1}},
        "command": ["sleep", "120"], "env": {"TENANT_SECRET": "s3cr3t"}
    })
    .to_string()
}

fn wait_running(api: &Api, id: &str) -> Value {
    api.wait_task(id, 20, "running", |v| v["state"] == "running")
}

fn exited(code: i32) -> Value {
    json!({"kind": "exited", "code": code, "signal": null, "stopped": false})
}

/// Sum of `caldera_node_reports_refused_total` for `node` on /metrics.
fn refused(cp: &ControlPlane, node: &str) -> u64 {
    let text = cp.operator().get("/metrics").body;
    let prefix = format!("caldera_node_reports_refused_total{{node=\"{node}\"");
    text.as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Messages of the events naming `node`.
fn node_events(cp: &ControlPlane, node: &str) -> Vec<String> {
    let r = cp
        .operator()
        .get(&format!("/v1/events?node={node}&limit=500"));
    r.data()["events"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["message"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn node_view(cp: &ControlPlane, name: &str) -> Value {
    cp.operator()
        .get(&format!("/v1/nodes/{name}"))
        .data()
        .clone()
}

fn connected(cp: &ControlPlane, name: &str) -> bool {
    node_view(cp, name)["connected"] == true
}

fn allocation_id(v: &Value) -> String {
    v["allocation"]["allocation_id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A control plane and one real agent with one GPU, connected. Each test
/// names its agent apart: agents of one name share a cgroup on this host.
fn one_real_node(dir: &Path, name: &str) -> (ControlPlane, Agent) {
    let cp = ControlPlane::start(Path::new(BIN), &dir.join("cp"), &[]);
    let real = Agent::start(Path::new(BIN), &cp, name, "1xA100-80GB", dir);
    assert!(wait_until(Duration::from_secs(20), || connected(&cp, name)));
    (cp, real)
}

#[test]
fn a_rogue_node_cannot_end_fail_or_checkpoint_another_nodes_task() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _real) = one_real_node(dir.path(), "node-1");
    // The rogue joins under its own name, with no GPUs: nothing is placed on it.
    let (mut rogue, epoch) = fake_node::join(&cp.addr, JOIN_TOKEN, "rogue-1", 0).unwrap();
    let api = cp.api(&cp.tenant("team-a"));
    assert_eq!(api.post("/v1/tasks", &sleeper("victim")).status, 201);
    let v = wait_running(&api, "victim");
    // What the real agent was told (the API shows the tenant's own ids; the
    // wire carries the keys `tenant/id`): the rogue knows the exact ids.
    let alloc = format!("team-a/{}", allocation_id(&v));
    let key = "team-a/victim";

    fake_node::event(&mut rogue, epoch, &alloc, key, exited(0)).unwrap();
    // Usage claimed for another node's allocation is refused as not held.
    let report = json!({"allocation_id": alloc, "usage": {"cpu_pct": 99.0, "memory_mb": 1,
        "gpu_utilization_pct": 99.0, "gpu_memory_used_mb": 1, "gpu_source": "nvml"}});
    let hb = json!({"type": "heartbeat", "epoch": epoch, "metrics": {"gpus": [], "cpu_used_pct": 0.0,
        "memory_used_mb": 0, "disk_free_mb": 0, "disk_read_bytes_per_s": 0, "disk_write_bytes_per_s": 0},
        "workloads": [report]});
    fake_node::send(&mut rogue, &hb).unwrap();
    let shadow = json!({"kind": "checkpoint_saved", "path": "/etc/shadow"});
    fake_node::event(&mut rogue, epoch, &alloc, key, shadow).unwrap();
    fake_node::event(&mut rogue, 0, &alloc, key, exited(0)).unwrap();

    let counted = wait_until(Duration::from_secs(5), || refused(&cp, "rogue-1") >= 4);
    let v = api.get("/v1/tasks/victim").data().clone();
    assert_eq!(v["state"], "running", "rogue-node events accepted: {v}");
    assert_eq!(format!("team-a/{}", allocation_id(&v)), alloc);
    assert!(v["checkpoint"].is_null(), "{v}");
    assert!(counted, "refusals counted: {}", refused(&cp, "rogue-1"));
    assert_eq!(refused(&cp, "node-1"), 0, "the honest agent was refused");
    let events = node_events(&cp, "rogue-1");
    assert!(
        events
            .iter()
            .any(|m| m.contains("refused") && m.contains(&alloc)),
        "{events:?}"
    );
}

/// A fake node holding the one GPU of the cluster, after it got its start command.
/// The fake node holding `task`: its stream, epoch, and the allocation id
/// and task key (`tenant/id`) as the Start command named them — what an
/// agent echoes back in its events.
fn holder(cp: &ControlPlane, api: &Api, task: &str) -> (TcpStream, u64, String, String) {
    let (mut s, epoch) = fake_node::join(&cp.addr, JOIN_TOKEN, "node-f", 1).unwrap();
    assert_eq!(api.post("/v1/tasks", &sleeper(task)).status, 201);
    let start = fake_node::expect(&mut s, "start", Duration::from_secs(10)).unwrap();
    let alloc = start["allocation_id"].as_str().unwrap().to_string();
    let key = start["task_id"].as_str().unwrap().to_string();
    let started = json!({"kind": "started", "pid": 4242});
    fake_node::event(&mut s, epoch, &alloc, &key, started).unwrap();
    wait_running(api, task);
    (s, epoch, alloc, key)
}

#[test]
fn the_holding_node_is_held_to_its_epoch_and_its_tasks_checkpoint_dir() {
    let dir = tempfile::tempdir().unwrap();
    // A long node timeout: the fake node does not heartbeat.
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_NODE_TIMEOUT_MS", "60000")],
    );
    let api = cp.api(&cp.tenant("team-a"));
    let (mut s, epoch, alloc, key) = holder(&cp, &api, "ckpt-1");
    // The agent's checkpoint dir is named after the task key (`/` as `+`).
    let own = format!(
        "{}/checkpoints/team-a+ckpt-1",
        fake_node::data_dir("node-f")
    );
    for path in [
        "/etc/shadow".to_string(),
        format!("{own}/../../../../etc/shadow"),
        format!("{own}-other/step-1"),
        own.clone(),
    ] {
        let kind = json!({"kind": "checkpoint_saved", "path": path});
        fake_node::event(&mut s, epoch, &alloc, &key, kind).unwrap();
    }
    fake_node::event(&mut s, 0, &alloc, &key, exited(0)).unwrap();
    let counted = wait_until(Duration::from_secs(5), || refused(&cp, "node-f") >= 5);
    let v = api.get("/v1/tasks/ckpt-1").data().clone();
    assert!(
        v["checkpoint"].is_null(),
        "checkpoint outside its dir accepted: {v}"
    );
    assert_eq!(v["state"], "running", "stale-epoch exit accepted: {v}");
    assert!(counted, "refusals counted: {}", refused(&cp, "node-f"));

    // Inside its own dir, under its epoch: accepted.
    let good = format!("{own}/step-1.pt");
    let kind = json!({"kind": "checkpoint_saved", "path": good});
    fake_node::event(&mut s, epoch, &alloc, &key, kind).unwrap();
    assert!(wait_until(Duration::from_secs(5), || {
        api.get("/v1/tasks/ckpt-1").data()["checkpoint"] == good.as_str()
    }));
    assert_eq!(refused(&cp, "node-f"), 5);
}

fn revoke(cp: &ControlPlane, name: &str) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["node", "revoke", name, "--server", &cp.url()])
        .args(["--token", OPERATOR_TOKEN])
        .output()
        .unwrap()
}

#[test]
fn a_registered_name_needs_its_secret_one_session_at_a_time_until_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, mut real) = one_real_node(dir.path(), "node-3");
    let api = cp.api(&cp.tenant("team-a"));
    assert_eq!(api.post("/v1/tasks", &sleeper("victim")).status, 201);
    let alloc = allocation_id(&wait_running(&api, "victim"));
    let epoch = node_view(&cp, "node-3")["epoch"].clone();

    // The join token alone does not take over a registered name.
    let (_s, reply) = fake_node::hello(&cp.addr, JOIN_TOKEN, "node-3", 1, None).unwrap();
    assert_eq!(reply["type"], "refused", "impostor welcomed: {reply}");
    assert_eq!(reply["code"], 10005, "{reply}");
    // The agent kept its secret in its data dir, readable by it alone.
    let file = real.data_dir.join("secrets/node-secret");
    let secret = std::fs::read_to_string(&file).unwrap();
    assert_private(&file);
    // Even with the secret: one session at a time.
    let (_s, reply) =
        fake_node::hello(&cp.addr, JOIN_TOKEN, "node-3", 1, Some(secret.trim())).unwrap();
    assert_eq!(reply["type"], "refused", "second session welcomed: {reply}");
    let v = api.get("/v1/tasks/victim").data().clone();
    assert_eq!(
        (v["state"].clone(), allocation_id(&v)),
        ("running".into(), alloc)
    );
    assert_eq!(node_view(&cp, "node-3")["epoch"], epoch);
    assert!(refused(&cp, "node-3") >= 2);

    // A restarted agent keeps its name: the secret survives in its data dir.
    real.restart();
    assert!(wait_until(Duration::from_secs(20), || {
        let n = node_view(&cp, "node-3");
        n["connected"] == true && n["epoch"] != epoch
    }));

    // Revoked: the live session is closed and the secret no longer works.
    let out = revoke(&cp, "node-3");
    assert!(out.status.success(), "{out:?}");
    assert!(wait_until(Duration::from_secs(10), || !connected(
        &cp, "node-3"
    )));
    let (_s, reply) =
        fake_node::hello(&cp.addr, JOIN_TOKEN, "node-3", 1, Some(secret.trim())).unwrap();
    assert_eq!(reply["type"], "refused", "revoked secret welcomed: {reply}");
    assert_eq!(reply["code"], 10007, "{reply}");
    let events = node_events(&cp, "node-3");
    assert!(
        events.iter().any(|m| m.contains("revoked by an operator")),
        "{events:?}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(!connected(&cp, "node-3"), "the revoked agent came back");
    // Revoking is for operators only, and names the node it did not find.
    let tenant = cp.api(&cp.tenant("team-b"));
    assert_eq!(tenant.post("/v1/nodes/node-1/revoke", "").status, 403);
    assert_eq!(cp.operator().post("/v1/nodes/nope/revoke", "").status, 404);
}

/// `path` is mode 0600 in a dir of mode 0700, both root's (the agent's).
fn assert_private(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::metadata(path).unwrap();
    let dir = std::fs::metadata(path.parent().unwrap()).unwrap();
    // SAFETY: geteuid has no memory effects.
    let me = unsafe { libc::geteuid() };
    assert_eq!(
        (
            file.mode() & 0o777,
            dir.mode() & 0o777,
            file.uid(),
            dir.uid()
        ),
        (0o600, 0o700, me, me),
        "{}",
        path.display()
    );
}

fn rotate(cp: &ControlPlane, name: &str) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(["node", "rotate-secret", name, "--server", &cp.url()])
        .args(["--token", OPERATOR_TOKEN])
        .output()
        .unwrap()
}

/// A secret that may have leaked is rotated over the live session: the old
/// one opens no session from then on (an impostor holding it is refused),
/// the agent keeps the new one and rejoins with it after a restart, and its
/// task runs on. A node with no live session cannot be handed one.
#[test]
fn a_rotated_secret_shuts_the_old_one_out_and_the_agent_keeps_the_new() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, mut real) = one_real_node(dir.path(), "node-6");
    let api = cp.api(&cp.tenant("team-a"));
    assert_eq!(api.post("/v1/tasks", &sleeper("victim")).status, 201);
    let alloc = allocation_id(&wait_running(&api, "victim"));
    let file = real.data_dir.join("secrets/node-secret");
    let old = std::fs::read_to_string(&file).unwrap().trim().to_string();

    let out = rotate(&cp, "node-6");
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains("node-6 has a new secret"), "{said}");
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || {
            let now = read();
            !now.trim().is_empty() && now.trim() != old
        }),
        "the agent did not keep the new secret"
    );
    assert_private(&file);
    let new = read().trim().to_string();

    // The old secret opens nothing, whether the node is up or not.
    let (_s, reply) = fake_node::hello(&cp.addr, JOIN_TOKEN, "node-6", 1, Some(&old)).unwrap();
    assert_eq!(
        reply["type"], "refused",
        "rotated-out secret welcomed: {reply}"
    );
    assert_eq!(reply["code"], 10005, "{reply}");
    let epoch = node_view(&cp, "node-6")["epoch"].clone();
    real.kill9();
    assert!(wait_until(Duration::from_secs(15), || !connected(
        &cp, "node-6"
    )));
    let (_s, reply) = fake_node::hello(&cp.addr, JOIN_TOKEN, "node-6", 1, Some(&old)).unwrap();
    assert_eq!(
        reply["type"], "refused",
        "rotated-out secret welcomed: {reply}"
    );
    assert_eq!(reply["code"], 10005, "{reply}");
    drop(_s);

    // The agent comes back with the new one; its task ran on.
    real.start_again();
    assert!(wait_until(Duration::from_secs(20), || {
        let n = node_view(&cp, "node-6");
        n["connected"] == true && n["epoch"] != epoch
    }));
    assert_eq!(read().trim(), new);
    let v = api.get("/v1/tasks/victim").data().clone();
    assert_eq!(
        (v["state"].clone(), allocation_id(&v)),
        ("running".into(), alloc)
    );
    let events = node_events(&cp, "node-6");
    assert!(
        events.iter().any(|m| m.contains("secret was rotated")),
        "{events:?}"
    );

    // No live session, nothing to hand a secret over: 409, revoke instead.
    let (s, _) = fake_node::join(&cp.addr, JOIN_TOKEN, "gone-6", 0).unwrap();
    drop(s);
    assert!(wait_until(Duration::from_secs(10), || !connected(
        &cp, "gone-6"
    )));
    let r = cp.operator().post("/v1/nodes/gone-6/rotate-secret", "");
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.to_string().contains("revoke"), "{}", r.body);
    // Operators only; an unknown node is named.
    let tenant = cp.api(&cp.tenant("team-b"));
    assert_eq!(
        tenant.post("/v1/nodes/node-6/rotate-secret", "").status,
        403
    );
    assert_eq!(
        cp.operator()
            .post("/v1/nodes/nope/rotate-secret", "")
            .status,
        404
    );
}

/// Readiness and swaps are reports like any other: a node that does not
/// hold the replica's allocation cannot make it ready (listed as an
/// endpoint) or swap its model; each try is refused and counted.
#[test]
fn a_rogue_node_cannot_make_another_nodes_replica_ready_or_swap_it() {
    let dir = tempfile::tempdir().unwrap();
    // A long node timeout: the rogue does not heartbeat.
    let env = [("CALDERA_NODE_TIMEOUT_MS", "60000")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _real = Agent::start(Path::new(BIN), &cp, "node-r", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || connected(
        &cp, "node-r"
    )));
    let api = cp.api(&cp.tenant("team-a"));
    // Its own probe never passes: only a forged report could make it ready.
    let svc = json!({"task_id": "svc", "task_type": "inference", "replicas": 1,
        "resources": {"cpu": {"cores": 1}}, "command": ["sleep", "120"],
        "readiness": {"command": ["false"], "period_s": 1}});
    assert_eq!(api.post("/v1/tasks", &svc.to_string()).status, 201);
    let v = wait_running(&api, "svc.r0");
    let alloc = format!("team-a/{}", allocation_id(&v));
    let key = "team-a/svc.r0";
    let (mut rogue, epoch) = fake_node::join(&cp.addr, JOIN_TOKEN, "rogue-r", 0).unwrap();
    let ready = json!({"kind": "readiness", "ready": true, "generation": 0, "detail": "forged"});
    let swapped = json!({"kind": "swapped", "generation": 1, "model": "evil:v1", "pid": 1});
    fake_node::event(&mut rogue, epoch, &alloc, key, ready).unwrap();
    fake_node::event(&mut rogue, epoch, &alloc, key, swapped).unwrap();
    let counted = wait_until(Duration::from_secs(5), || refused(&cp, "rogue-r") >= 2);
    assert!(counted, "refusals counted: {}", refused(&cp, "rogue-r"));
    std::thread::sleep(Duration::from_secs(2));
    let v = api.get("/v1/tasks/svc.r0").data().clone();
    assert_eq!(v["ready"], false, "a forged readiness was taken: {v:#}");
    assert_eq!(v["generation"], 0, "{v:#}");
    assert!(v["serving_model"].is_null(), "{v:#}");
    let e = api.get("/v1/tasks/svc/endpoints").data().clone();
    assert_eq!(e["endpoints"], json!([]), "{e:#}");
    assert_eq!(refused(&cp, "node-r"), 0, "the honest agent was refused");
}

/// A hello's inventory of one GPU with `gpu_mb` of memory, `cores`,
/// `memory_mb` and `disk_mb`.
fn inventory(name: &str, gpu_mb: u64, cores: u64, memory_mb: u64, disk_mb: u64) -> Value {
    json!({"inventory": {"hostname": name,
        "gpus": [{"index": 0, "uuid": format!("GPU-{name}"), "model": "A100", "memory_total_mb": gpu_mb,
            "memory_used_mb": 0, "utilization_pct": 0, "simulated": true}],
        "cpu_cores": cores, "memory_total_mb": memory_mb, "disks": [], "disk_offered_mb": disk_mb,
        "labels": {}, "simulated_host": true, "isolation": "none (fake node)", "gpu_source": "simulated"}})
}

#[test]
fn a_hello_with_an_impossible_inventory_is_refused_naming_the_figure_and_nothing_lands_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let cases = [
        (
            "n-gpu",
            inventory("n-gpu", u64::MAX, 8, 65_536, 100_000),
            "inventory.gpus[0].memory_total_mb",
        ),
        (
            "n-cores",
            inventory("n-cores", 81_920, u64::from(u32::MAX), 65_536, 100_000),
            "inventory.cpu_cores",
        ),
        (
            "n-mem",
            inventory("n-mem", 81_920, 8, u64::MAX, 100_000),
            "inventory.memory_total_mb",
        ),
        (
            "n-disk",
            inventory("n-disk", 81_920, 8, 65_536, u64::MAX),
            "inventory.disk_offered_mb",
        ),
    ];
    for (name, inv, field) in &cases {
        let (_s, reply) = fake_node::hello_with(&cp.addr, JOIN_TOKEN, name, inv).unwrap();
        assert_eq!(reply["type"], "refused", "{name} welcomed: {reply}");
        assert_eq!(reply["code"], 40005, "out_of_range: {reply}");
        let reason = reply["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(field),
            "{name}: the reason names {field}: {reason}"
        );
        let view = cp.operator().get(&format!("/v1/nodes/{name}"));
        assert_eq!(
            view.status, 404,
            "{name} was not registered: {:?}",
            view.body
        );
    }
    // A 1,000 GB task finds no node to hold it (none was welcomed).
    let api = cp.api(&cp.tenant("team-a"));
    let huge = json!({"task_id": "huge", "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 1000}}, "command": ["sleep", "1"]});
    let r = api.post("/v1/tasks", &huge.to_string());
    assert!(matches!(r.status, 201 | 422), "{:?}", r.body);
    std::thread::sleep(Duration::from_millis(500));
    let t = api.get("/v1/tasks/huge");
    assert!(
        t.status == 404 || t.data()["allocation"].is_null(),
        "{:?}",
        t.body
    );
}

#[test]
fn a_real_agent_declaring_more_gpus_than_a_machine_has_logs_the_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    // 4 x 64 + 1 = 257 simulated GPUs, one past the bound.
    let gpus = "64xA100-80GB,64xA100-80GB,64xA100-80GB,64xA100-80GB,1xA100-80GB";
    let agent = Agent::start(Path::new(BIN), &cp, "n-huge", gpus, dir.path());
    let logged = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&agent.log)
            .unwrap_or_default()
            .contains("257 GPUs reported; a node has at most 256")
    });
    let log = std::fs::read_to_string(&agent.log).unwrap_or_default();
    assert!(logged, "the agent logs why it was refused: {log}");
    assert!(log.contains("refused this node"), "{log}");
    assert_eq!(cp.operator().get("/v1/nodes/n-huge").status, 404);
}

/// Tokens and node secrets are stored keyed (HMAC under the server's
/// 0600 token key, outside sled), and a store made before the key keeps
/// working: its plain SHA-256 digests are upgraded at boot, so the tenant's
/// token and the node's secret still open their doors. A data dir booted
/// with another key file refuses to start and says why. The store's dir is
/// 0700 and its files 0600.
#[test]
fn stored_digests_are_keyed_and_a_store_from_before_the_key_keeps_working() {
    use caldera_storage::{Store, StoreConfig};
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, mut real) = one_real_node(dir.path(), "node-7");
    let token = cp.tenant("team-k");
    let plain = |s: &str| -> String {
        Sha256::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let secret = std::fs::read_to_string(real.data_dir.join("secrets/node-secret")).unwrap();
    let secret = secret.trim().to_string();
    cp.kill9();
    real.kill9();
    let sled = cp.data_dir.join("sled");
    let key_file = cp.data_dir.join("token-key");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(
        (mode(&cp.data_dir), mode(&sled), mode(&key_file)),
        (0o700, 0o700, 0o600)
    );
    for f in std::fs::read_dir(&sled).unwrap().flatten() {
        if f.file_type().unwrap().is_file() {
            assert_eq!(mode(&f.path()), 0o600, "{}", f.path().display());
        }
    }
    {
        // As a store from before the key left them: plain SHA-256s, no key.
        let store = Store::open(&sled, &StoreConfig::default()).unwrap();
        let mut t = store.tenant("team-k").unwrap().unwrap();
        assert!(
            t.token_sha256.starts_with("hmac-sha256:"),
            "{}",
            t.token_sha256
        );
        assert!(!t.token_sha256.contains(&plain(&token)));
        t.token_sha256 = plain(&token);
        let mut n = store.node("node-7").unwrap().unwrap();
        n.secret_sha256 = Some(plain(&secret));
        let mut b = store.batch();
        b.put_tenant(&t);
        b.put_node(&n);
        b.meta_remove("token_key_fingerprint");
        store.commit(b).unwrap();
        store.flush().unwrap();
    }
    std::fs::remove_file(&key_file).unwrap();
    cp.restart();
    real.start_again();
    let api = cp.api(&token);
    assert_eq!(api.get("/v1/tasks").status, 200, "the tenant's token");
    assert!(
        wait_until(Duration::from_secs(20), || connected(&cp, "node-7")),
        "the node's secret"
    );
    cp.kill9();
    {
        let store = Store::open(&sled, &StoreConfig::default()).unwrap();
        let t = store.tenant("team-k").unwrap().unwrap();
        let n = store.node("node-7").unwrap().unwrap();
        for stored in [t.token_sha256, n.secret_sha256.unwrap_or_default()] {
            assert!(stored.starts_with("hmac-sha256:"), "not upgraded: {stored}");
        }
    }
    // Another key: the boot stops and names the file.
    std::fs::write(&key_file, "ab".repeat(32)).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&cp.data_dir)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("token-key") && said.contains("not the key"),
        "{said}"
    );
}
