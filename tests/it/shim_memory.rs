//! What a workload's shim costs, and what the agent costs with 100 workloads
//! (a measure): `cargo test --release --test it shim_memory:: -- --ignored
//! --nocapture` prints the figures `docs/benchmarks/leases-and-fencing.md` quotes.
//! No timed or size assertion (figures depend on the build); it checks only
//! that every workload runs under its own live shim. GPUs are simulated:
//! the workloads are CPU-only `sleep`s.
use caldera_chaos_tests::{nodes_connected, shims, wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const WORKLOADS: usize = 100;

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[test]
#[ignore = "measurement: starts 100 workloads"]
fn shim_and_agent_memory_with_100_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let agent = Agent::start(Path::new(BIN), &cp, "rss-node", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));
    let agent_idle = agent.pid().and_then(|p| shims::status_kb(p, "VmRSS"));
    let api = cp.api(&cp.tenant("many"));
    for i in 0..WORKLOADS {
        let body = format!(
            r#"{{"task_id":"w{i}","task_type":"training","resources":{{"cpu":{{"cores":0.1}}}},"command":["sleep","600"]}}"#
        );
        assert_eq!(api.post("/v1/tasks", &body).status, 201);
    }
    let all_running = wait_until(Duration::from_secs(120), || {
        shims::shims(&agent.data_dir)
            .iter()
            .filter(|s| s.shim.is_some() && s.workload.is_some())
            .count()
            == WORKLOADS
    });
    assert!(all_running, "not every workload runs under a live shim");
    std::thread::sleep(Duration::from_secs(2));
    let procs = shims::shims(&agent.data_dir);
    let field = |f: &str| -> Vec<u64> {
        procs
            .iter()
            .filter_map(|s| shims::status_kb(s.shim?, f))
            .collect()
    };
    let (rss, anon) = (field("VmRSS"), field("RssAnon"));
    let agent_busy = agent.pid().and_then(|p| shims::status_kb(p, "VmRSS"));
    println!(
        "shims: {} | VmRSS median {} kB, max {} kB | RssAnon (private) median {} kB, max {} kB",
        rss.len(),
        median(rss.clone()),
        rss.iter().max().copied().unwrap_or(0),
        median(anon.clone()),
        anon.iter().max().copied().unwrap_or(0),
    );
    println!(
        "agent VmRSS: {} kB idle, {} kB with {WORKLOADS} workloads",
        agent_idle.unwrap_or(0),
        agent_busy.unwrap_or(0)
    );
    let exits: Vec<String> = procs
        .iter()
        .filter_map(|s| std::fs::read_to_string(s.dir.join("exit.json")).ok())
        .collect();
    assert!(
        exits.is_empty(),
        "{} ended: {:?}",
        exits.len(),
        exits.first()
    );
    assert_eq!(rss.len(), WORKLOADS);
}
