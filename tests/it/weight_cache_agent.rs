//! The weight cache of a real `caldera node` next to a real control plane:
//! the cache flags are taken, the cache dir is laid out (0700, an index 0600),
//! the peer server listens where the agent says and refuses a request
//! without a grant; a bad `--cache-gb` is refused naming the flag. (Warming,
//! fetching and peer transfers are covered against a fake control plane in
//! `node/tests/it/weights.rs` and `weights_kill.rs`.)
use caldera_chaos_tests::{nodes_connected, wait_until, Agent, Api, ControlPlane};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// The peer server's address from the agent's log line.
fn peer_addr(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let line = text
        .lines()
        .find(|l| l.contains("serving verified weight copies to peers on"))?;
    let rest = line.split(" on ").nth(1)?;
    Some(rest.split_whitespace().next()?.to_string())
}

#[test]
fn a_real_agent_lays_out_its_cache_and_serves_peers_only_with_a_grant() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let flags = [
        "--workload-uid-range",
        "off",
        "--cache-gb",
        "0.01",
        "--peer-listen",
        "127.0.0.1:0",
    ];
    let agent = Agent::start_with(
        Path::new(BIN),
        &cp,
        "cache-1",
        "1xA100-80GB",
        dir.path(),
        &flags,
    );
    assert!(wait_until(Duration::from_secs(20), || nodes_connected(&cp) == 1));

    // The cache is the agent's alone; workloads open their links in `models/`.
    let cache = agent.data_dir.join("cache");
    for d in [cache.clone(), cache.join("weights")] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    let index = std::fs::metadata(cache.join("index.json")).unwrap();
    assert_eq!(index.permissions().mode() & 0o777, 0o600);

    let mut addr = None;
    assert!(wait_until(Duration::from_secs(10), || {
        addr = peer_addr(&agent.log);
        addr.is_some()
    }));
    let peer = Api::new(&addr.unwrap(), None);
    let sha = "a".repeat(64);
    assert_eq!(peer.get(&format!("/v1/weights/{sha}")).status, 401);
    let wrong = peer.with_token("not-granted");
    assert_eq!(wrong.get(&format!("/v1/weights/{sha}")).status, 401);
}

#[test]
fn a_negative_cache_size_is_refused_naming_the_flag() {
    let out = std::process::Command::new(BIN)
        .args([
            "node",
            "--join",
            "http://127.0.0.1:1",
            "--token",
            "t",
            "--cache-gb=-1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cache-gb -1 must be a number >= 0"), "{err}");
}
