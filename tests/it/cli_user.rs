//! The CLI a cluster user expects, run as a new user
//! would, against a real server and agent: `login` saves a context so later
//! commands need no flags; a tenant sees its own quota and usage without the
//! operator token; `scale`, `cancel`; borrowing limits from the CLI; errors
//! as JSON with `--json`; `top`; queue positions; `nodes NAME` counts the node's allocations (it
//! printed `none` while the API said 1).
use caldera_chaos_tests::{wait_until, Agent, ControlPlane, OPERATOR_TOKEN};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// Runs the CLI with only the contexts file `config` to go on (no server or
/// token in the environment); returns (success, stdout, stderr).
fn caldera(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("CALDERA_CONTEXTS_FILE", config)
        .env_remove("CALDERA_SERVER")
        .env_remove("CALDERA_TOKEN")
        .env_remove("CALDERA_CONTEXT")
        .output()
        .expect("the caldera binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn training(id: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{{"count":1,"memory_gb":10}}}}}}"#
    )
}

fn submit_file(dir: &Path, name: &str, spec: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, spec).unwrap();
    p
}

#[test]
fn a_tenant_logs_in_once_and_works_without_flags() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_USAGE_SAMPLE_MS", "200")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "2xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/node-a").data()["connected"] == true
    }));
    let token = cp.tenant("team-a");
    let config = dir.path().join("home/contexts.json");
    let url = cp.url();

    // A wrong token is refused at login, and nothing is saved.
    let (ok, _, err) = caldera(&config, &["login", "--server", &url, "--token", "nope"]);
    assert!(!ok && err.contains("40100"), "{err}");
    assert!(!config.exists());
    let (ok, out, err) = caldera(&config, &["login", "--server", &url, "--token", &token]);
    assert!(ok, "{err}");
    assert!(
        out.contains("as tenant team-a") && out.contains("\"team-a\""),
        "{out}"
    );
    let (ok, out, _) = caldera(
        &config,
        &[
            "login",
            "--server",
            &url,
            "--token",
            OPERATOR_TOKEN,
            "--name",
            "admin",
        ],
    );
    assert!(ok && out.contains("as the operator"), "{out}");
    // The last login is current; `--context` picks another; an unknown one
    // is named with the saved ones.
    let (ok, _, err) = caldera(&config, &["tenant", "list"]);
    assert!(ok, "the operator context is current: {err}");
    let (ok, _, err) = caldera(&config, &["tasks", "--context", "nope"]);
    assert!(
        !ok && err.contains("nope") && err.contains("admin, team-a"),
        "{err}"
    );

    // As the tenant, with no flag but the context: submit, list, quota, usage.
    let t = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--context", "team-a"]);
        caldera(&config, &all)
    };
    let hold = submit_file(dir.path(), "hold.json", &training("hold"));
    let (ok, out, err) = t(&["submit", hold.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    cp.api(&token)
        .wait_task("hold", 20, "running", |v| v["state"] == "running");
    let (ok, out, _) = t(&["tasks"]);
    assert!(ok && out.contains("hold"), "{out}");
    let (ok, out, err) = t(&["quota", "show"]);
    assert!(
        ok && out.contains("team-a") && out.contains("no limits"),
        "{out}{err}"
    );
    assert!(wait_until(Duration::from_secs(10), || {
        !cp.api(&token).get("/v1/tenants/team-a/usage").data()["current"].is_null()
    }));
    let (ok, out, err) = t(&["usage"]);
    assert!(ok, "{err}");
    assert!(out.contains("gpus") && out.contains("allocated"), "{out}");

    // The operator sets a guarantee and a borrowing limit; the tenant sees both.
    let (ok, out, err) = caldera(
        &config,
        &[
            "quota",
            "set",
            "team-a",
            "--gpus",
            "1",
            "--borrowing-gpus",
            "0",
        ],
    );
    assert!(ok, "{out}{err}");
    let (ok, out, _) = t(&["quota", "show", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_default();
    assert!(ok, "{out}");
    assert_eq!(v["guaranteed"]["gpus"], 1.0, "{v:#}");
    assert_eq!(v["borrowing_limit"]["gpus"], 0.0, "{v:#}");

    // Over its guarantee and unable to borrow, a second task queues; cancel ends it.
    let second = submit_file(dir.path(), "second.json", &training("second"));
    assert!(t(&["submit", second.to_str().unwrap()]).0);
    cp.api(&token)
        .wait_task("second", 20, "queued", |v| v["state"] == "queued");
    assert_eq!(cp.api(&token).task("second")["queue_position"], 1);
    let (_, out, _) = t(&["tasks"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("second"))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells.get(5), Some(&"1"), "POS of the queued task: {out}");
    let (ok, out, err) = t(&["top", "--once"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("node-a") && out.contains("1 waiting") && out.contains("\nsecond "),
        "{out}"
    );
    let (ok, out, err) = t(&["cancel", "second"]);
    assert!(ok && out.contains("second: cancelled"), "{out}{err}");

    // Scale a service.
    let svc = submit_file(
        dir.path(),
        "svc.json",
        r#"{"task_id":"svc","task_type":"inference","replicas":1,"resources":{"gpu":{"share":0.1}},"command":["sleep","60"]}"#,
    );
    let (ok, _, err) = caldera(
        &config,
        &[
            "quota",
            "set",
            "team-a",
            "--gpus",
            "4",
            "--context",
            "admin",
        ],
    );
    assert!(ok, "{err}");
    assert!(t(&["submit", svc.to_str().unwrap()]).0);
    let (ok, out, err) = t(&["scale", "svc", "2"]);
    assert!(ok && out.contains("2 replicas wanted"), "{out}{err}");
    let v = cp.api(&token).task("svc");
    assert_eq!(v["replicas"], 2, "{v:#}");

    // Errors as JSON with --json: the server's envelope, on stdout.
    let (ok, out, _) = t(&["status", "missing", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_default();
    assert!(!ok);
    assert_eq!(
        (v["code"].as_u64(), v["error"].as_str()),
        (Some(40400), Some("not_found")),
        "{out}"
    );

    // The node holds allocations; the CLI counts them.
    let (ok, out, _) = t(&["nodes", "node-a"]);
    let n = cp.operator().get("/v1/nodes/node-a").data()["allocations"].clone();
    assert!(ok && n.as_u64().is_some_and(|n| n >= 1), "{n}");
    assert!(out.contains(&format!("allocations: {n}")), "{out}");
}

/// A client command whose reader goes away (`caldera tasks --json | head
/// -0`) ends quietly by SIGPIPE, as Unix tools do, rather than panicking
/// with "failed printing to stdout: Broken pipe".
#[test]
fn a_client_printing_into_a_closed_pipe_ends_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(BIN)
        .args(["tasks", "--json"])
        // Nothing listens there: the error envelope is what it prints.
        .env("CALDERA_SERVER", "http://127.0.0.1:1")
        .env("CALDERA_TOKEN", "x".repeat(32))
        .env("CALDERA_CONTEXTS_FILE", dir.path().join("contexts.json"))
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}

#[test]
fn tasks_all_follows_every_page_and_the_operator_names_a_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let (a, b) = (cp.tenant("team-a"), cp.tenant("team-b"));
    // No nodes: every task stays queued.
    for i in 0..7 {
        assert_eq!(
            cp.api(&a)
                .post("/v1/tasks", &training(&format!("a-{i}")))
                .status,
            201
        );
    }
    assert_eq!(cp.api(&b).post("/v1/tasks", &training("b-0")).status, 201);
    let config = dir.path().join("home/contexts.json");
    let url = cp.url();
    for (token, name) in [(a.as_str(), "team-a"), (OPERATOR_TOKEN, "admin")] {
        let (ok, _, err) = caldera(
            &config,
            &["login", "--server", &url, "--token", token, "--name", name],
        );
        assert!(ok, "{err}");
    }
    let ids = |json: &str| -> Vec<String> {
        let v: Value = serde_json::from_str(json).unwrap();
        assert!(v["next_cursor"].is_null(), "{v:#}");
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                format!(
                    "{}/{}",
                    t["tenant"].as_str().unwrap(),
                    t["task_id"].as_str().unwrap()
                )
            })
            .collect()
    };
    // One page: 3 rows and where to go on.
    let (ok, out, err) = caldera(&config, &["tasks", "--limit", "3", "--context", "team-a"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("a-2") && !out.contains("a-3") && out.contains("next cursor: a-2"),
        "{out}"
    );
    // --all: every page, each task once, in order, as one list.
    let (ok, out, err) = caldera(
        &config,
        &[
            "tasks",
            "--limit",
            "3",
            "--all",
            "--json",
            "--context",
            "team-a",
        ],
    );
    assert!(ok, "{err}");
    let want: Vec<String> = (0..7).map(|i| format!("team-a/a-{i}")).collect();
    assert_eq!(ids(&out), want);
    let (ok, out, _) = caldera(
        &config,
        &["tasks", "--limit", "2", "--all", "--context", "team-a"],
    );
    assert!(
        ok && out.contains("a-6") && !out.contains("next cursor"),
        "{out}"
    );
    // The operator: one tenant's with --tenant; a tenant naming another is refused.
    let (ok, out, err) = caldera(
        &config,
        &[
            "tasks",
            "--tenant",
            "team-b",
            "--state",
            "queued",
            "--all",
            "--json",
            "--context",
            "admin",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(ids(&out), ["team-b/b-0"]);
    let (ok, _, err) = caldera(
        &config,
        &["tasks", "--tenant", "team-b", "--context", "team-a"],
    );
    assert!(!ok && err.contains("40300"), "{err}");
}
