//! The test fixture `infer-server` itself: what the readiness, endpoint and
//! swap tests rely on it doing (ready only once loaded, never with
//! INFER_NEVER_READY, answering its model version, exiting on request).
use caldera_chaos_tests::http::Api;
use caldera_chaos_tests::process::{free_port, wait_until};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_infer-server");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(port: u16, model: &std::path::Path, env: &[(&str, &str)]) -> Server {
    let mut c = Command::new(SERVER);
    c.env("CALDERA_PORT", port.to_string())
        .env("CALDERA_MODEL_PATH", model)
        .env("CALDERA_MODEL_NAME", "llm")
        .env("CALDERA_MODEL_VERSION", "v3");
    for (k, v) in env {
        c.env(k, v);
    }
    Server(c.spawn().unwrap())
}

#[test]
fn it_is_ready_only_after_its_load_time_and_answers_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("weights");
    std::fs::write(&model, vec![7u8; 4096]).unwrap();
    let port = free_port();
    let begun = Instant::now();
    let _s = start(port, &model, &[("INFER_LOAD_MS", "1500")]);
    let api = Api::new(&format!("127.0.0.1:{port}"), None);
    assert!(wait_until(Duration::from_secs(10), || api.get("/").status == 200));
    assert_eq!(api.get("/ready").status, 503, "ready before its load time");
    assert!(wait_until(Duration::from_secs(10), || api
        .get("/ready")
        .status
        == 200));
    assert!(begun.elapsed() >= Duration::from_millis(1500));
    let info = api.get("/infer").body;
    assert_eq!(info["version"], "v3");
    assert_eq!(info["model"], "llm");
    assert_eq!(info["model_bytes"], 4096);
    assert_eq!(info["port"], port);
}

#[test]
fn never_ready_stays_unready_and_exit_after_ends_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("weights");
    std::fs::write(&model, b"w").unwrap();
    let port = free_port();
    let mut s = start(
        port,
        &model,
        &[("INFER_NEVER_READY", "1"), ("INFER_EXIT_AFTER_MS", "2500")],
    );
    let api = Api::new(&format!("127.0.0.1:{port}"), None);
    assert!(wait_until(Duration::from_secs(10), || api.get("/").status == 200));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(api.get("/ready").status, 503);
    assert!(wait_until(Duration::from_secs(10), || s
        .0
        .try_wait()
        .unwrap()
        .is_some()));
    assert_eq!(s.0.wait().unwrap().code(), Some(3));
}
