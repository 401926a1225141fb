//! `caldera server --config FILE`: keys in sections load, a former flat key
//! still works and the log names the key to use instead, a file giving a
//! former key and its new one is refused naming both, and a value that
//! cannot work is refused naming its key. Real binary, real socket.
use caldera_chaos_tests::{free_port, wait_until, Api, OPERATOR_TOKEN};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// `caldera server --config <file>` with no configuration from the
/// environment (the test runner's `CALDERA_*` variables are not passed on).
fn server(config: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["server", "--config"]).arg(config);
    for (name, _) in std::env::vars() {
        if name.starts_with("CALDERA_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

/// Runs a server that must refuse to start: its exit status and stderr.
fn refused(dir: &Path, toml: &str) -> (Option<i32>, String) {
    let file = dir.join("refused.toml");
    std::fs::write(&file, toml).unwrap();
    let Output { status, stderr, .. } = server(&file)
        .stdout(Stdio::null())
        .output()
        .expect("caldera runs");
    (status.code(), String::from_utf8_lossy(&stderr).into_owned())
}

/// Kills the server when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cmd` with its log in `log`, and waits for `/healthz` at `addr`
/// (`what` names where the address was configured, for a failure).
fn answering(mut cmd: Command, log: &Path, addr: &str, what: &str) -> (Running, Api) {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("caldera starts");
    let running = Running(child);
    let api = Api::new(addr, Some(OPERATOR_TOKEN));
    assert!(
        wait_until(Duration::from_secs(20), || api.get("/healthz").status
            == 200),
        "no answer at {what} {addr}; log: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
    (running, api)
}

#[test]
fn sectioned_keys_and_a_former_flat_key_both_configure_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let data = dir.path().join("data");
    let file = dir.path().join("caldera.toml");
    std::fs::write(
        &file,
        format!(
            "max-body-bytes = 2048\n\
             [server]\nlisten = \"{addr}\"\noperator-token = \"{OPERATOR_TOKEN}\"\n\
             [storage]\ndata-dir = {data:?}\n\
             [nodes]\nheartbeat-interval-ms = 250\ntimeout-ms = 1500\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let (_running, api) = answering(server(&file), &log, &addr, "[server] listen");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        data.join("sled").exists(),
        "[storage] data-dir holds the state"
    );
    // [server] operator-token is the token the server takes.
    assert_eq!(api.get("/v1/tasks").status, 200);
    // The former flat key still sets [limits] max-body-bytes: 4 KiB, well
    // under the default 64 KiB, is too large (the tenant is never looked up).
    let body = format!(
        r#"{{"task_id":"x","task_type":"training","resources":{{"cpu":{{"cores":1}}}},"image":"{}"}}"#,
        "a".repeat(4096)
    );
    let r = api.post("/v1/tasks?tenant=nobody", &body);
    assert_eq!(
        (r.status, &r.body["error"]),
        (413, &"body_too_large".into()),
        "{:#}",
        r.body
    );
    // ... and the log says which key to use instead.
    assert!(
        read_log()
            .contains("config key \"max-body-bytes\" is deprecated: use [limits] max-body-bytes"),
        "{}",
        read_log()
    );
}

#[test]
fn a_file_with_a_former_key_and_its_new_one_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = refused(
        dir.path(),
        "node-timeout-ms = 6000\n[nodes]\ntimeout-ms = 8000\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("config key \"node-timeout-ms\" and [nodes] timeout-ms are both set"),
        "{stderr}"
    );
}

#[test]
fn a_value_that_cannot_work_is_refused_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr) = refused(
        dir.path(),
        "[nodes]\nheartbeat-interval-ms = 1000\ntimeout-ms = 1500\n",
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "config key nodes.timeout-ms ([nodes] timeout-ms in a file, \
             CALDERA_NODES__TIMEOUT_MS in the environment): \
             must be at least twice nodes.heartbeat-interval-ms"
        ),
        "{stderr}"
    );
    let (code, stderr) = refused(dir.path(), "[scheduling]\nmax-image-puls = 2\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown key `scheduling.max-image-puls`"),
        "{stderr}"
    );
}

#[test]
fn environment_variables_follow_the_sections_and_a_former_one_beside_its_new_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let file = dir.path().join("empty.toml");
    std::fs::write(&file, "").unwrap();
    let log = dir.path().join("server.log");
    let mut cmd = server(&file);
    cmd.env("CALDERA_SERVER__LISTEN", &addr)
        .env("CALDERA_SERVER__OPERATOR_TOKEN", OPERATOR_TOKEN)
        .env("CALDERA_STORAGE__DATA_DIR", dir.path().join("data"))
        .env("CALDERA_LIMITS__MAX_BODY_BYTES", "2048");
    let (_running, api) = answering(cmd, &log, &addr, "CALDERA_SERVER__LISTEN");
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let body = format!(r#"{{"task_id":"x","image":"{}"}}"#, "a".repeat(4096));
    let r = api.post("/v1/tasks?tenant=nobody", &body);
    assert_eq!(r.status, 413, "{:#}", r.body);
    assert!(!read_log().contains("deprecated"), "{}", read_log());

    let both = server(&file)
        .env("CALDERA_NODE_TIMEOUT_MS", "6000")
        .env("CALDERA_NODES__TIMEOUT_MS", "8000")
        .stdout(Stdio::null())
        .output()
        .expect("caldera runs");
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert_eq!(both.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("CALDERA_NODE_TIMEOUT_MS and CALDERA_NODES__TIMEOUT_MS are both set"),
        "{stderr}"
    );
}
