//! kill -9 of a real agent process in the middle of a fetch, then a restart:
//! the new agent finds the `.partial` (its hello reports it as a fetch with
//! its bytes, and no verified copy), never uses it, and the next warm
//! resumes it with `Range: bytes=N-` and verifies the whole file.
//!
//! The agent is this test binary run again with `AGENT_DATA_DIR` set: the
//! same `caldera_node::run` that `caldera node` calls, in its own process,
//! so SIGKILL hits a real agent mid-write. `cargo test -p caldera-node
//! --test weights_kill`.
#[path = "it/common/mod.rs"]
mod common;

use caldera_node::cache::digest::sha256_of_bytes;
use caldera_spec::wire::{NodeMessage, ServerMessage, WarmCommand, WarmupProgress, WeightSource};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

const DATA_DIR: &str = "AGENT_DATA_DIR";
const JOIN_URL: &str = "AGENT_JOIN_URL";
const SIZE: usize = 3_000_000;

fn main() {
    if let Ok(dir) = std::env::var(DATA_DIR) {
        let url = std::env::var(JOIN_URL).unwrap_or_default();
        let mut config = agent_config(&url, Path::new(&dir));
        config.node_name = "kill-node".into();
        config.cache_gb = 0.1;
        if let Err(e) = caldera_node::run(config) {
            eprintln!("agent: {e}");
            std::process::exit(1);
        }
        return;
    }
    let system = actix_rt::System::new();
    system.block_on(a_kill_9_mid_fetch_is_resumed_by_the_next_agent_and_verified());
    println!("test a_kill_9_mid_fetch_is_resumed_by_the_next_agent_and_verified ... ok");
}

/// The agent process; SIGKILLed when dropped.
struct AgentProcess(Child);

impl AgentProcess {
    fn start(url: &str, data: &Path, log: &Path) -> AgentProcess {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(std::env::current_exe().unwrap())
            .env(DATA_DIR, data)
            .env(JOIN_URL, url)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        AgentProcess(child)
    }

    fn kill_9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.kill_9();
    }
}

fn warm(epoch: u64, sha: &str, uri: String) -> ServerMessage {
    ServerMessage::Warm(WarmCommand {
        epoch,
        model: "llama:v1".into(),
        sha256: sha.into(),
        size_bytes: SIZE as u64,
        source: WeightSource::Origin { uri },
        pinned: false,
        origin: caldera_spec::weights::OriginAccess {
            rules: caldera_spec::origin::OriginRules::anything(),
            confined: None,
        },
        owner: None,
    })
}

async fn progress(c: &mut FakeConn, sha: &str) -> WarmupProgress {
    c.until_in(Duration::from_secs(30), |m| match m {
        NodeMessage::Warmup(r) if r.sha256 == sha => Some(r.progress.clone()),
        _ => None,
    })
    .await
}

async fn a_kill_9_mid_fetch_is_resumed_by_the_next_agent_and_verified() {
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (0..SIZE).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("w.bin"), &bytes).unwrap();
    let sha = sha256_of_bytes(&bytes);
    let origin = origin::start(dir.path());
    // 16 kB every 20 ms (about 800 kB/s): the 3 MB take ~4 s, time to kill.
    origin.state.delay_ms.store(20, Ordering::Relaxed);
    let data = dir.path().join("node");
    let log = dir.path().join("agent.log");
    let cache = |p: &str| -> PathBuf { data.join("cache").join(p) };
    let partial = cache(&format!("{sha}.partial"));

    let mut agent = AgentProcess::start(&url, &data, &log);
    let mut c = next_conn(&mut conns).await;
    c.hello().await;
    c.send(welcome(1, &[], &[]));
    c.send(warm(1, &sha, origin.uri("w.bin")));
    loop {
        match progress(&mut c, &sha).await {
            WarmupProgress::Fetching { bytes_done, .. } if bytes_done > 0 => break,
            WarmupProgress::Fetching { .. } => {}
            other => panic!("before the kill: {other:?}"),
        }
    }
    agent.kill_9();
    let cut = std::fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
    assert!(cut > 0 && cut < SIZE as u64, "partial of {cut} bytes");
    assert!(
        !cache(&format!("weights/{sha}")).exists(),
        "a partial is never renamed in"
    );

    // The next agent: the partial is a fetch with its bytes, not a copy.
    origin.state.delay_ms.store(0, Ordering::Relaxed);
    let _agent = AgentProcess::start(&url, &data, &log);
    let mut c = next_conn(&mut conns).await;
    let hello = c.hello().await;
    assert!(hello.cache.entries.is_empty(), "{:?}", hello.cache);
    assert_eq!(hello.cache.fetching.len(), 1, "{:?}", hello.cache);
    assert_eq!(hello.cache.fetching[0].sha256, sha);
    let resumed_at = hello.cache.fetching[0].bytes_done;
    assert!(resumed_at >= cut, "{resumed_at} < {cut}");
    c.send(welcome(2, &[], &[]));
    c.send(warm(2, &sha, origin.uri("w.bin")));
    let fetched = loop {
        match progress(&mut c, &sha).await {
            WarmupProgress::Verified { bytes_fetched, .. } => break bytes_fetched,
            WarmupProgress::Fetching { .. } => {}
            other => panic!("after the restart: {other:?}"),
        }
    };
    assert_eq!(fetched, SIZE as u64 - resumed_at);
    let asked = origin.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[1], Some(format!("bytes={resumed_at}-")));
    let copy = std::fs::read(cache(&format!("weights/{sha}"))).unwrap();
    assert_eq!(sha256_of_bytes(&copy), sha);
    assert!(!partial.exists());
    origin.handle.stop(false).await;
    server.stop(false).await;
}
