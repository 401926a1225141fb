//! The agent against a tiny fake control plane (actix-web + actix-ws): hello ->
//! welcome -> start -> events -> heartbeats; reconnect after the server drops
//! the socket, with the workload still running and reported in the new hello.
use crate::common;

use caldera_spec::wire::{NodeMessage, ServerMessage, StopCommand, WorkloadEventKind};
use common::*;
use std::time::Duration;
#[actix_rt::test]
async fn hello_welcome_start_heartbeat_reconnect_adopt_stop() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut agent = RunningAgent::spawn(agent_config(&url, dir.path()));

    // Session 1: hello -> welcome -> start -> events -> heartbeat with the workload.
    let mut c1 = next_conn(&mut conns).await;
    assert_eq!(c1.authorization.as_deref(), Some("Bearer join-secret"));
    let hello = c1.hello().await;
    assert_eq!(hello.node_name, "fake-node-1");
    assert_eq!(hello.protocol, caldera_spec::wire::PROTOCOL_VERSION);
    assert_eq!(hello.inventory.gpus.len(), 2);
    assert!(hello.inventory.gpus.iter().all(|g| g.simulated));
    assert!(hello.workloads.is_empty());
    c1.send(welcome(1, &[], &[]));
    c1.send(start(
        "a1",
        1,
        "echo CVD=$CUDA_VISIBLE_DEVICES; exec sleep 60",
    ));
    let mut seen = Vec::new();
    let pid = c1
        .until(|m| match m {
            NodeMessage::Event(e) if e.allocation_id == "a1" => {
                seen.push(
                    format!("{:?}", e.kind)
                        .split([' ', '(', '{'])
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
                match e.kind {
                    WorkloadEventKind::Started { pid, .. } => Some(pid),
                    _ => None,
                }
            }
            _ => None,
        })
        .await
        .expect("a pid");
    assert_eq!(seen, ["Preparing", "Ready", "Started"]);
    let hb = c1
        .until(|m| match m {
            NodeMessage::Heartbeat(h) if h.workloads.iter().any(|w| w.allocation_id == "a1") => {
                Some(h.clone())
            }
            _ => None,
        })
        .await;
    assert_eq!(hb.epoch, 1);
    assert_eq!(hb.metrics.gpus.len(), 2);
    // A heartbeat carries the live workload's usage only; its pid and
    // start came in the Started event.
    assert_eq!(hb.workloads.len(), 1, "{hb:?}");
    assert!(pid > 0);

    // A command of another epoch is ignored.
    c1.send(start("stale", 7, "echo SHOULD-NOT-RUN"));

    // The server drops the socket: the agent reconnects; the workload keeps running.
    c1.close();
    let mut c2 = next_conn(&mut conns).await;
    let hello = c2.hello().await;
    assert_eq!(hello.workloads.len(), 1, "{:?}", hello.workloads);
    assert_eq!(hello.workloads[0].allocation_id, "a1");
    assert_eq!(hello.workloads[0].pid, Some(pid));
    assert!(hello.workloads[0].exit.is_none());
    c2.send(welcome(2, &["a1"], &[]));
    c2.until(|m| match m {
        NodeMessage::Heartbeat(h)
            if h.epoch == 2 && h.workloads.iter().any(|w| w.allocation_id == "a1") =>
        {
            Some(())
        }
        _ => None,
    })
    .await;
    // Adopted under the new epoch, as a digest says.
    c2.send(ServerMessage::Resync {
        epoch: 2,
        request: 1,
    });
    c2.until(|m| match m {
        NodeMessage::Digest(d)
            if d.workloads
                .iter()
                .any(|w| w.allocation_id == "a1" && w.epoch == 2) =>
        {
            Some(())
        }
        _ => None,
    })
    .await;

    // Logs, then a stop under the new epoch.
    c2.send(ServerMessage::FetchLogs {
        request_id: 9,
        epoch: 2,
        allocation_id: "a1".into(),
        task_id: "t1".into(),
        tail_bytes: 1000,
        from_byte: None,
    });
    let logs = c2
        .until(|m| match m {
            NodeMessage::Logs {
                request_id: 9,
                content,
                ..
            } => Some(content.clone()),
            _ => None,
        })
        .await;
    assert_eq!(logs, "CVD=1\n");
    c2.send(ServerMessage::Stop(StopCommand {
        allocation_id: "a1".into(),
        epoch: 2,
        grace_ms: 1000,
        reason: "released".into(),
    }));
    let (epoch, kind) = c2
        .event("a1", |k| matches!(k, WorkloadEventKind::Exited(_)))
        .await;
    assert_eq!(epoch, 2);
    let WorkloadEventKind::Exited(exit) = kind else {
        unreachable!()
    };
    assert!(exit.stopped);
    assert_eq!(exit.signal, Some(libc_sigterm()));
    // The exited workload is reported in a heartbeat, then forgotten.
    c2.until(|m| match m {
        NodeMessage::Heartbeat(h) if h.workloads.is_empty() => Some(()),
        _ => None,
    })
    .await;
    assert!(
        !std::fs::read_to_string(dir.path().join("logs/task-stale.log"))
            .unwrap_or_default()
            .contains("SHOULD")
    );

    agent.stop();
    agent.join().await;
    server.stop(false).await;
}

fn libc_sigterm() -> i32 {
    15
}

#[actix_rt::test]
async fn a_fenced_node_kills_what_it_no_longer_owns_and_shutdown_stops_workloads() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "fake-node-2".into();
    let mut agent = RunningAgent::spawn(config);
    let mut c1 = next_conn(&mut conns).await;
    c1.hello().await;
    c1.send(welcome(1, &[], &[]));
    c1.send(start("lost", 1, "exec sleep 60"));
    c1.send(start(
        "kept",
        1,
        "trap 'exit 0' TERM; while :; do sleep 0.05; done",
    ));
    c1.event("kept", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    c1.close();

    // Events produced while disconnected wait for the next welcome.
    let mut c2 = next_conn(&mut conns).await;
    let hello = c2.hello().await;
    assert_eq!(hello.workloads.len(), 2);
    c2.send(welcome(2, &["kept"], &["lost"]));
    let (_, kind) = c2
        .event("lost", |k| matches!(k, WorkloadEventKind::Exited(_)))
        .await;
    let WorkloadEventKind::Exited(exit) = kind else {
        unreachable!()
    };
    assert_eq!(exit.signal, Some(9));

    // SIGINT/SIGTERM path: stop everything, report, exit cleanly.
    agent.stop();
    let (_, kind) = c2
        .event("kept", |k| matches!(k, WorkloadEventKind::Exited(_)))
        .await;
    let WorkloadEventKind::Exited(exit) = kind else {
        unreachable!()
    };
    assert_eq!((exit.code, exit.stopped), (Some(0), true));
    agent.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_refused_hello_is_retried() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "fake-node-3".into();
    let mut agent = RunningAgent::spawn(config);
    let mut c1 = next_conn(&mut conns).await;
    c1.hello().await;
    c1.send(ServerMessage::Refused {
        reason: "duplicate live session".into(),
        code: 10006,
    });
    let mut c2 = next_conn(&mut conns).await;
    c2.hello().await;
    agent.stop();
    agent.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn a_hung_server_is_detected_by_ping_timeout() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "fake-node-4".into();
    let mut agent = RunningAgent::spawn(config);
    let mut c1 = next_conn(&mut conns).await;
    c1.hello().await;
    c1.send(welcome(1, &[], &[]));
    c1.send(start("a1", 1, "exec sleep 60"));
    c1.event("a1", |k| matches!(k, WorkloadEventKind::Started { .. }))
        .await;
    // Let a ping be answered, then hang: pings at 100 ms, silence > 300 ms ends it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let frozen_at = std::time::Instant::now();
    c1.freeze();
    let mut c2 = next_conn(&mut conns).await;
    assert!(
        frozen_at.elapsed() < Duration::from_secs(3),
        "{:?}",
        frozen_at.elapsed()
    );
    let hello = c2.hello().await;
    assert_eq!(hello.workloads.len(), 1);
    assert!(hello.workloads[0].exit.is_none());
    agent.stop();
    agent.join().await;
    server.stop(false).await;
}

#[actix_rt::test]
async fn the_issued_node_secret_is_kept_and_presented_on_every_later_hello() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "fake-node-9".into();
    let mut agent = RunningAgent::spawn(config.clone());
    let mut c1 = next_conn(&mut conns).await;
    let first = c1.hello().await;
    assert_eq!(first.node_secret, None);
    assert!(first.data_dir.starts_with('/'), "{}", first.data_dir);
    let ServerMessage::Welcome(mut w) = welcome(1, &[], &[]) else {
        unreachable!()
    };
    w.node_secret = Some("issued-secret".into());
    c1.send(ServerMessage::Welcome(w));
    c1.until(|m| matches!(m, NodeMessage::Heartbeat(_)).then_some(()))
        .await;
    // A new connection of the same run presents it (a ping answered, then a hang)...
    tokio::time::sleep(Duration::from_millis(300)).await;
    c1.freeze();
    let mut c2 = next_conn(&mut conns).await;
    assert_eq!(
        c2.hello().await.node_secret.as_deref(),
        Some("issued-secret")
    );
    agent.stop();
    agent.join().await;
    // ...and so does a restarted agent: it is in the data dir.
    let mut agent = RunningAgent::spawn(config);
    let mut c3 = next_conn(&mut conns).await;
    assert_eq!(
        c3.hello().await.node_secret.as_deref(),
        Some("issued-secret")
    );
    agent.stop();
    agent.join().await;
    server.stop(false).await;
}

/// The agent's half of the resync: its events are numbered from 1 in each
/// session, heartbeats count them, and a `Resync` is answered with a digest
/// of what it holds under the epoch, after every event queued before it.
#[actix_rt::test]
async fn events_are_numbered_and_a_resync_is_answered_with_a_digest() {
    logs();
    let (url, mut conns, server) = fake_control_plane();
    let dir = tempfile::tempdir().unwrap();
    let mut config = agent_config(&url, dir.path());
    config.node_name = "fake-node-resync".into();
    let mut agent = RunningAgent::spawn(config);
    let mut c1 = next_conn(&mut conns).await;
    c1.hello().await;
    c1.send(welcome(1, &[], &[]));
    c1.send(start("r1", 1, "exec sleep 60"));
    let mut seqs = Vec::new();
    let pid = c1
        .until(|m| match m {
            NodeMessage::Event(e) => {
                seqs.push(e.seq);
                match e.kind {
                    WorkloadEventKind::Started { pid, .. } => Some(pid),
                    _ => None,
                }
            }
            _ => None,
        })
        .await;
    assert_eq!(seqs, [1, 2, 3], "Preparing, Ready, Started, numbered");
    let counted = c1
        .until(|m| match m {
            NodeMessage::Heartbeat(h) => Some(h.events_sent),
            _ => None,
        })
        .await;
    assert!(
        counted >= 3,
        "the heartbeat counts the events sent: {counted}"
    );

    // A resync of another epoch is ignored; one of this epoch is answered.
    c1.send(ServerMessage::Resync {
        epoch: 9,
        request: 1,
    });
    c1.send(ServerMessage::Resync {
        epoch: 1,
        request: 2,
    });
    let digest = c1
        .until(|m| match m {
            NodeMessage::Digest(d) => Some(d.clone()),
            _ => None,
        })
        .await;
    assert_eq!((digest.epoch, digest.request), (1, 2), "{digest:?}");
    assert!(digest.events_sent >= 3, "{digest:?}");
    assert_eq!(digest.workloads.len(), 1, "{digest:?}");
    assert_eq!(digest.workloads[0].allocation_id, "r1");
    assert_eq!(digest.workloads[0].pid, pid);
    assert!(digest.workloads[0].exit.is_none());

    // A new session counts afresh.
    c1.close();
    let mut c2 = next_conn(&mut conns).await;
    c2.hello().await;
    c2.send(welcome(2, &["r1"], &[]));
    c2.send(ServerMessage::Stop(StopCommand {
        allocation_id: "r1".into(),
        epoch: 2,
        grace_ms: 1000,
        reason: "released".into(),
    }));
    let seq = c2
        .until(|m| match m {
            NodeMessage::Event(e) if matches!(e.kind, WorkloadEventKind::Exited(_)) => Some(e.seq),
            _ => None,
        })
        .await;
    assert_eq!(seq, 1, "the exit is the new session's first event");
    agent.stop();
    agent.join().await;
    server.stop(false).await;
}
