//! The agent's weight cache over real sockets and files: a start held in
//! warming until a warm from a `file://` or an `http://` origin verifies its
//! copy (then the workload reads it), a hit the second time, resumes by
//! Range, a peer transfer under a grant (401 without one), a peer that
//! dies mid-transfer resumed from the origin, and a declared size that lies.
use crate::common;

use caldera_node::cache::digest::sha256_of_bytes;
use caldera_spec::wire::{
    CacheReport, ModelMount, NodeMessage, PeerGrant, ServerMessage, WarmCommand, WarmupProgress,
    WeightSource, WorkloadEventKind,
};
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A generated weights file of `size` bytes and its sha256.
fn weights_file(dir: &Path, name: &str, size: usize, seed: u8) -> (PathBuf, String) {
    let bytes: Vec<u8> = (0..size)
        .map(|i| ((i / 7) as u8).wrapping_mul(13) ^ seed)
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    (path, sha256_of_bytes(&bytes))
}

fn mount(sha: &str, size: u64) -> ModelMount {
    ModelMount {
        name: "llama".into(),
        version: "v1".into(),
        sha256: sha.into(),
        size_bytes: size,
        private: false,
        owner: None,
    }
}

fn warm(epoch: u64, sha: &str, size: u64, source: WeightSource) -> ServerMessage {
    ServerMessage::Warm(WarmCommand {
        epoch,
        model: "llama:v1".into(),
        sha256: sha.into(),
        size_bytes: size,
        source,
        pinned: false,
        origin: caldera_spec::weights::OriginAccess {
            rules: caldera_spec::origin::OriginRules::anything(),
            confined: None,
        },
        owner: None,
    })
}

fn file_origin(path: &Path) -> WeightSource {
    WeightSource::Origin {
        uri: format!("file://{}", path.display()),
    }
}

/// The next warmup report of `sha` that `f` accepts.
async fn warmup<T>(c: &mut FakeConn, sha: &str, f: impl Fn(&WarmupProgress) -> Option<T>) -> T {
    c.until_in(Duration::from_secs(30), |m| match m {
        NodeMessage::Warmup(r) if r.sha256 == sha => f(&r.progress),
        _ => None,
    })
    .await
}

async fn verified(c: &mut FakeConn, sha: &str) -> u64 {
    warmup(c, sha, |p| match p {
        WarmupProgress::Verified { bytes_fetched, .. } => Some(*bytes_fetched),
        WarmupProgress::Failed { reason, .. } => panic!("warm failed: {reason}"),
        _ => None,
    })
    .await
}

/// The cache report of the next heartbeat that `f` accepts.
async fn cache_when(c: &mut FakeConn, f: impl Fn(&CacheReport) -> bool) -> CacheReport {
    c.until(|m| match m {
        NodeMessage::Heartbeat(h) => h.cache.clone().filter(|r| f(r)),
        _ => None,
    })
    .await
}

/// An agent with a cache (and a peer server) welcomed under epoch 1.
async fn cached_agent(
    url: &str,
    conns: &mut tokio::sync::mpsc::UnboundedReceiver<FakeConn>,
    dir: &Path,
    name: &str,
    peer_max_mbps: Option<f64>,
) -> (RunningAgent, FakeConn, Option<String>) {
    let mut config = agent_config(url, dir);
    config.node_name = name.into();
    config.cache_gb = 0.1;
    config.peer_listen = Some("127.0.0.1:0".into());
    config.peer_max_mbps = peer_max_mbps;
    let agent = RunningAgent::spawn(config);
    let mut c = next_conn(conns).await;
    let hello = c.hello().await;
    assert_eq!(
        hello.cache.capacity_bytes,
        (0.1 * (1u64 << 30) as f64) as u64
    );
    c.send(welcome(1, &[], &[]));
    (agent, c, hello.peer_url)
}

/// The kinds of `alloc`'s events up to its exit (names and Warming sources).
async fn events_until_exit(c: &mut FakeConn, alloc: &str) -> (Vec<String>, Option<i32>) {
    let mut seen = Vec::new();
    let code = c
        .until_in(Duration::from_secs(30), |m| match m {
            NodeMessage::Event(e) if e.allocation_id == alloc => match &e.kind {
                WorkloadEventKind::Exited(x) => Some(x.code),
                WorkloadEventKind::Warming { source, .. } => {
                    seen.push(format!("Warming({source})"));
                    None
                }
                k => {
                    seen.push(
                        format!("{k:?}")
                            .split([' ', '(', '{'])
                            .next()
                            .unwrap_or("")
                            .into(),
                    );
                    None
                }
            },
            _ => None,
        })
        .await;
    seen.dedup();
    (seen, code)
}

/// A workload that prints what it was given and the checksum of what it reads.
const READ_MODEL: &str = r#"echo "$CALDERA_MODEL_NAME:$CALDERA_MODEL_VERSION"; sha256sum < "$CALDERA_MODEL_PATH"; echo "$CALDERA_MODEL_PATH""#;

#[actix_rt::test]
async fn a_start_warms_from_a_file_origin_then_reads_its_copy_and_a_second_start_is_a_hit() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (path, sha) = weights_file(dir.path(), "w.bin", 3_000_000, 1);
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &dir.path().join("n"), "w1", None).await;

    let mut cmd = start_command("a1", 1, READ_MODEL);
    cmd.model = Some(mount(&sha, 3_000_000));
    c.send(ServerMessage::Start(cmd.clone()));
    // It waits in warming (no copy, nothing fetching) until a warm comes.
    let (_, waiting) = c
        .event("a1", |k| matches!(k, WorkloadEventKind::Warming { .. }))
        .await;
    let WorkloadEventKind::Warming {
        source,
        bytes_done,
        size_bytes,
        model,
        ..
    } = waiting
    else {
        unreachable!()
    };
    assert_eq!(
        (source.as_str(), bytes_done, size_bytes),
        ("", 0, 3_000_000)
    );
    assert_eq!(model, "llama:v1");
    c.send(warm(1, &sha, 3_000_000, file_origin(&path)));
    let (seen, code) = events_until_exit(&mut c, "a1").await;
    assert_eq!(code, Some(0), "{seen:?}");
    assert!(seen.iter().any(|s| s == "Warming(origin)"), "{seen:?}");
    // Without a readiness probe it is reported ready right after it starts.
    assert_eq!(
        &seen[seen.len() - 3..],
        ["Ready", "Started", "Readiness"],
        "{seen:?}"
    );
    let log = std::fs::read_to_string(dir.path().join("n/logs/_/task-a1.log")).unwrap();
    let node = dir.path().join("n").canonicalize().unwrap();
    let copy = node.join("cache/weights").join(&sha);
    // A workload of its own uid opens a link to the copy (the operator's
    // version: in the dir every tenant may enter); as the agent, the copy.
    let path = log.lines().nth(2).unwrap_or_default();
    let link = node.join("models/shared").join(&sha);
    assert!(
        path == link.to_str().unwrap() || path == copy.to_str().unwrap(),
        "{log}"
    );
    assert_eq!(
        log,
        format!("llama:v1\n{sha}  -\n{path}\n"),
        "the workload read the verified copy"
    );
    use std::os::unix::fs::MetadataExt;
    let inode = |p: &std::path::Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(
        inode(std::path::Path::new(path)),
        inode(&copy),
        "the copy itself, linked"
    );
    let report = cache_when(&mut c, |r| !r.entries.is_empty()).await;
    assert_eq!(report.counters.bytes_from_origin, 3_000_000);
    assert_eq!(report.counters.hits, 0);

    // The same version again: a hit (checked, nothing fetched).
    let mut again = start_command("a2", 1, READ_MODEL);
    again.model = cmd.model.clone();
    c.send(ServerMessage::Start(again));
    let (seen, code) = events_until_exit(&mut c, "a2").await;
    assert_eq!(code, Some(0));
    assert_eq!(
        seen,
        [
            "Preparing",
            "Warming(cache)",
            "Ready",
            "Started",
            "Readiness"
        ]
    );
    let report = cache_when(&mut c, |r| r.counters.hits == 1).await;
    assert_eq!(report.counters.bytes_from_origin, 3_000_000);
    assert_eq!(report.entries[0].in_use, 0);
    agent.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn an_http_origin_resumes_with_range_and_one_without_ranges_restarts() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let origin = origin::start(dir.path());
    let (_, sha) = weights_file(dir.path(), "w.bin", 1_000_000, 2);
    let node = dir.path().join("n");
    // A cut fetch left 400000 bytes (the cache dir as an earlier agent left it).
    let good = std::fs::read(dir.path().join("w.bin")).unwrap();
    std::fs::create_dir_all(node.join("cache")).unwrap();
    let partial = node.join("cache").join(format!("{sha}.partial"));
    std::fs::write(&partial, &good[..400_000]).unwrap();
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &node, "w2", None).await;
    let http = WeightSource::Origin {
        uri: origin.uri("w.bin"),
    };
    c.send(warm(1, &sha, 1_000_000, http.clone()));
    assert_eq!(verified(&mut c, &sha).await, 600_000);
    assert_eq!(origin.asked(), [Some("bytes=400000-".to_string())]);
    assert_eq!(
        std::fs::read(node.join("cache/weights").join(&sha)).unwrap(),
        good
    );

    // An origin that ignores Range answers 200: the fetch starts again at 0.
    let (_, sha2) = weights_file(dir.path(), "w2.bin", 500_000, 3);
    let good2 = std::fs::read(dir.path().join("w2.bin")).unwrap();
    std::fs::write(
        node.join("cache").join(format!("{sha2}.partial")),
        &good2[..100_000],
    )
    .unwrap();
    origin
        .state
        .ranges
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let http2 = WeightSource::Origin {
        uri: origin.uri("w2.bin"),
    };
    c.send(warm(1, &sha2, 500_000, http2));
    assert_eq!(verified(&mut c, &sha2).await, 500_000);

    agent.join().await;
    origin.handle.stop(false).await;
    server.stop(false).await;
}

/// GET of a peer's `/v1/weights/{sha}`: the status and body length.
async fn peer_get(peer: &str, sha: &str, token: Option<&str>) -> (u16, usize) {
    let client = awc::Client::default();
    let mut req = client.get(format!("{peer}/v1/weights/{sha}"));
    if let Some(t) = token {
        req = req.insert_header(("Authorization", format!("Bearer {t}")));
    }
    let mut resp = req.send().await.unwrap();
    let body = resp.body().limit(64 << 20).await.unwrap();
    (resp.status().as_u16(), body.len())
}

fn grant(token: &str, sha: &str, receiver: &str) -> ServerMessage {
    ServerMessage::PeerGrant(PeerGrant {
        epoch: 1,
        token: token.into(),
        sha256: sha.into(),
        receiver: receiver.into(),
        expires_at_ms: caldera_node::runtime::now_ms() + 60_000,
        owner: None,
    })
}

/// Two cache agents, `a` holding a verified copy of a generated file of
/// `size` bytes (from a `file://` origin), `b` empty: a peer and its
/// receiver. Returns a, its connection, b, its connection, a's peer url and
/// the file's sha256.
async fn peer_and_receiver(
    url: &str,
    conns: &mut tokio::sync::mpsc::UnboundedReceiver<FakeConn>,
    dir: &Path,
    names: (&str, &str),
    size: usize,
    seed: u8,
) -> (
    RunningAgent,
    FakeConn,
    RunningAgent,
    FakeConn,
    String,
    String,
) {
    let (path, sha) = weights_file(dir, "w.bin", size, seed);
    let (a, mut ca, peer_a) = cached_agent(url, conns, &dir.join("a"), names.0, None).await;
    let (b, cb, _) = cached_agent(url, conns, &dir.join("b"), names.1, None).await;
    ca.send(warm(1, &sha, size as u64, file_origin(&path)));
    verified(&mut ca, &sha).await;
    (a, ca, b, cb, peer_a.expect("a peer url"), sha)
}

/// A grant for the version of `owner` (None: the operator's).
fn grant_for(token: &str, sha: &str, receiver: &str, owner: Option<&str>) -> ServerMessage {
    match grant(token, sha, receiver) {
        ServerMessage::PeerGrant(g) => ServerMessage::PeerGrant(PeerGrant {
            owner: owner.map(String::from),
            ..g
        }),
        other => other,
    }
}

/// A peer holding tenant B's private copy serves it to a receiver of B's
/// version, and to a receiver of another tenant's version declaring the same
/// digest answers 404, as for a copy it does not hold; nor does the
/// receiver's cache count B's copy as its own version's.
#[actix_rt::test]
async fn a_peer_serves_a_tenants_private_copy_only_to_that_tenants_version() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let size = 300_000;
    let (path, sha) = weights_file(dir.path(), "b.bin", size, 6);
    let (a, mut ca, peer_a) =
        cached_agent(&url, &mut conns, &dir.path().join("a"), "pa", None).await;
    let for_b = |source| match warm(1, &sha, size as u64, source) {
        ServerMessage::Warm(w) => ServerMessage::Warm(WarmCommand {
            owner: Some("tenant-b".into()),
            ..w
        }),
        other => other,
    };
    ca.send(for_b(file_origin(&path)));
    verified(&mut ca, &sha).await;
    let report = cache_when(&mut ca, |r| !r.entries.is_empty()).await;
    assert_eq!(
        (report.entries[0].shared, report.entries[0].tenants.clone()),
        (false, vec!["tenant-b".to_string()])
    );
    let peer_a = peer_a.expect("a peer url");
    ca.send(grant_for("t-a", &sha, "pb", Some("tenant-a")));
    ca.send(grant_for("t-shared", &sha, "pb", None));
    ca.send(grant_for("t-b", &sha, "pb", Some("tenant-b")));
    // Grants apply in order: once B's works, the others are in.
    let mut tries = 0;
    while peer_get(&peer_a, &sha, Some("t-b")).await != (200, size) {
        tries += 1;
        assert!(tries < 100, "B's grant never took effect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        peer_get(&peer_a, &sha, Some("t-a")).await.0,
        404,
        "tenant A got B's copy"
    );
    assert_eq!(
        peer_get(&peer_a, &sha, Some("t-shared")).await.0,
        404,
        "an operator's version got B's copy"
    );
    a.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_peer_serves_its_verified_copy_only_to_a_granted_receiver() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (a, mut ca, b, mut cb, peer_a, sha) =
        peer_and_receiver(&url, &mut conns, dir.path(), ("pa", "pb"), 2_000_000, 4).await;

    // No token, a wrong token: 401. A live grant for a version a does not hold: 404.
    assert_eq!(peer_get(&peer_a, &sha, None).await.0, 401);
    assert_eq!(peer_get(&peer_a, &sha, Some("wrong")).await.0, 401);
    let other = "d".repeat(64);
    ca.send(grant("t-other", &other, "pb"));
    ca.send(grant("t-b", &sha, "pb"));
    // The grants are applied in order: once the second works, the first is in.
    let mut tries = 0;
    while peer_get(&peer_a, &sha, Some("t-b")).await.0 != 200 {
        tries += 1;
        assert!(tries < 100, "the grant never took effect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(peer_get(&peer_a, &other, Some("t-other")).await.0, 404);
    assert_eq!(
        peer_get(&peer_a, &sha, Some("t-other")).await.0,
        401,
        "a grant opens one version"
    );

    let from_a = WeightSource::Peer {
        node: "pa".into(),
        url: peer_a.clone(),
        token: "t-b".into(),
    };
    cb.send(warm(1, &sha, 2_000_000, from_a));
    assert_eq!(verified(&mut cb, &sha).await, 2_000_000);
    let rb = cache_when(&mut cb, |r| !r.entries.is_empty()).await;
    assert_eq!(
        (rb.counters.bytes_from_peers, rb.counters.bytes_from_origin),
        (2_000_000, 0)
    );
    // a served its copy twice: the probe GET above and b's fetch.
    let ra = cache_when(&mut ca, |r| r.counters.bytes_served >= 4_000_000).await;
    assert_eq!(ra.counters.bytes_served, 4_000_000);
    b.join().await;
    a.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_peer_that_dies_mid_transfer_is_resumed_from_the_origin() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (path, sha) = weights_file(dir.path(), "w.bin", 2_000_000, 5);
    // a serves at 1 Mbit/s (125 kB/s): its 2 MB take 16 s; it is cut long before.
    let (a, mut ca, peer_a) =
        cached_agent(&url, &mut conns, &dir.path().join("a"), "da", Some(1.0)).await;
    let (b, mut cb, _) = cached_agent(&url, &mut conns, &dir.path().join("b"), "db", None).await;
    ca.send(warm(1, &sha, 2_000_000, file_origin(&path)));
    verified(&mut ca, &sha).await;
    ca.send(grant("t-b", &sha, "db"));
    let from_a = WeightSource::Peer {
        node: "da".into(),
        url: peer_a.expect("a peer url"),
        token: "t-b".into(),
    };
    cb.send(warm(1, &sha, 2_000_000, from_a));
    warmup(&mut cb, &sha, |p| match p {
        WarmupProgress::Fetching { bytes_done, .. } if *bytes_done > 0 => Some(()),
        WarmupProgress::Failed { reason, .. } => panic!("{reason}"),
        _ => None,
    })
    .await;
    // The peer goes away mid-transfer: b says so and keeps what it has.
    a.join().await;
    let (source, cut_at) = warmup(&mut cb, &sha, |p| match p {
        WarmupProgress::Failed {
            source, bytes_done, ..
        } => Some((source.clone(), *bytes_done)),
        WarmupProgress::Verified { .. } => panic!("the transfer was not cut"),
        _ => None,
    })
    .await;
    assert_eq!(source, "peer da");
    assert!(cut_at > 0 && cut_at < 2_000_000, "{cut_at}");
    // The control plane names the origin next: only the rest is read.
    cb.send(warm(1, &sha, 2_000_000, file_origin(&path)));
    assert_eq!(verified(&mut cb, &sha).await, 2_000_000 - cut_at);
    let rb = cache_when(&mut cb, |r| !r.entries.is_empty()).await;
    assert_eq!(rb.counters.bytes_from_peers, cut_at);
    assert_eq!(rb.counters.bytes_from_origin, 2_000_000 - cut_at);
    let copy = std::fs::read(dir.path().join("b/cache/weights").join(&sha)).unwrap();
    assert_eq!(sha256_of_bytes(&copy), sha);
    b.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn evict_waits_for_the_last_user_pin_is_reported_and_a_stop_ends_warming() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (path, sha) = weights_file(dir.path(), "w.bin", 500_000, 6);
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &dir.path().join("n"), "e1", None).await;
    let copy = dir.path().join("n/cache/weights").join(&sha);

    // A stop while warming: stopped at once, nothing ever ran.
    let mut waiting = start_command("w1", 1, "echo SHOULD-NOT-RUN");
    waiting.model = Some(mount(&"e".repeat(64), 10));
    c.send(ServerMessage::Start(waiting));
    c.event("w1", |k| matches!(k, WorkloadEventKind::Warming { .. }))
        .await;
    c.send(stop("w1"));
    let (_, kind) = c
        .event("w1", |k| matches!(k, WorkloadEventKind::Exited(_)))
        .await;
    let WorkloadEventKind::Exited(exit) = kind else {
        unreachable!()
    };
    assert!(exit.stopped && exit.code.is_none(), "{exit:?}");

    // A running workload holds its copy: an evict waits for it to end.
    c.send(warm(1, &sha, 500_000, file_origin(&path)));
    verified(&mut c, &sha).await;
    let mut user = start_command("u1", 1, "exec sleep 60");
    user.model = Some(mount(&sha, 500_000));
    c.send(ServerMessage::Start(user));
    c.event("u1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let report = cache_when(&mut c, |r| r.entries.iter().any(|e| e.in_use == 1)).await;
    assert_eq!(report.entries[0].sha256, sha);
    c.send(ServerMessage::Pin(caldera_spec::wire::PinCommand {
        epoch: 1,
        sha256: sha.clone(),
        pinned: true,
    }));
    cache_when(&mut c, |r| r.entries.iter().any(|e| e.pinned)).await;
    c.send(ServerMessage::Evict(caldera_spec::wire::EvictCommand {
        epoch: 1,
        sha256: sha.clone(),
        reason: "version retired".into(),
    }));
    // Still there a heartbeat later, in use.
    let report = cache_when(&mut c, |r| r.entries.iter().any(|e| e.in_use == 1)).await;
    assert_eq!(report.entries.len(), 1);
    assert!(copy.exists());
    c.send(stop("u1"));
    let reason = warmup(&mut c, &sha, |p| match p {
        WarmupProgress::Evicted { reason } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, "version retired");
    assert!(!copy.exists());
    let report = cache_when(&mut c, |r| r.entries.is_empty()).await;
    assert_eq!(report.counters.evictions, 1);
    agent.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_node_without_a_cache_refuses_a_start_that_names_a_model() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "nocache".into();
    config.cache_gb = 0.0;
    let agent = RunningAgent::spawn(config);
    let mut c = next_conn(&mut conns).await;
    assert_eq!(c.hello().await.cache.capacity_bytes, 0);
    c.send(welcome(1, &[], &[]));
    let mut cmd = start_command("m1", 1, "true");
    cmd.model = Some(mount(&"f".repeat(64), 10));
    c.send(ServerMessage::Start(cmd));
    let (_, kind) = c
        .event("m1", |k| matches!(k, WorkloadEventKind::StartFailed { .. }))
        .await;
    let WorkloadEventKind::StartFailed { reason, .. } = kind else {
        unreachable!()
    };
    assert!(
        reason.contains("no weight cache (--cache-gb 0)"),
        "{reason}"
    );
    assert!(!dir.path().join("cache").exists());
    agent.join().await;
    server.stop(false).await;
}

fn stop(alloc: &str) -> ServerMessage {
    ServerMessage::Stop(caldera_spec::wire::StopCommand {
        allocation_id: alloc.into(),
        epoch: 1,
        grace_ms: 500,
        reason: "test".into(),
    })
}

#[actix_rt::test]
async fn a_warm_from_another_source_switches_a_running_fetch_and_resumes_it() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let origin = origin::start(dir.path());
    // 16 kB every 50 ms: slow enough to be switched away from.
    origin
        .state
        .delay_ms
        .store(50, std::sync::atomic::Ordering::Relaxed);
    let (path, sha) = weights_file(dir.path(), "w.bin", 2_000_000, 8);
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &dir.path().join("n"), "s1", None).await;
    let slow = WeightSource::Origin {
        uri: origin.uri("w.bin"),
    };
    c.send(warm(1, &sha, 2_000_000, slow));
    let switched_at = warmup(&mut c, &sha, |p| match p {
        WarmupProgress::Fetching { bytes_done, .. } if *bytes_done > 0 => Some(*bytes_done),
        _ => None,
    })
    .await;
    c.send(warm(1, &sha, 2_000_000, file_origin(&path)));
    let (source, fetched) = warmup(&mut c, &sha, |p| match p {
        WarmupProgress::Verified {
            source,
            bytes_fetched,
            ..
        } => Some((source.clone(), *bytes_fetched)),
        WarmupProgress::Failed { reason, .. } => panic!("{reason}"),
        _ => None,
    })
    .await;
    assert_eq!(source, "origin");
    // The file read resumed where the slow one was cut (a little later
    // than the progress report that triggered the switch).
    assert!(
        fetched <= 2_000_000 - switched_at,
        "{fetched} after {switched_at}"
    );
    let report = cache_when(&mut c, |r| !r.entries.is_empty()).await;
    assert_eq!(report.counters.bytes_from_origin, 2_000_000);
    assert_eq!(report.counters.misses, 1, "a switch is not a second miss");
    agent.join().await;
    origin.handle.stop(false).await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_workload_adopted_after_a_handover_still_holds_its_copy() {
    use caldera_node::agent::{run_until_stop, Stop};
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (path, sha) = weights_file(dir.path(), "w.bin", 100_000, 9);
    let mut config = agent_config(&url, &dir.path().join("n"));
    config.node_name = "h1".into();
    config.cache_gb = 0.1;
    config.peer_advertise = Some("http://peer.example:7".into());
    config.peer_listen = Some("127.0.0.1:0".into());
    let (hand_over, handed) = tokio::sync::oneshot::channel::<()>();
    let first = actix_rt::spawn(run_until_stop(config.clone(), async {
        let _ = handed.await;
        Stop::Handover
    }));
    let mut c = next_conn(&mut conns).await;
    assert_eq!(
        c.hello().await.peer_url.as_deref(),
        Some("http://peer.example:7")
    );
    c.send(welcome(1, &[], &[]));
    c.send(warm(1, &sha, 100_000, file_origin(&path)));
    verified(&mut c, &sha).await;
    let mut cmd = start_command("h1a", 1, "exec sleep 60");
    cmd.model = Some(mount(&sha, 100_000));
    c.send(ServerMessage::Start(cmd));
    c.event("h1a", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let _ = hand_over.send(());
    first.await.unwrap().unwrap();

    // The next agent adopts the workload, and with it the copy's use.
    let agent = RunningAgent::spawn(config);
    let mut c = next_conn(&mut conns).await;
    let hello = c.hello().await;
    assert_eq!(hello.workloads.len(), 1);
    assert_eq!(hello.cache.entries.len(), 1);
    assert_eq!(hello.cache.entries[0].in_use, 1, "{:?}", hello.cache);
    c.send(welcome(2, &["h1a"], &[]));
    agent.join().await;
    server.stop(false).await;
}

/// The receiver's GET can reach the peer before the peer's agent has read
/// the grant the control plane sent it just before (seven receivers granted
/// at once queue on one peer's loop). The receiver tries a refusing peer
/// again for a few seconds rather than reporting `failed` at once, which
/// would send it to the origin: a second origin read of the version.
#[actix_rt::test]
async fn a_grant_that_arrives_after_the_receivers_first_get_still_serves_it() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let (a, ca, b, mut cb, peer_a, sha) =
        peer_and_receiver(&url, &mut conns, dir.path(), ("la", "lb"), 1_000_000, 8).await;
    let from_a = WeightSource::Peer {
        node: "la".into(),
        url: peer_a.clone(),
        token: "t-late".into(),
    };
    // The warm first; the grant 500 ms later.
    cb.send(warm(1, &sha, 1_000_000, from_a));
    tokio::time::sleep(Duration::from_millis(500)).await;
    ca.send(grant("t-late", &sha, "lb"));
    assert_eq!(verified(&mut cb, &sha).await, 1_000_000);
    b.join().await;
    a.join().await;
    server.stop(false).await;
}

/// A peer still fetching a version streams it on (`?size=`, what a
/// receiver sends): z holds the copy and serves it slowly (4 Mbit/s: 1 MB
/// takes about 2 s), a reads it from z, and b is pointed at a while a's
/// copy is still a partial. b gets every byte from a, checks it and
/// verifies; a GET that does not name the size is still told a holds no
/// copy (404), as before.
#[actix_rt::test]
async fn a_peer_still_fetching_streams_the_copy_on_as_it_arrives() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    const SIZE: usize = 1_000_000;
    let (path, sha) = weights_file(dir.path(), "w.bin", SIZE, 9);
    let (z, mut cz, peer_z) =
        cached_agent(&url, &mut conns, &dir.path().join("z"), "sz", Some(4.0)).await;
    let (a, mut ca, peer_a) =
        cached_agent(&url, &mut conns, &dir.path().join("a"), "sa", None).await;
    let (b, mut cb, _) = cached_agent(&url, &mut conns, &dir.path().join("b"), "sb", None).await;
    let peer_a = peer_a.expect("a peer url");
    cz.send(warm(1, &sha, SIZE as u64, file_origin(&path)));
    verified(&mut cz, &sha).await;
    cz.send(grant("t-a", &sha, "sa"));
    ca.send(grant("t-b", &sha, "sb"));
    let from = |node: &str, url: &str, token: &str| WeightSource::Peer {
        node: node.into(),
        url: url.into(),
        token: token.into(),
    };
    ca.send(warm(
        1,
        &sha,
        SIZE as u64,
        from("sz", &peer_z.expect("z's peer url"), "t-a"),
    ));
    warmup(&mut ca, &sha, |p| match p {
        WarmupProgress::Fetching { bytes_done, .. } if *bytes_done > 0 => Some(()),
        WarmupProgress::Verified { .. } => panic!("a finished before b was pointed at it"),
        _ => None,
    })
    .await;
    let a_copy = dir.path().join("a/cache/weights").join(&sha);
    assert!(!a_copy.exists(), "a is still fetching");
    assert_eq!(
        peer_get(&peer_a, &sha, Some("t-b")).await.0,
        404,
        "without ?size a partial is not served"
    );
    cb.send(warm(1, &sha, SIZE as u64, from("sa", &peer_a, "t-b")));
    assert_eq!(verified(&mut cb, &sha).await, SIZE as u64);
    verified(&mut ca, &sha).await;
    let rb = cache_when(&mut cb, |r| !r.entries.is_empty()).await;
    assert_eq!(rb.counters.bytes_from_peers, SIZE as u64);
    let ra = cache_when(&mut ca, |r| r.counters.bytes_served >= SIZE as u64).await;
    assert_eq!(ra.counters.bytes_served, SIZE as u64);
    let copy = std::fs::read(dir.path().join("b/cache/weights").join(&sha)).unwrap();
    assert_eq!(sha256_of_bytes(&copy), sha);
    for agent in [b, a, z] {
        agent.join().await;
    }
    server.stop(false).await;
}

/// An `https://` origin behind a private CA: an agent given the CA with
/// `--origin-ca` fetches and verifies the copy; one without it refuses the
/// origin's certificate and says so (the host's store does not know it).
#[actix_rt::test]
async fn an_https_origin_is_trusted_with_origin_ca_and_refused_without() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    const SIZE: usize = 600_000;
    let (path, sha) = weights_file(dir.path(), "w.bin", SIZE, 11);
    let origin = tls_origin::start(dir.path(), &path);
    let https = WeightSource::Origin {
        uri: origin.uri.clone(),
    };

    let (plain, mut cp, _) =
        cached_agent(&url, &mut conns, &dir.path().join("plain"), "tls-no", None).await;
    cp.send(warm(1, &sha, SIZE as u64, https.clone()));
    let reason = warmup(&mut cp, &sha, |p| match p {
        WarmupProgress::Failed { reason, .. } => Some(reason.clone()),
        WarmupProgress::Verified { .. } => panic!("an unknown CA was trusted"),
        _ => None,
    })
    .await;
    assert!(reason.contains(&origin.uri), "{reason}");
    assert!(reason.to_lowercase().contains("certificate"), "{reason}");
    plain.join().await;

    let mut config = agent_config(&url, &dir.path().join("ca"));
    config.node_name = "tls-ca".into();
    config.cache_gb = 0.1;
    config.origin_ca = Some(origin.ca_pem.clone());
    let agent = RunningAgent::spawn(config);
    let mut c = next_conn(&mut conns).await;
    c.hello().await;
    c.send(welcome(1, &[], &[]));
    c.send(warm(1, &sha, SIZE as u64, https));
    assert_eq!(verified(&mut c, &sha).await, SIZE as u64);
    let copy = std::fs::read(dir.path().join("ca/cache/weights").join(&sha)).unwrap();
    assert_eq!(sha256_of_bytes(&copy), sha);
    agent.join().await;
    server.stop(false).await;
}

/// A declared size that lies (shorter than the file: a stand-in for a file
/// the registrant cannot read itself) reads no byte past it, and the
/// failure names the registered checksum only, never what the bytes read
/// hash to: echoed, the hashes of ever longer prefixes would give the file
/// away a byte at a time.
#[actix_rt::test]
async fn a_declared_size_that_lies_reads_no_further_and_its_failure_echoes_no_hash() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let secret = b"node-secret-0123456789".to_vec();
    let path = dir.path().join("secret");
    std::fs::write(&path, &secret).unwrap();
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &dir.path().join("n"), "w1", None).await;
    let claimed = "ab".repeat(32);
    for size in [1u64, 5, 12] {
        c.send(warm(1, &claimed, size, file_origin(&path)));
        let (reason, done) = warmup(&mut c, &claimed, |p| match p {
            WarmupProgress::Failed {
                reason, bytes_done, ..
            } => Some((reason.clone(), *bytes_done)),
            _ => None,
        })
        .await;
        assert!(reason.contains("weights_corrupt"), "{reason}");
        assert!(reason.contains(&claimed), "{reason}");
        assert!(done <= size, "read {done} bytes of a declared {size}");
        for k in 1..=secret.len() {
            let prefix = sha256_of_bytes(&secret[..k]);
            assert!(!reason.contains(&prefix), "{size}: {reason}");
        }
    }
    agent.join().await;
    server.stop(false).await;
}

/// A task's checkpoint is read confined to its tree: a checkpoint the task
/// turned into a link to a file outside (the node's secret) is refused
/// before a byte is read, and nothing of it reaches the cache, while a
/// plain file in the tree is copied.
#[actix_rt::test]
async fn a_checkpoint_that_links_out_of_its_tree_is_never_copied_into_the_cache() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("node-secret");
    std::fs::write(&secret, b"the node's secret").unwrap();
    let tree = dir.path().join("checkpoints/train");
    std::fs::create_dir_all(&tree).unwrap();
    let tree = tree.canonicalize().unwrap();
    let (good, good_sha) = weights_file(&tree, "ckpt-1", 4096, 3);
    std::os::unix::fs::symlink(&secret, tree.join("ckpt-2")).unwrap();
    let (agent, mut c, _) = cached_agent(&url, &mut conns, &dir.path().join("n"), "w1", None).await;
    let confined = |path: &Path, sha: &str, size: u64| {
        ServerMessage::Warm(WarmCommand {
            epoch: 1,
            model: "m:v2".into(),
            sha256: sha.into(),
            size_bytes: size,
            source: file_origin(path),
            pinned: false,
            origin: caldera_spec::weights::OriginAccess {
                rules: caldera_spec::origin::OriginRules {
                    allow: vec!["https://*".into()],
                },
                confined: Some(caldera_spec::weights::ConfinedRead {
                    root: tree.display().to_string(),
                    owner_reads: true,
                }),
            },
            owner: None,
        })
    };
    let leaked = sha256_of_bytes(b"the node's secret");
    c.send(confined(&tree.join("ckpt-2"), &leaked, 17));
    let (reason, done) = warmup(&mut c, &leaked, |p| match p {
        WarmupProgress::Failed {
            reason, bytes_done, ..
        } => Some((reason.clone(), *bytes_done)),
        WarmupProgress::Verified { .. } => panic!("the secret was copied"),
        _ => None,
    })
    .await;
    assert!(reason.contains("symbolic link"), "{reason}");
    assert_eq!(done, 0);
    c.send(confined(&good, &good_sha, 4096));
    assert_eq!(verified(&mut c, &good_sha).await, 4096);
    agent.join().await;
    server.stop(false).await;
}
