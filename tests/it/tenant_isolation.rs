//! Tenants are isolated on the node: each tenant's
//! workloads run as an unprivileged uid of its own, with log, checkpoint and
//! scratch dirs of mode 0700 owned by it. Tenant A's workload tries to read
//! tenant B's log, B's checkpoint and `/proc/<B's pid>/environ`; each read
//! fails with "Permission denied", which A's own output shows. Real server,
//! a root agent (these machines run tests as root), real uids.
use caldera_chaos_tests::origin::{Origin, OriginOptions};
use caldera_chaos_tests::{nodes_connected, shims, wait_until, Agent, ControlPlane};
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn a_tenant_cannot_read_another_tenants_log_checkpoints_or_environment() {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: uid isolation needs a root agent and this test runs as non-root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Workloads of other uids must reach their own dirs inside the data dir.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let range = ["--workload-uid-range", "61000-61999"];
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "shared-node",
        "2xA100-80GB",
        dir.path(),
        &range,
    );
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));
    let node = cp.operator().get("/v1/nodes/shared-node");
    let isolation = node.data()["isolation"].as_str().unwrap_or("").to_string();
    assert!(
        isolation.contains("uid per tenant (61000-61999)"),
        "{:#}",
        node.body
    );

    let b = cp.api(&cp.tenant("tenant-b"));
    let secret = r#"{"task_id":"b-job","task_type":"training","resources":{"gpu":{"count":1}},"env":{"B_SECRET":"b-env-value"},"command":["sh","-c","echo my-secret=b-private-value; echo weights > $CALDERA_CHECKPOINT_DIR/step-1; exec sleep 60"]}"#;
    assert_eq!(b.post("/v1/tasks", secret).status, 201);
    b.wait_task("b-job", 20, "running", |v| v["state"] == "running");
    let b_log = agent.data_dir.join("logs/tenant-b/tenant-b+b-job.log");
    let b_ckpt = agent.data_dir.join("checkpoints/tenant-b+b-job/step-1");
    assert!(wait_until(Duration::from_secs(10), || b_ckpt.exists()));
    let b_pid = shims::shims(&agent.data_dir)
        .into_iter()
        .find_map(|s| s.workload)
        .expect("b's workload pid");
    // B's files are B's alone.
    for (path, mode) in [
        (b_log.parent().unwrap(), 0o700),
        (b_ckpt.parent().unwrap(), 0o700),
    ] {
        let m = std::fs::metadata(path).unwrap();
        assert_eq!(
            (m.mode() & 0o777, m.uid() >= 61000),
            (mode, true),
            "{}",
            path.display()
        );
    }

    let a = cp.api(&cp.tenant("tenant-a"));
    let script = format!(
        "id -u; cat {} ; cat {} ; cat /proc/{b_pid}/environ ; echo done",
        b_log.display(),
        b_ckpt.display()
    );
    let prying = serde_json::json!({
        "task_id": "a-job", "task_type": "training",
        "resources": {"gpu": {"count": 1}},
        "command": ["sh", "-c", script],
    });
    assert_eq!(a.post("/v1/tasks", &prying.to_string()).status, 201);
    a.wait_task("a-job", 20, "ended", |v| {
        v["state"] == "finished" || v["state"] == "failed"
    });
    let out = a.get("/v1/tasks/a-job/logs").data()["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    for path in [b_log.display().to_string(), b_ckpt.display().to_string()] {
        assert!(
            out.contains(&format!("cat: {path}: Permission denied")),
            "reading {path} was not refused: {out}"
        );
    }
    // Another uid's process is not even there: A's /proc shows its own only.
    let environ = format!("/proc/{b_pid}/environ");
    assert!(
        out.contains(&format!("cat: {environ}: No such file or directory"))
            || out.contains(&format!("cat: {environ}: Permission denied")),
        "reading {environ} was not refused: {out}"
    );
    assert!(
        !out.contains("b-private-value")
            && !out.contains("b-env-value")
            && !out.contains("weights"),
        "{out}"
    );
    let a_uid: u32 = out
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        (61000..=61999).contains(&a_uid),
        "A ran as uid {a_uid}: {out}"
    );
    // B's own workload still reads its own files, and the agent (root) serves its log.
    let b_out = b.get("/v1/tasks/b-job/logs").data()["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(b_out.contains("my-secret=b-private-value"), "{b_out}");

    // A checkpoint_dir climbing out of the task's own tree is refused at submission.
    let climbing = r#"{"task_id":"a-climb","task_type":"training","checkpoint_dir":"../tenant-b+b-job","resources":{"gpu":{"count":1}},"command":["true"]}"#;
    let r = a.post("/v1/tasks", climbing);
    assert!(
        r.status == 400 || r.status == 422,
        "{} {}",
        r.status,
        r.body
    );
}

/// The node's disk is shared, its secrets are not. Tenant B runs a private
/// model (its copy linked for B's uid only) with a secret on its command
/// line; tenant A's workload, as its own uid, tries to read the node secret,
/// the control plane's sled files and token key, the weight cache's index
/// and copies, B's private weights by the path B was given, and B's
/// `/proc` entries. Every read is refused, and A's token does not see B's
/// digest on `GET /v1/nodes/{name}`.
#[test]
fn a_tenants_workload_reads_nothing_of_the_node_or_of_another_tenant() {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: uid isolation needs a root agent and this test runs as non-root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let weights = dir.path().join("b-private.bin");
    std::fs::write(&weights, "b-private-weights\n".repeat(64)).unwrap();
    let sha = caldera_chaos_tests::weights::sha256_file(&weights).unwrap();
    let origin = Origin::serve(&weights, OriginOptions::default()).unwrap();
    let cp_dir = dir.path().join("cp");
    let env = [
        ("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true"),
        ("CALDERA_TENANT_MODEL_ORIGINS", "https://*,http://127.0.0.1"),
    ];
    let cp = ControlPlane::start(Path::new(BIN), &cp_dir, &env);
    let flags = ["--workload-uid-range", "61000-61999", "--cache-gb", "1"];
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "disk-node",
        "2xA100-80GB",
        dir.path(),
        &flags,
    );
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));
    let node = cp.operator().get("/v1/nodes/disk-node");
    let isolation = node.data()["isolation"].as_str().unwrap_or("").to_string();
    assert!(isolation.contains("own /proc"), "{:#}", node.body);

    let b = cp.api(&cp.tenant("tenant-b"));
    let model = json!({"name": "@tenant-b.private", "version": "v1",
        "weights": {"uri": origin.url(), "size_bytes": 18 * 64, "sha256": sha}});
    let r = b.post("/v1/models", &model.to_string());
    assert_eq!(r.status, 201, "{:?}", r.body);
    let b_job = json!({"task_id": "b-model", "task_type": "training",
        "resources": {"gpu": {"count": 1}}, "model": "@tenant-b.private:v1",
        "command": ["sh", "-c", "echo path=$CALDERA_MODEL_PATH; cat $CALDERA_MODEL_PATH | head -1; sleep 60", "b-cmdline-secret"]});
    assert_eq!(b.post("/v1/tasks", &b_job.to_string()).status, 201);
    b.wait_task("b-model", 30, "running", |v| v["state"] == "running");
    let b_log = || {
        b.get("/v1/tasks/b-model/logs").data()["content"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(wait_until(Duration::from_secs(10), || b_log()
        .contains("b-private-weights")));
    let b_out = b_log();
    let b_path = b_out
        .lines()
        .find_map(|l| l.strip_prefix("path="))
        .expect("B's model path")
        .to_string();
    assert!(
        b_path.contains(&sha) && b_path.contains("/models/"),
        "{b_path}"
    );
    let b_pid = shims::shims(&agent.data_dir)
        .into_iter()
        .find_map(|s| s.workload)
        .expect("b's workload pid");
    let cmdline = std::fs::read(format!("/proc/{b_pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).contains("b-cmdline-secret"));

    let node_secret = agent.data_dir.join("secrets/node-secret");
    let secret = std::fs::read_to_string(&node_secret).unwrap();
    let token_key = cp_dir.join("token-key");
    let key = std::fs::read_to_string(&token_key).unwrap();
    let refused = [
        node_secret.clone(),
        cp_dir.join("sled/db"),
        token_key,
        agent.data_dir.join("cache/index.json"),
        agent.data_dir.join("cache/weights").join(&sha),
        std::path::PathBuf::from(&b_path),
    ];
    let mut script = String::from("id -u\n");
    for p in &refused {
        script += &format!("cat {}\n", p.display());
    }
    script += &format!(
        "ls {} {}\n\
         cat /proc/{b_pid}/cmdline; cat /proc/{b_pid}/environ\n\
         test -e /proc/{b_pid} && echo b-process-visible\n\
         for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c 'b-cmdline-secre[t]'\n\
         echo done\n",
        agent.data_dir.join("cache").display(),
        cp_dir.display()
    );
    let a = cp.api(&cp.tenant("tenant-a"));
    let prying = json!({"task_id": "a-pry", "task_type": "training",
        "resources": {"gpu": {"count": 1}}, "command": ["sh", "-c", script]});
    assert_eq!(a.post("/v1/tasks", &prying.to_string()).status, 201);
    a.wait_task("a-pry", 20, "ended", |v| {
        v["state"] == "finished" || v["state"] == "failed"
    });
    let out = a.get("/v1/tasks/a-pry/logs").data()["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(out.contains("done"), "{out}");
    for p in &refused {
        let p = p.display();
        assert!(
            out.contains(&format!("cat: {p}: Permission denied")),
            "reading {p} was not refused: {out}"
        );
    }
    for (what, leaked) in [
        ("B's weights", "b-private-weights"),
        ("B's command line", "b-cmdline-secret"),
        ("B's process", "b-process-visible"),
        ("the node secret", secret.trim()),
        ("the token key", key.trim()),
    ] {
        assert!(!out.contains(leaked), "{what} leaked to tenant A: {out}");
    }
    for dir in [agent.data_dir.join("cache"), cp_dir.clone()] {
        let listing = format!(
            "ls: cannot open directory '{}': Permission denied",
            dir.display()
        );
        assert!(
            out.contains(&listing),
            "{} was listed: {out}",
            dir.display()
        );
    }
    assert!(
        out.contains(&format!("/proc/{b_pid}/cmdline: No such file or directory")),
        "{out}"
    );
    // The grep's count: no process line of B's.
    assert!(out.lines().any(|l| l.trim() == "0"), "{out}");

    // A's token does not see B's digest on the node; B's and the operator's do.
    let digests = |api: &caldera_chaos_tests::Api| -> Vec<String> {
        api.get("/v1/nodes/disk-node").data()["cache"]["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["sha256"].as_str().map(str::to_string))
            .collect()
    };
    // (The copy shows from the first cache report after its fetch.)
    assert!(
        wait_until(Duration::from_secs(20), || digests(&b).contains(&sha)),
        "B's own copy is listed for B"
    );
    assert!(!digests(&a).contains(&sha), "A saw B's digest");
    assert!(digests(&cp.operator()).contains(&sha));
    // Nor the node's totals, which grew by B's copy and its fetch: A reads
    // the bytes of the copies it is shown (none) and zero counters; the
    // operator reads the node's.
    let cache =
        |api: &caldera_chaos_tests::Api| api.get("/v1/nodes/disk-node").data()["cache"].clone();
    let ops = cache(&cp.operator());
    let b_bytes = 18 * 64;
    assert!(
        ops["used_bytes"].as_u64() >= Some(b_bytes)
            && ops["counters"]["bytes_from_origin"].as_u64() >= Some(b_bytes),
        "{ops:#}"
    );
    let seen_by_a = cache(&a);
    assert_eq!(seen_by_a["entries"], json!([]), "{seen_by_a:#}");
    assert_eq!(seen_by_a["used_bytes"], json!(0), "{seen_by_a:#}");
    assert_eq!(seen_by_a["capacity_bytes"], ops["capacity_bytes"]);
    let counters = seen_by_a["counters"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        !counters.is_empty() && counters.values().all(|v| v.as_f64() == Some(0.0)),
        "{seen_by_a:#}"
    );
}

/// A digest is no proof of having the bytes. Tenant B's private version is
/// cached on the node; tenant A registers its own private version declaring
/// B's SHA-256, from an origin (loopback, allowed for this cluster) that
/// serves other bytes. A's task must read none of B's weights: there is no
/// cache hit, A's warm reads A's own origin and fails its checksum, and the
/// node's cache view shows A nothing of B's copy.
#[test]
fn a_tenant_declaring_another_tenants_digest_gets_no_cache_hit_and_none_of_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let b_weights = dir.path().join("b-private.bin");
    std::fs::write(&b_weights, "b-private-weights\n".repeat(64)).unwrap();
    let a_weights = dir.path().join("a-decoy.bin");
    std::fs::write(&a_weights, "a-decoy-weights!!\n".repeat(64)).unwrap();
    let sha = caldera_chaos_tests::weights::sha256_file(&b_weights).unwrap();
    let b_origin = Origin::serve(&b_weights, OriginOptions::default()).unwrap();
    let a_origin = Origin::serve(&a_weights, OriginOptions::default()).unwrap();
    let env = [
        ("CALDERA_TENANTS_MAY_REGISTER_MODELS", "true"),
        ("CALDERA_TENANT_MODEL_ORIGINS", "https://*,http://127.0.0.1"),
    ];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "disk-node",
        "2xA100-80GB",
        dir.path(),
        &["--cache-gb", "1"],
    );
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));

    // B's private version, warmed on the node by B's task.
    let b = cp.api(&cp.tenant("tenant-b"));
    let size = 18 * 64;
    let model = json!({"name": "@tenant-b.private", "version": "v1",
        "weights": {"uri": b_origin.url(), "size_bytes": size, "sha256": sha}});
    assert_eq!(b.post("/v1/models", &model.to_string()).status, 201);
    let b_job = json!({"task_id": "b-model", "task_type": "training",
        "resources": {"gpu": {"count": 1}}, "model": "@tenant-b.private:v1",
        "command": ["sh", "-c", "head -1 $CALDERA_MODEL_PATH; sleep 60"]});
    assert_eq!(b.post("/v1/tasks", &b_job.to_string()).status, 201);
    let b_log = || {
        b.get("/v1/tasks/b-model/logs").data()["content"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(wait_until(Duration::from_secs(30), || b_log()
        .contains("b-private-weights")));
    assert!(agent.data_dir.join("cache/weights").join(&sha).exists());

    // A declares B's digest, from an origin of its own.
    let a = cp.api(&cp.tenant("tenant-a"));
    let copycat = json!({"name": "@tenant-a.copycat", "version": "v1",
        "weights": {"uri": a_origin.url(), "size_bytes": size, "sha256": sha}});
    let r = a.post("/v1/models", &copycat.to_string());
    assert_eq!(r.status, 201, "{:?}", r.body);
    let a_job = json!({"task_id": "a-model", "task_type": "training",
        "resources": {"gpu": {"count": 1}}, "model": "@tenant-a.copycat:v1",
        "command": ["sh", "-c", "echo started; cat $CALDERA_MODEL_PATH; echo done"]});
    assert_eq!(a.post("/v1/tasks", &a_job.to_string()).status, 201);

    // A's warm reads A's origin (no hit), and its bytes fail the checksum.
    let a_failure = || {
        a.model_version("@tenant-a.copycat", "v1")["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["node"] == "disk-node")
            .filter_map(|n| n["reason"].as_str().map(str::to_string))
            .find(|r| r.contains("does not match"))
    };
    let a_log = || {
        a.get("/v1/tasks/a-model/logs").data()["content"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    // Either A's warm fails, or (a hit on B's copy) A's workload runs.
    wait_until(Duration::from_secs(30), || {
        a_failure().is_some() || a_log().contains("done")
    });
    let out = a_log();
    assert!(
        !out.contains("b-private-weights"),
        "A read B's weights: {out}"
    );
    assert!(!out.contains("started"), "A's workload ran: {out}");
    assert!(
        a_failure().is_some(),
        "A's warm did not fail its checksum: {:#}",
        a.model_version("@tenant-a.copycat", "v1")
    );
    assert!(a_origin.bytes_served() > 0, "A's own origin was never read");
    let a_task = a.get("/v1/tasks/a-model").data().clone();
    assert_ne!(a_task["state"], "running", "{a_task:#}");

    // B's copy is untouched and still B's alone on the node's cache view.
    assert_eq!(
        std::fs::read(agent.data_dir.join("cache/weights").join(&sha)).unwrap(),
        std::fs::read(&b_weights).unwrap()
    );
    let entries = |api: &caldera_chaos_tests::Api| -> Vec<serde_json::Value> {
        api.get("/v1/nodes/disk-node").data()["cache"]["entries"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        !entries(&a).iter().any(|e| e["sha256"] == sha.as_str()),
        "A saw B's copy"
    );
    // The next cache report lists the copy.
    let listed = || entries(&b).iter().any(|e| e["sha256"] == sha.as_str());
    assert!(
        wait_until(Duration::from_secs(20), listed),
        "{:?}",
        entries(&cp.operator())
    );
    assert!(
        !entries(&a).iter().any(|e| e["sha256"] == sha.as_str()),
        "A saw B's copy"
    );
    let seen_by_b = entries(&b);
    let b_entry = seen_by_b.iter().find(|e| e["sha256"] == sha.as_str());
    assert_eq!(
        b_entry.map(|e| e["tenants"].clone()),
        Some(json!(["tenant-b"])),
        "{seen_by_b:?}"
    );
}
