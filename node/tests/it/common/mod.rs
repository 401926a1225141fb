//! The fake control plane (actix-web + actix-ws) and the embedded agent the
//! node's integration tests drive: each test file includes it with `mod common;`.
#![allow(dead_code)]
pub mod origin;
pub mod tls_origin;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use caldera_node::AgentConfig;
use caldera_spec::wire::{
    Hello, NodeMessage, ServerMessage, StartCommand, Welcome, WorkloadEventKind,
};
use futures_util::StreamExt;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What the test tells one fake connection to do.
pub enum Cmd {
    Send(Box<ServerMessage>),
    Close,
    /// Stop reading and answering, keeping the socket open (a hung server).
    Freeze,
}

/// One agent connection as the fake control plane sees it.
pub struct FakeConn {
    pub to_agent: UnboundedSender<Cmd>,
    pub from_agent: UnboundedReceiver<NodeMessage>,
    pub authorization: Option<String>,
}

impl FakeConn {
    pub fn send(&self, m: ServerMessage) {
        self.to_agent.send(Cmd::Send(Box::new(m))).unwrap();
    }

    pub fn close(&self) {
        let _ = self.to_agent.send(Cmd::Close);
    }

    pub fn freeze(&self) {
        let _ = self.to_agent.send(Cmd::Freeze);
    }

    /// The next message matching `f`, skipping others (heartbeats, mostly).
    pub async fn until<T>(&mut self, f: impl FnMut(&NodeMessage) -> Option<T>) -> T {
        self.until_in(Duration::from_secs(10), f).await
    }

    /// [`FakeConn::until`] with its own bound (slow transfers).
    pub async fn until_in<T>(
        &mut self,
        bound: Duration,
        mut f: impl FnMut(&NodeMessage) -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + bound;
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

    pub async fn hello(&mut self) -> Hello {
        self.until(|m| match m {
            NodeMessage::Hello(h) => Some(h.clone()),
            _ => None,
        })
        .await
    }

    pub async fn event(
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

pub async fn connect(
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
pub fn fake_control_plane() -> (
    String,
    UnboundedReceiver<FakeConn>,
    actix_web::dev::ServerHandle,
) {
    let (conns_tx, conns) = unbounded_channel::<FakeConn>();
    let data = web::Data::new(conns_tx);
    let (url, handle) = http_server(move |cfg| {
        cfg.app_data(data.clone())
            .route("/v1/nodes/connect", web::get().to(connect));
    });
    (url, conns, handle)
}

/// An HTTP server of the test on an ephemeral port, one worker, no signal
/// handling; its base URL and its handle.
pub fn http_server(
    configure: impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static,
) -> (String, actix_web::dev::ServerHandle) {
    let server = HttpServer::new(move || App::new().configure(configure.clone()))
        .workers(1)
        .disable_signals()
        .shutdown_timeout(0)
        .bind(("127.0.0.1", 0))
        .unwrap();
    let addr = server.addrs()[0];
    let server = server.run();
    let handle = server.handle();
    actix_rt::spawn(server);
    (format!("http://{addr}"), handle)
}

/// An agent running in this test's actix System until told to stop.
pub struct RunningAgent {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: actix_rt::task::JoinHandle<Result<(), caldera_node::AgentError>>,
}

impl RunningAgent {
    pub fn spawn(config: AgentConfig) -> RunningAgent {
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
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Stops the agent if not yet asked, and waits until it has exited cleanly.
    pub async fn join(mut self) {
        self.stop();
        tokio::time::timeout(Duration::from_secs(10), self.handle)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

pub fn agent_config(url: &str, data_dir: &std::path::Path) -> AgentConfig {
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

pub fn start_command(alloc: &str, epoch: u64, script: &str) -> StartCommand {
    StartCommand {
        container: None,
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
        disk_mb: 0,
        checkpoint_dir: None,
        resume_from: None,
        model: None,
        readiness: None,
    }
}

/// A start of `script` under `sh -c`.
pub fn start(alloc: &str, epoch: u64, script: &str) -> ServerMessage {
    ServerMessage::Start(start_command(alloc, epoch, script))
}

pub fn welcome(epoch: u64, keep: &[&str], kill: &[&str]) -> ServerMessage {
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
pub fn logs() {
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

pub async fn next_conn(conns: &mut UnboundedReceiver<FakeConn>) -> FakeConn {
    tokio::time::timeout(Duration::from_secs(10), conns.recv())
        .await
        .expect("agent did not connect")
        .expect("server gone")
}
