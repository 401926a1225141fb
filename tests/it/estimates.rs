//! Start-estimate accuracy, with a real server and agent:
//! a task that waits behind another is given an estimate from the running
//! one's declared duration; when it is placed, the error of that first
//! estimate is recorded, and `GET /v1/stats/estimates` and `/metrics` count it.
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn whole_gpu(id: &str, duration: &str, seconds: u32) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","duration":"{duration}",
            "resources":{{"gpu":{{"count":1}}}},"command":["sleep","{seconds}"]}}"#
    )
}

#[test]
fn a_waiting_tasks_first_estimate_is_measured_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/node-a").data()["connected"] == true
    }));
    let api = cp.api(&cp.tenant("team-a"));
    assert_eq!(
        api.post("/v1/tasks", &whole_gpu("first", "00:00:04", 2))
            .status,
        201
    );
    api.wait_task("first", 20, "running", |v| v["state"] == "running");
    assert_eq!(
        api.post("/v1/tasks", &whole_gpu("second", "00:00:04", 1))
            .status,
        201
    );
    let queued = api.wait_task("second", 20, "an estimate", |v| {
        v["state"] == "queued" && v["estimated_start_ms"].is_u64()
    });
    let estimate = queued["estimated_start_ms"].as_u64().unwrap_or(0);
    let placed = api.wait_task("second", 30, "placed", |v| {
        v["allocation"]["created_ms"].is_u64()
    });
    let error_ms = placed["allocation"]["created_ms"].as_i64().unwrap_or(0) - estimate as i64;
    // `first` declared 4 s and ended after 2: placed about 2 s early.
    assert!(error_ms < 0, "placed before its estimate: {error_ms} ms");
    let stats = cp.operator().get("/v1/stats/estimates").data().clone();
    assert_eq!(stats["tasks"], 1, "{stats:#}");
    assert_eq!(stats["within_1m"], 1.0, "{stats:#}");
    let median = stats["median_error_s"].as_f64().unwrap_or(0.0);
    assert!(
        (median * 1000.0 - error_ms as f64).abs() < 1.0,
        "the median of one error is that error: {median} s vs {error_ms} ms"
    );
    let metrics = cp.operator().get("/metrics").body;
    let metrics = caldera_chaos_tests::exposition::parse(metrics.as_str().unwrap_or_default())
        .expect("a valid exposition");
    let measured = metrics.value("caldera_start_estimates_measured", &[]);
    let within = metrics.value("caldera_start_estimates_within_ratio", &[("window", "1m")]);
    assert_eq!((measured, within), (Some(1.0), Some(1.0)));
}
