//! Lease fencing, node side: a shim whose lease is not
//! renewed stops its workload by itself. The agent renews each shim's lease
//! whenever the control plane confirms a heartbeat (`LeaseRenewed`); here the
//! agent is frozen with SIGSTOP, so renewals stop, and the workload — which
//! runs on, unaware — must be stopped within lease + grace of the freeze,
//! measured from its own timestamped output. Real server, agent and shim.
use caldera_chaos_tests::ticks::now_s;
use caldera_chaos_tests::{nodes_connected, wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const LEASE_MS: u64 = 2000;
const GRACE_MS: u64 = 1000;

fn timestamps(log: &str) -> Vec<f64> {
    log.lines()
        .filter_map(|l| l.strip_prefix("t=")?.trim().parse().ok())
        .collect()
}

#[test]
fn a_frozen_agents_workload_is_stopped_by_its_shim_when_the_lease_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let lease = LEASE_MS.to_string();
    let cp = ControlPlane::start(
        Path::new(BIN),
        &dir.path().join("cp"),
        &[("CALDERA_WORKLOAD_LEASE_MS", &lease)],
    );
    let grace = GRACE_MS.to_string();
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "frozen-node",
        "1xA100-80GB",
        dir.path(),
        &["--workload-uid-range", "off", "--shutdown-grace-ms", &grace],
    );
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));
    let api = cp.api(&cp.tenant("leased"));
    let body = r#"{"task_id":"ticker","task_type":"training","resources":{"gpu":{"count":1}},"command":["sh","-c","trap 'echo got-sigterm; exit 0' TERM; while :; do echo t=$(date +%s.%N); sleep 0.1; done"]}"#;
    assert_eq!(api.post("/v1/tasks", body).status, 201);
    api.wait_task("ticker", 20, "running", |v| v["state"] == "running");
    let shim_dir = agent.data_dir.join("shims/leased+ticker.1");
    let log_path = agent.data_dir.join("logs/leased/leased+ticker.log");

    // Renewals keep it running well past one lease.
    std::thread::sleep(Duration::from_millis(2 * LEASE_MS));
    assert!(
        !shim_dir.join("exit.json").exists(),
        "stopped although the control plane renewed the lease"
    );

    agent.pause();
    let frozen_at = now_s();
    let stopped = wait_until(Duration::from_secs(20), || {
        shim_dir.join("exit.json").exists()
    });
    let exit = std::fs::read_to_string(shim_dir.join("exit.json")).unwrap_or_default();
    agent.resume();
    assert!(stopped, "the workload outlived its lease");
    assert!(exit.contains(r#""reason":"lease_expired""#), "{exit}");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(log.contains("got-sigterm"), "SIGTERM first: {log}");
    let last = timestamps(&log).last().copied().unwrap_or(0.0);
    // The lease runs from the last confirmed heartbeat's send, at most a
    // heartbeat period (250 ms) before the freeze; 1 s of slack for the tick.
    let bound = (LEASE_MS + GRACE_MS) as f64 / 1000.0 + 1.0;
    let ran_on = last - frozen_at;
    eprintln!("the workload's last output came {ran_on:.2} s after the agent froze (lease {LEASE_MS} ms, grace {GRACE_MS} ms)");
    assert!(
        ran_on <= bound,
        "ran {ran_on:.2} s after the freeze, more than lease + grace ({bound} s)"
    );
}
