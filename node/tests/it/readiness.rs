//! Replica ports and readiness on the node, against the scripted control
//! plane: a workload gets CALDERA_PORT (reported in `Started`), its probe
//! runs from the agent and readiness changes are reported (ready after one
//! success, not ready after `failure_threshold` failures), a workload
//! without probe is ready once started, and a swap naming another task than
//! the one the allocation runs is refused (`SwapFailed`) with the running
//! process left untouched (the swap itself: tests/swap.rs).
use crate::common;

use caldera_spec::wire::{ModelMount, ServerMessage, SwapCommand, WorkloadEventKind};
use caldera_spec::ReadinessProbe;
use common::*;
use std::time::Duration;

fn readiness_of(kind: &WorkloadEventKind) -> Option<bool> {
    match kind {
        WorkloadEventKind::Readiness { ready, .. } => Some(*ready),
        _ => None,
    }
}

#[actix_rt::test]
async fn a_probed_workload_is_ready_while_its_probe_passes_and_a_swap_is_refused() {
    logs();
    let (url, mut conns, _server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ready-flag");
    let port_file = dir.path().join("port");
    let mut config = agent_config(&url, dir.path());
    config.replica_ports = (41200, 41209);
    // The workload writes into, and the probe reads from, the test's dir.
    config.workload_uid_range = None;
    let mut agent = RunningAgent::spawn(config);
    let mut c = next_conn(&mut conns).await;
    c.hello().await;
    c.send(welcome(1, &[], &[]));

    let mut cmd = start_command(
        "p1",
        1,
        &format!(
            "echo $CALDERA_PORT > {}; exec sleep 60",
            port_file.display()
        ),
    );
    let mut probe = ReadinessProbe::http("/");
    probe.http_path = None;
    probe.command = vec!["test".into(), "-e".into(), flag.display().to_string()];
    probe.period_s = 1;
    probe.failure_threshold = 2;
    cmd.readiness = Some(probe);
    c.send(ServerMessage::Start(cmd));
    let (_, started) = c
        .event("p1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let WorkloadEventKind::Started {
        pid: Some(pid),
        port: Some(port),
        ..
    } = started
    else {
        panic!("{started:?}")
    };
    assert!((41200..=41209).contains(&port), "{port}");
    let mut seen = String::new();
    for _ in 0..50 {
        seen = std::fs::read_to_string(&port_file).unwrap_or_default();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.trim(), port.to_string(), "CALDERA_PORT");

    // Not ready until the probe passes: the first readiness is `true`, after the flag.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    std::fs::write(&flag, b"").unwrap();
    let (_, kind) = c.event("p1", |k| readiness_of(k).is_some()).await;
    assert!(
        matches!(
            kind,
            WorkloadEventKind::Readiness {
                ready: true,
                generation: 0,
                ..
            }
        ),
        "{kind:?}"
    );
    // Two failures in a row: not ready.
    std::fs::remove_file(&flag).unwrap();
    let (_, kind) = c.event("p1", |k| readiness_of(k).is_some()).await;
    assert_eq!(readiness_of(&kind), Some(false), "{kind:?}");

    // A swap of another task's allocation is refused; the process keeps running.
    c.send(ServerMessage::Swap(SwapCommand {
        allocation_id: "p1".into(),
        task_id: "task-other".into(),
        epoch: 1,
        generation: 1,
        model: ModelMount {
            name: "m".into(),
            version: "v4".into(),
            sha256: "ab".repeat(32),
            size_bytes: 1,
            private: false,
            owner: None,
        },
        grace_ms: 100,
        container: None,
    }));
    let (_, kind) = c
        .event("p1", |k| matches!(k, WorkloadEventKind::SwapFailed { .. }))
        .await;
    assert!(
        matches!(&kind, WorkloadEventKind::SwapFailed { generation: 1, reason } if reason.contains("runs no workload of task task-other")),
        "{kind:?}"
    );
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(
        unsafe { libc::kill(pid as i32, 0) },
        0,
        "the old process was stopped"
    );

    // Without a probe: ready right after it starts, on another port.
    c.send(start("p2", 1, "exec sleep 60"));
    let (_, started) = c
        .event("p2", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    let WorkloadEventKind::Started { port: Some(p2), .. } = started else {
        panic!("{started:?}")
    };
    assert_ne!(p2, port, "one port handed out twice");
    let (_, kind) = c.event("p2", |k| readiness_of(k).is_some()).await;
    assert_eq!(readiness_of(&kind), Some(true), "{kind:?}");
    agent.stop();
    agent.join().await;
}
