//! Tenants are isolated on the node (issue 10, item 4): each tenant's
//! workloads run as an unprivileged uid of its own, with log, checkpoint and
//! scratch dirs of mode 0700 owned by it. Tenant A's workload tries to read
//! tenant B's log, B's checkpoint and `/proc/<B's pid>/environ`; each read
//! fails with "Permission denied", which A's own output shows. Real server,
//! a root agent (these machines run tests as root), real uids.
use caldera_chaos_tests::{nodes_connected, shims, wait_until, Agent, ControlPlane};
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
    for path in [
        b_log.display().to_string(),
        b_ckpt.display().to_string(),
        format!("/proc/{b_pid}/environ"),
    ] {
        assert!(
            out.contains(&format!("cat: {path}: Permission denied")),
            "reading {path} was not refused: {out}"
        );
    }
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
