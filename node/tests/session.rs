//! The agent against a tiny fake control plane (actix-web + actix-ws): hello ->
//! welcome -> start -> events -> heartbeats; reconnect after the server drops
//! the socket, with the workload still running and reported in the new hello.
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use caldera_node::AgentConfig;
use caldera_spec::wire::{
    Hello, NodeMessage, ServerMessage, StartCommand, StopCommand, Welcome, WorkloadEventKind,
};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What the test tells one fake connection to do.
enum Cmd {
    Send(Box<ServerMessage>),
    Close,
    /// Stop reading and answering, keeping the socket open (a hung server).
    Freeze,
}

/// One agent connection as the fake control plane sees it.
struct FakeConn {
    to_agent: UnboundedSender<Cmd>,
    from_agent: UnboundedReceiver<NodeMessage>,
    authorization: Option<String>,
}

impl FakeConn {
    fn send(&self, m: ServerMessage) {
        self.to_agent.send(Cmd::Send(Box::new(m))).unwrap();
    }

    fn close(&self) {
        let _ = self.to_agent.send(Cmd::Close);
    }

    fn freeze(&self) {
        let _ = self.to_agent.send(Cmd::Freeze);
    }

    /// The next message matching `f`, skipping others (heartbeats, mostly).
    async fn until<T>(&mut self, mut f: impl FnMut(&NodeMessage) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let m = tokio::time::timeout_at(deadline, self.from_agent.recv())
                .await
                .expect("timed out waiting for the agent")
                .expect("connection closed");
            if let Some(t) = f(&m) {
                return t;
            }
        }
    }

    async fn hello(&mut self) -> Hello {
        self.until(|m| match m {
            NodeMessage::Hello(h) => Some(h.clone()),
            _ => None,
        })
        .await
    }

    async fn event(
        &mut self,
        alloc: &str,
        pred: impl Fn(&WorkloadEventKind) -> bool,
    ) -> (u64, WorkloadEventKind) {
        self.until(|m| match m {
            NodeMessage::Event(e) if e.allocation_id == alloc && pred(&e.kind) => {
                Some((e.epoch, e.kind.clone()))
            }
            _ => None,
        })
        .await
    }
}

async fn connect(
    req: HttpRequest,
    body: web::Payload,
    conns: web::Data<UnboundedSender<FakeConn>>,
) -> Result<HttpResponse, actix_web::Error> {
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let (response, mut session, mut stream) = actix_ws::handle(&req, body)?;
    let (to_agent, mut commands) = unbounded_channel::<Cmd>();
    let (received, from_agent) = unbounded_channel();
    let _ = conns.send(FakeConn {
        to_agent,
        from_agent,
        authorization,
    });
    actix_web::rt::spawn(async move {
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(Cmd::Send(m)) => {
                        if session.text(serde_json::to_string(&m).unwrap()).await.is_err() {
                            break;
                        }
                    }
                    Some(Cmd::Freeze) => {
                        let _keep_open = (&session, &stream);
                        std::future::pending::<()>().await;
                    }
                    Some(Cmd::Close) | None => {
                        let _ = session.close(None).await;
                        break;
                    }
                },
                msg = stream.next() => match msg {
                    Some(Ok(actix_ws::Message::Text(t))) => {
                        let m: NodeMessage = serde_json::from_str(&t).expect("agent sends valid JSON");
                        let _ = received.send(m);
                    }
                    Some(Ok(actix_ws::Message::Ping(p))) => {
                        let _ = session.pong(&p).await;
                    }
                    Some(Ok(actix_ws::Message::Close(_))) | Some(Err(_)) | None => break,
                    _ => {}
                },
            }
        }
    });
    Ok(response)
}

/// Starts the fake control plane; returns its base URL and the stream of connections.
fn fake_control_plane() -> (
    String,
    UnboundedReceiver<FakeConn>,
    actix_web::dev::ServerHandle,
) {
    let (conns_tx, conns) = unbounded_channel::<FakeConn>();
    let data = web::Data::new(conns_tx);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/v1/nodes/connect", web::get().to(connect))
    })
    .workers(1)
    .bind(("127.0.0.1", 0))
    .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (format!("http://{addr}"), conns, handle)
}

/// An agent running in this test's actix System until told to stop.
struct RunningAgent {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: actix_rt::task::JoinHandle<Result<(), caldera_node::AgentError>>,
}

impl RunningAgent {
    fn spawn(config: AgentConfig) -> RunningAgent {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = actix_rt::spawn(caldera_node::run_until(config, async {
            let _ = stopped.await;
        }));
        RunningAgent {
            stop: Some(stop),
            handle,
        }
    }

    /// Asks the agent to shut down (it stops its workloads first).
    fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Stops the agent if not yet asked, and waits until it has exited cleanly.
    async fn join(mut self) {
        self.stop();
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

fn agent_config(url: &str, data_dir: &std::path::Path) -> AgentConfig {
    AgentConfig {
        join_url: url.to_string(),
        token: "join-secret".into(),
        node_name: "fake-node-1".into(),
        data_dir: data_dir.to_path_buf(),
        simulate_gpus: Some("2xA100-80GB".into()),
        heartbeat_ms: 100,
        shutdown_grace_ms: 500,
        // The fake control plane never drains: do not wait for it.
        drain_timeout_ms: 300,
        shim: Some(caldera_node::runtime::ShimCommand {
            program: env!("CARGO_BIN_EXE_caldera-shim").into(),
            args: vec![],
        }),
        ..AgentConfig::default()
    }
}

fn start(alloc: &str, epoch: u64, script: &str) -> ServerMessage {
    ServerMessage::Start(StartCommand {
        allocation_id: alloc.into(),
        task_id: format!("task-{alloc}"),
        epoch,
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: BTreeMap::new(),
        gpu_indices: vec![1],
        gpu_uuids: vec!["GPU-SIM-fake-node-1-1".into()],
        gpu_memory_mb: 40960,
        cpu_milli: 1000,
        memory_mb: 256,
        checkpoint_dir: None,
        resume_from: None,
        model: None,
    })
}

fn welcome(epoch: u64, keep: &[&str], kill: &[&str]) -> ServerMessage {
    ServerMessage::Welcome(Welcome {
        node_name: "fake-node-1".into(),
        epoch,
        heartbeat_interval_ms: 100,
        lease_ms: 0,
        stop_grace_ms: 0,
        keep: keep.iter().map(|s| s.to_string()).collect(),
        kill: kill.iter().map(|s| s.to_string()).collect(),
        node_secret: None,
    })
}

/// Agent logs on stderr when RUST_LOG is set (`RUST_LOG=debug cargo test -- --nocapture`).
fn logs() {
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

async fn next_conn(conns: &mut UnboundedReceiver<FakeConn>) -> FakeConn {
    tokio::time::timeout(Duration::from_secs(10), conns.recv())
        .await
        .expect("agent did not connect")
        .expect("server gone")
}

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
                    WorkloadEventKind::Started { pid } => Some(pid),
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
    assert_eq!(hb.workloads[0].pid, Some(pid));
    assert!(hb.workloads[0].exit.is_none());

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
            if h.epoch == 2
                && h.workloads
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
