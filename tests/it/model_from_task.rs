//! Training uses versions too, with real processes: a
//! training task names a model version as its starting weights, is warmed
//! like an inference replica and reads them at CALDERA_MODEL_PATH; it writes
//! a checkpoint; `caldera model register m:v2 --from-task` registers that
//! checkpoint (size and SHA-256 computed by the control plane), and an
//! inference service started on m:v2 reads exactly the checkpoint's bytes.
use caldera_chaos_tests::models::{model_service, one_core, printed_sha256, submit, wait_running};
use caldera_chaos_tests::weights::{generate, sha256_file};
use caldera_chaos_tests::{cluster, wait_until, AgentSpec};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

const ENV: &[(&str, &str)] = &[
    ("CALDERA_NODE_TIMEOUT_MS", "15000"),
    ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
];

/// A model agent whose workloads run as a uid of their tenant's own, so a
/// task's tree is the tenant's and not the node's (`from_task` trusts no
/// other); the test's dir is opened for those uids to reach their dirs.
/// None, saying so, where the tests do not run as root.
fn agent_with_workload_uids(dir: &Path) -> Option<AgentSpec> {
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: from_task needs workload uids, which need a root agent");
        return None;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    let mut spec = AgentSpec::with_cache("node-0", "1xA100-80GB", "1");
    let off = spec.flags.iter().position(|f| f == "off");
    if let Some(i) = off {
        spec.flags[i] = "61000-61999".into();
    }
    Some(spec)
}

#[test]
fn a_training_run_starts_from_a_version_and_its_checkpoint_becomes_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = agent_with_workload_uids(dir.path()) else {
        return;
    };
    let specs = [agent];
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let v1 = generate(&dir.path().join("nfs/m-v1.bin"), 200_000, 5).unwrap();
    assert_eq!(
        op.register_model("m", "v1", &v1.spec(&v1.file_uri()))
            .status,
        201
    );
    let token = cp.tenant("team-a");
    let api = cp.api(&token);

    // "Training": the starting weights plus one step, saved atomically.
    let train = json!({
        "task_id": "train", "task_type": "training", "model": "m:v1",
        "resources": {"cpu": {"cores": 1}},
        "command": ["sh", "-c", "cat \"$CALDERA_MODEL_PATH\" > \"$CALDERA_CHECKPOINT_DIR/.tmp\" \
            && printf step-1 >> \"$CALDERA_CHECKPOINT_DIR/.tmp\" \
            && mv \"$CALDERA_CHECKPOINT_DIR/.tmp\" \"$CALDERA_CHECKPOINT_DIR/ckpt-1\" && exec sleep 300"]
    });
    submit(&api, &train);
    let v = api.wait_task("train", 60, "a checkpoint", |v| v["checkpoint"].is_string());
    let checkpoint = PathBuf::from(v["checkpoint"].as_str().unwrap_or(""));
    let history: Vec<&str> = v["history"]
        .as_array()
        .map(|h| h.iter().filter_map(|t| t["state"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        history.contains(&"warming"),
        "warmed like a replica: {history:?}"
    );
    // It read v1 at CALDERA_MODEL_PATH: the checkpoint is v1's bytes + a step.
    let mut want = std::fs::read(&v1.path).unwrap();
    want.extend_from_slice(b"step-1");
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read(&checkpoint).ok()
            == Some(want.clone())),
        "checkpoint {} is not v1 + step-1",
        checkpoint.display()
    );

    // No checkpoint yet on a task that wrote none: 409 no_checkpoint.
    submit(
        &api,
        &json!({"task_id": "idle", "task_type": "training", "resources": {"cpu": {"cores": 1}},
            "command": ["sleep", "300"]}),
    );
    wait_running(&api, "idle", 30);
    let r = op.post(
        "/v1/models",
        &json!({"name": "m", "version": "v9", "from_task": "idle", "tenant": "team-a"}).to_string(),
    );
    assert_eq!(r.status, 409, "{:#}", r.body);
    assert_eq!(r.body["code"], 40911, "{:#}", r.body);
    // A path outside the checkpoint directory is refused, naming `path`.
    let r = op.post(
        "/v1/models",
        &json!({"name": "m", "version": "v9", "from_task": "train", "tenant": "team-a",
            "path": v1.path.display().to_string()})
        .to_string(),
    );
    assert_eq!(r.status, 422, "{:#}", r.body);
    assert_eq!(r.body["field"], "path", "{:#}", r.body);

    // Register it with the CLI (operator token, the task's tenant named).
    let out = Command::new(BIN)
        .args([
            "model",
            "register",
            "m:v2",
            "--from-task",
            "train",
            "--tenant",
            "team-a",
        ])
        .env("CALDERA_SERVER", cp.url())
        .env("CALDERA_TOKEN", op.token.clone().unwrap_or_default())
        .env_remove("CALDERA_CONTEXT")
        .env("CALDERA_CONTEXTS_FILE", dir.path().join("no-contexts"))
        .output()
        .expect("the caldera binary runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let version = op.model_version("m", "v2");
    let sha = sha256_file(&checkpoint).unwrap();
    assert_eq!(version["weights"]["sha256"], sha.as_str(), "{version:#}");
    assert_eq!(
        version["weights"]["size_bytes"],
        want.len() as u64,
        "{version:#}"
    );
    let uri = format!("file://{}", checkpoint.canonicalize().unwrap().display());
    assert_eq!(version["weights"]["uri"], uri.as_str(), "{version:#}");

    // Inference on m:v2 reads exactly the checkpoint's bytes.
    submit(&api, &model_service("serve", "m:v2", 1, one_core()));
    wait_running(&api, "serve.r0", 60);
    assert_eq!(printed_sha256(&api, "serve.r0", 20), sha);
}

/// The task's tree is its tenant's, links and all. A checkpoint that is a
/// link to a file outside it, and a checkpoint dir the task swapped for a
/// link to a directory outside, are refused with 422 `checkpoint_unreadable`
/// naming `path`: nothing outside the tree is hashed, registered or copied.
#[test]
fn a_checkpoint_that_links_out_of_the_tasks_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some(agent) = agent_with_workload_uids(dir.path()) else {
        return;
    };
    let specs = [agent];
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"the node's secret").unwrap();
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    // Links its checkpoint to the secret, then swaps its checkpoint dir for
    // a link to the directory holding it.
    let leak = json!({
        "task_id": "leak", "task_type": "training", "checkpoint_dir": "sub",
        "env": {"OUT": outside.display().to_string()},
        "resources": {"cpu": {"cores": 1}},
        "command": ["sh", "-c", "ln -s \"$OUT/secret\" \"$CALDERA_CHECKPOINT_DIR/ckpt-1\" \
            && sleep 2 && cd \"$CALDERA_CHECKPOINT_DIR/..\" && mv sub sub.old \
            && ln -s \"$OUT\" sub && exec sleep 300"]
    });
    submit(&api, &leak);
    let v = api.wait_task("leak", 60, "a checkpoint", |v| v["checkpoint"].is_string());
    let reported = PathBuf::from(v["checkpoint"].as_str().unwrap_or(""));
    let register = |path: Option<&Path>| {
        let mut body =
            json!({"name": "m", "version": "v9", "from_task": "leak", "tenant": "team-a"});
        if let Some(p) = path {
            body["path"] = json!(p.display().to_string());
        }
        op.post("/v1/models", &body.to_string())
    };
    let r = register(None);
    assert_eq!(
        (r.status, r.body["error"].as_str(), r.body["field"].as_str()),
        (422, Some("checkpoint_unreadable"), Some("path")),
        "{:#}",
        r.body
    );
    assert!(
        r.body["msg"]
            .as_str()
            .unwrap_or("")
            .contains("symbolic link"),
        "{:#}",
        r.body
    );

    let ckpt_dir = reported.parent().map(Path::to_path_buf).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(20), || std::fs::symlink_metadata(
            &ckpt_dir
        )
        .is_ok_and(|m| m.file_type().is_symlink())),
        "the task swapped {} for a link",
        ckpt_dir.display()
    );
    let r = register(Some(&ckpt_dir.join("secret")));
    assert_eq!(
        (r.status, r.body["error"].as_str(), r.body["field"].as_str()),
        (422, Some("checkpoint_unreadable"), Some("path")),
        "{:#}",
        r.body
    );
    assert!(
        !r.body.to_string().contains("the node's secret"),
        "{:#}",
        r.body
    );
    assert_eq!(op.get("/v1/models/m").status, 404, "nothing was registered");
}

/// A node whose workloads run as the agent itself (uid isolation off) gives
/// the task's tree to the agent's uid: root here, or the control plane's own
/// user. Its checkpoint cannot be told from the node's own files, so
/// `from_task` is refused, naming `from_task`, and nothing is registered.
#[test]
fn a_checkpoint_on_a_node_without_workload_uids_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let specs = [AgentSpec::with_cache("node-0", "1xA100-80GB", "1")];
    let (cp, _nodes) = cluster(Path::new(BIN), dir.path(), ENV, &specs);
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    submit(
        &api,
        &json!({"task_id": "train", "task_type": "training",
            "resources": {"cpu": {"cores": 1}},
            "command": ["sh", "-c", "printf w > \"$CALDERA_CHECKPOINT_DIR/ckpt-1\" && exec sleep 300"]}),
    );
    api.wait_task("train", 60, "a checkpoint", |v| v["checkpoint"].is_string());
    let r = op.post(
        "/v1/models",
        &json!({"name": "m", "version": "v1", "from_task": "train", "tenant": "team-a"})
            .to_string(),
    );
    assert_eq!(
        (r.status, r.body["error"].as_str(), r.body["field"].as_str()),
        (422, Some("checkpoint_untrusted"), Some("from_task")),
        "{:#}",
        r.body
    );
    let msg = r.body["msg"].as_str().unwrap_or("");
    assert!(msg.contains("no uid of their own"), "{msg}");
    assert_eq!(op.get("/v1/models/m").status, 404, "nothing was registered");
}
