//! The agent's in-place swap against the scripted control plane, with real
//! shims, processes and cache files: a Swap restarts the workload on the new
//! version (new pid; same allocation, port and env but CALDERA_MODEL_*; no
//! `Exited` for the old process), `Swapped` then `Readiness` for the new
//! generation; a repeated generation is answered again without a restart; a
//! version whose copy fails verification is `SwapFailed` with the old process
//! still serving (same pid); an agent restarted after the swap adopts the
//! workload with its generation and model, and answers the swap again.
use crate::common;

use caldera_node::agent::{run_until_stop, Stop};
use caldera_node::cache::digest::sha256_of_bytes;
use caldera_spec::wire::{
    ModelMount, NodeMessage, ServerMessage, SwapCommand, WarmCommand, WarmupProgress, WeightSource,
    WorkloadEventKind,
};
use caldera_spec::ReadinessProbe;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A weights file of `size` bytes (content from `seed`) and its sha256.
fn weights_file(dir: &Path, name: &str, size: usize, seed: u8) -> (PathBuf, String) {
    let bytes: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    (path, sha256_of_bytes(&bytes))
}

fn mount(version: &str, sha: &str, size: u64) -> ModelMount {
    ModelMount {
        name: "llama".into(),
        version: version.into(),
        sha256: sha.into(),
        size_bytes: size,
        private: false,
        owner: None,
    }
}

fn warm(m: &ModelMount, path: &Path) -> ServerMessage {
    ServerMessage::Warm(WarmCommand {
        epoch: 1,
        model: format!("{}:{}", m.name, m.version),
        sha256: m.sha256.clone(),
        size_bytes: m.size_bytes,
        source: WeightSource::Origin {
            uri: format!("file://{}", path.display()),
        },
        pinned: false,
        origin: caldera_spec::weights::OriginAccess {
            rules: caldera_spec::origin::OriginRules::anything(),
            confined: None,
        },
        owner: None,
    })
}

fn swap(generation: u32, model: &ModelMount, epoch: u64) -> ServerMessage {
    ServerMessage::Swap(SwapCommand {
        allocation_id: "s1".into(),
        task_id: "task-s1".into(),
        epoch,
        generation,
        model: model.clone(),
        grace_ms: 500,
        container: None,
    })
}

async fn verified(c: &mut FakeConn, sha: &str) {
    c.until_in(Duration::from_secs(30), |m| match m {
        NodeMessage::Warmup(r) if r.sha256 == sha => match &r.progress {
            WarmupProgress::Verified { .. } => Some(()),
            WarmupProgress::Failed { reason, .. } => panic!("warm failed: {reason}"),
            _ => None,
        },
        _ => None,
    })
    .await
}

/// s1's events up to (and including) the first that `stop` accepts, as
/// kinds; panics on an `Exited` (the task must keep running).
async fn events_until(
    c: &mut FakeConn,
    stop: impl Fn(&WorkloadEventKind) -> bool,
) -> Vec<WorkloadEventKind> {
    let mut seen = Vec::new();
    c.until_in(Duration::from_secs(20), |m| match m {
        NodeMessage::Event(e) if e.allocation_id == "s1" => {
            assert!(
                !matches!(e.kind, WorkloadEventKind::Exited(_)),
                "the task was reported exited: {:?} after {seen:?}",
                e.kind
            );
            seen.push(e.kind.clone());
            stop(&e.kind).then_some(())
        }
        _ => None,
    })
    .await;
    seen
}

/// The lines the workload wrote at each start: "pid port version sha256".
fn starts(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

/// Waits until `pid` is gone (the shim reaps it).
async fn gone(pid: u32) -> bool {
    for _ in 0..100 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[actix_rt::test]
async fn a_swap_restarts_the_workload_in_place_and_a_bad_copy_leaves_the_old_one_serving() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let size = 50_000;
    let (v1_path, v1_sha) = weights_file(dir.path(), "v1.bin", size, 1);
    let (v2_path, v2_sha) = weights_file(dir.path(), "v2.bin", size, 2);
    let (bad_path, _) = weights_file(dir.path(), "v3.bin", size, 3);
    let v1 = mount("v1", &v1_sha, size as u64);
    let v2 = mount("v2", &v2_sha, size as u64);
    // v3 registered with a sha256 its bytes do not have.
    let v3 = mount("v3", &"ab".repeat(32), size as u64);
    let starts_file = dir.path().join("starts");
    let ready_file = dir.path().join("ready");

    let mut config = agent_config(&url, &dir.path().join("node"));
    config.cache_gb = 0.1;
    config.replica_ports = (41300, 41309);
    config.workload_uid_range = None;
    let (hand_over, handed) = tokio::sync::oneshot::channel::<()>();
    let first = actix_rt::spawn(run_until_stop(config.clone(), async {
        let _ = handed.await;
        Stop::Handover
    }));
    let mut c = next_conn(&mut conns).await;
    c.hello().await;
    c.send(welcome(1, &[], &[]));

    let script = format!(
        r#"rm -f {ready}; echo "$$ $CALDERA_PORT $CALDERA_MODEL_VERSION $(sha256sum < "$CALDERA_MODEL_PATH" | cut -d' ' -f1) $CALDERA_ALLOCATION_ID $CUDA_VISIBLE_DEVICES" >> {starts}; sleep 0.3; touch {ready}; exec sleep 60"#,
        ready = ready_file.display(),
        starts = starts_file.display()
    );
    let mut cmd = start_command("s1", 1, &script);
    cmd.model = Some(v1.clone());
    let mut probe = ReadinessProbe::http("/");
    probe.http_path = None;
    probe.command = vec!["test".into(), "-e".into(), ready_file.display().to_string()];
    probe.period_s = 1;
    cmd.readiness = Some(probe);
    c.send(ServerMessage::Start(cmd));
    c.send(warm(&v1, &v1_path));
    let seen = events_until(&mut c, |k| {
        matches!(k, WorkloadEventKind::Readiness { ready: true, .. })
    })
    .await;
    let (pid0, port) = seen
        .iter()
        .find_map(|k| match k {
            WorkloadEventKind::Started {
                pid: Some(p),
                port: Some(port),
                ..
            } => Some((*p, *port)),
            _ => None,
        })
        .expect("started");

    // The swap: v2 is warmed first (the control plane does so before it
    // asks), then the process restarts on it.
    c.send(warm(&v2, &v2_path));
    verified(&mut c, &v2_sha).await;
    c.send(swap(1, &v2, 1));
    let seen = events_until(&mut c, |k| {
        matches!(
            k,
            WorkloadEventKind::Readiness {
                ready: true,
                generation: 1,
                ..
            }
        )
    })
    .await;
    let pid1 = seen
        .iter()
        .find_map(|k| match k {
            WorkloadEventKind::Swapped {
                generation: 1,
                model,
                pid: Some(p),
                ..
            } if model == "llama:v2" => Some(*p),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Swapped before the new readiness: {seen:?}"));
    assert_ne!(pid1, pid0, "the process was not restarted");
    assert!(gone(pid0).await, "the old process still runs");
    assert!(alive(pid1));
    let lines = starts(&starts_file);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(
        lines[0],
        format!("{pid0} {port} v1 {v1_sha} s1 1"),
        "first start"
    );
    assert_eq!(
        lines[1],
        format!("{pid1} {port} v2 {v2_sha} s1 1"),
        "same port, allocation and GPUs; the new version's copy"
    );

    // The same generation again: answered, not restarted.
    c.send(swap(1, &v2, 1));
    let seen = events_until(&mut c, |k| {
        matches!(k, WorkloadEventKind::Readiness { generation: 1, .. })
    })
    .await;
    assert!(
        seen.contains(&WorkloadEventKind::Swapped {
            generation: 1,
            model: "llama:v2".into(),
            pid: Some(pid1),
            port: None,
            image: None,
            image_digest: None,
        }),
        "{seen:?}"
    );
    assert_eq!(starts(&starts_file).len(), 2, "restarted again");

    // A version whose copy fails verification: SwapFailed, v2 serves on.
    c.send(swap(2, &v3, 1));
    c.send(warm(&v3, &bad_path));
    let seen = events_until(&mut c, |k| {
        matches!(k, WorkloadEventKind::SwapFailed { .. })
    })
    .await;
    let Some(WorkloadEventKind::SwapFailed { generation, reason }) = seen.last() else {
        panic!("{seen:?}")
    };
    assert_eq!(*generation, 2);
    assert!(
        reason.contains("llama:v3") && reason.contains("generation 1 keeps serving"),
        "{reason}"
    );
    assert!(alive(pid1), "the old process was stopped");
    assert_eq!(starts(&starts_file).len(), 2);
    // A resync's digest carries the generation that runs.
    c.send(ServerMessage::Resync {
        epoch: 1,
        request: 1,
    });
    let report = c
        .until(|m| match m {
            NodeMessage::Digest(d) => d
                .workloads
                .iter()
                .find(|w| w.allocation_id == "s1")
                .cloned(),
            _ => None,
        })
        .await;
    assert_eq!((report.generation, report.pid), (1, Some(pid1)));

    // A restarted agent adopts the swapped workload as generation 1 on v2.
    let _ = hand_over.send(());
    first.await.unwrap().unwrap();
    let agent = RunningAgent::spawn(config);
    let mut c = next_conn(&mut conns).await;
    let hello = c.hello().await;
    let w = hello
        .workloads
        .iter()
        .find(|w| w.allocation_id == "s1")
        .expect("adopted");
    assert_eq!((w.generation, w.pid), (1, Some(pid1)));
    let entry = hello.cache.entries.iter().find(|e| e.sha256 == v2_sha);
    assert_eq!(entry.map(|e| e.in_use), Some(1), "{:?}", hello.cache);
    let old = hello.cache.entries.iter().find(|e| e.sha256 == v1_sha);
    assert_eq!(old.map(|e| e.in_use), Some(0), "{:?}", hello.cache);
    c.send(welcome(2, &["s1"], &[]));
    c.send(swap(1, &v2, 2));
    let seen = events_until(&mut c, |k| matches!(k, WorkloadEventKind::Swapped { .. })).await;
    assert_eq!(
        seen.last(),
        Some(&WorkloadEventKind::Swapped {
            generation: 1,
            model: "llama:v2".into(),
            pid: Some(pid1),
            port: None,
            image: None,
            image_digest: None,
        })
    );
    assert_eq!(
        starts(&starts_file).len(),
        2,
        "the adopted workload restarted"
    );
    agent.join().await;
    server.stop(false).await;
}
