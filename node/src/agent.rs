//! The agent's event loop: the one place that owns the probe, the runtime and
//! the current session, so no state is shared or locked. It turns session
//! events into hellos, heartbeats and command handling, and runtime notes into
//! workload events, and the control plane's lease confirmations into the
//! shims' lease files. Workloads run under their own shims (`caldera shim`),
//! which outlive the agent: a restarted agent adopts them.
use crate::cgroup::Isolation;
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::lease::LeaseClock;
use crate::probe::Probe;
use crate::runtime::{Note, Runtime};
use crate::session::numbering::EventNumbers;
use crate::session::{self, SessionConfig, SessionEvent};
use crate::shim::files::boottime_ms;
use crate::tenancy::Tenancy;
use caldera_spec::wire::{
    Digest, Heartbeat, Hello, NodeMessage, ServerMessage, Welcome, PROTOCOL_VERSION,
};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;
use tokio::time::{interval_at, Interval, MissedTickBehavior};

mod drain;
mod images;
mod weights;

/// How often checkpoint dirs are looked at.
const CHECKPOINT_POLL: Duration = Duration::from_secs(1);
/// Extra time after the shutdown grace for the last exits to be reaped.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(2);
/// How often adopted shims are looked at while shutting down.
const SHUTDOWN_POLL: Duration = Duration::from_millis(100);

/// The session as the loop knows it.
struct Connection {
    generation: u64,
    outbound: UnboundedSender<NodeMessage>,
    /// Set by the welcome; commands of any other epoch are ignored.
    epoch: Option<u64>,
    /// Allocation ids the hello reported (the welcome's keep/kill refer to them).
    reported: Vec<String>,
    /// When the hello went out (ms on `CLOCK_BOOTTIME`): the first lease counts from it.
    hello_sent_ms: u64,
    lease: LeaseClock,
    /// The workload events sent on it, numbered (gap detection).
    events: EventNumbers,
}

struct Agent {
    config: AgentConfig,
    probe: Probe,
    runtime: Runtime,
    connection: Option<Connection>,
    /// A new heartbeat period from a welcome, for the loop to apply.
    new_heartbeat: Option<Duration>,
    /// This name's node secret (None until the first welcome issues it).
    secret: Option<String>,
    weights: weights::Weights,
    images: crate::container::images::ImageCache,
}

/// How the agent was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The node is drained (its work moved away as planned stops), then
    /// whatever is left is stopped (SIGTERM, the configured grace, SIGKILL).
    Drain,
    /// The whole cluster stops with this node (`caldera up` stopping all its
    /// agents at once): drained as [`Stop::Drain`], but the control plane is
    /// told that no other node stays, so it moves nothing elsewhere first —
    /// service replicas are stopped and requeued like any task instead of
    /// waiting, until the drain timeout, for replacements that cannot start.
    WithCluster,
    /// The agent exits at once and leaves every workload running under its
    /// shim, for the next agent (an upgraded binary) to adopt; nothing is
    /// stopped and the control plane hears nothing but the session closing.
    Handover,
}

/// Runs the agent until `shutdown` completes, then drains the node and stops
/// what is left ([`Stop::Drain`]). Must be called inside an actix System (or
/// a tokio current-thread runtime with a `LocalSet`).
pub async fn run_until(
    config: AgentConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    run_until_stop(config, async {
        shutdown.await;
        Stop::Drain
    })
    .await
}

/// Runs the agent until `stop` completes, then stops as it says.
pub async fn run_until_stop(
    config: AgentConfig,
    stop: impl Future<Output = Stop>,
) -> Result<(), AgentError> {
    let shutdown = stop;
    config.validate()?;
    let mut config = config;
    config.data_dir = prepare_data_dir(&config.data_dir)?;
    let secret = crate::secret::load(&config.data_dir)?;
    let isolation = Isolation::detect(&config.node_name, &config.data_dir);
    let tenancy = Tenancy::new(&config.data_dir, config.workload_uid_range);
    if !tenancy.separates_tenants() {
        tracing::warn!(
            "tenants are NOT isolated by uid on this node: {}",
            tenancy.label()
        );
    }
    let probe = config.probe()?;
    let detected = crate::container::engine::detect_off_loop(config.container_runtime).await;
    let (mut runtime, mut notes) = Runtime::new(
        config.data_dir.clone(),
        isolation,
        probe.gpus.is_simulated(),
    );
    runtime.set_tenancy(tenancy);
    runtime.set_replica_ports(config.replica_ports);
    if let Some(shim) = &config.shim {
        runtime.set_shim_command(shim.clone());
    }
    runtime.set_lease_grace(Duration::from_millis(config.shutdown_grace_ms));
    tracing::info!(
        node = %config.node_name,
        isolation = %runtime.isolation_label(),
        gpus = %probe.gpus.source(),
        "node agent starting; data in {}",
        config.data_dir.display()
    );
    runtime.set_containers(container_host(&config, detected.engine), detected.reported);
    runtime.adopt_shims();
    let orphans = runtime.remove_orphaned_containers();
    if orphans > 0 {
        tracing::warn!("removed {orphans} container(s) of allocations this node no longer holds");
    }
    runtime.release_orphaned_scratch();
    let (cache_tx, mut cache_notes) = unbounded_channel();
    let weights = weights::Weights::open(&config, cache_tx)?;
    let (prepulled_tx, mut prepulled) = unbounded_channel();
    let images = images::open(&config, prepulled_tx);

    let (events_tx, mut events) = unbounded_channel();
    let (stop_session, session_stopped) = watch::channel(false);
    let session = actix_rt::spawn(session::run(
        session_config(&config),
        events_tx,
        session_stopped,
    ));

    let mut heartbeat = new_interval(config.heartbeat());
    let mut checkpoints = new_interval(CHECKPOINT_POLL);
    let mut agent = Agent {
        config,
        probe,
        runtime,
        connection: None,
        new_heartbeat: None,
        secret,
        weights,
        images,
    };
    tokio::pin!(shutdown);
    let how = loop {
        tokio::select! {
            how = &mut shutdown => break how,
            Some(event) = events.recv() => agent.on_session(event),
            Some(note) = notes.recv() => agent.on_note(note),
            Some(note) = cache_notes.recv() => agent.on_cache_note(note),
            Some(p) = prepulled.recv() => agent.on_prepulled(p),
            _ = checkpoints.tick() => agent.on_poll_tick(),
            _ = heartbeat.tick() => agent.heartbeat(),
        }
        if let Some(period) = agent.new_heartbeat.take() {
            heartbeat = new_interval(period);
        }
    };
    if how == Stop::Handover {
        tracing::info!(
            "handing over: {} workload(s) keep running under their shims for the next agent",
            agent.runtime.live_count()
        );
        let _ = stop_session.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(2), session).await;
        agent.weights.close().await;
        return Ok(());
    }
    let cluster_stopping = how == Stop::WithCluster;
    let why = match cluster_stopping {
        true => "the whole cluster is stopping (caldera up)",
        false => "the agent was asked to stop (SIGINT/SIGTERM)",
    };
    let inputs = drain::Inputs {
        events: &mut events,
        notes: &mut notes,
        cache_notes: &mut cache_notes,
        heartbeat: &mut heartbeat,
        checkpoints: &mut checkpoints,
    };
    agent.drain(why, cluster_stopping, inputs).await;
    agent.shut_down(&mut notes, cluster_stopping).await;
    if agent.runtime.all_exited() {
        agent.runtime.isolation().cleanup();
    }
    let _ = stop_session.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(2), session).await;
    agent.weights.close().await;
    Ok(())
}

/// How this agent runs containers, if its engine answered.
fn container_host(
    config: &AgentConfig,
    engine: Option<crate::container::engine::Engine>,
) -> Option<crate::runtime::ContainerHost> {
    let engine = engine?;
    Some(crate::runtime::ContainerHost {
        puller: crate::container::pull::Puller::new(engine.podman.clone(), &config.data_dir),
        node: crate::container::run_args::agent_identity(&config.node_name, &config.data_dir),
        pids_limit: config.container_pids_limit,
        engine,
    })
}

/// Pings at the heartbeat period; a welcome must come within 10 s.
fn session_config(config: &AgentConfig) -> SessionConfig {
    SessionConfig {
        url: config.connect_url(),
        token: config.token.clone(),
        ping_interval: config.heartbeat(),
        welcome_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
    }
}

/// A ticker whose first tick is one period away (the welcome already sent a heartbeat).
fn new_interval(period: Duration) -> Interval {
    let mut i = interval_at(tokio::time::Instant::now() + period, period);
    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
    i
}

/// Writes the node secret to the data dir; a failure is logged (the caller
/// keeps the secret in memory).
fn store_secret(data_dir: &std::path::Path, secret: &str) {
    if let Err(e) = crate::secret::store(data_dir, secret) {
        tracing::error!(
            code = e.error_code().code,
            "{e}: the name cannot be rejoined after a restart"
        );
    }
}

/// Creates the data dir, makes it absolute (workloads get paths inside it)
/// and narrows its modes (see [`crate::data_dir`]).
fn prepare_data_dir(dir: &std::path::Path) -> Result<PathBuf, AgentError> {
    let err = |source| AgentError::DataDir {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    let dir = dir.canonicalize().map_err(err)?;
    crate::data_dir::narrow(&dir).map_err(|source| AgentError::DataDir {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

impl Agent {
    fn on_session(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Connected {
                generation,
                outbound,
            } => self.hello(generation, outbound),
            SessionEvent::Message {
                generation,
                message,
            } => {
                if self.connection.as_ref().map(|c| c.generation) == Some(generation) {
                    self.on_message(message);
                }
            }
            SessionEvent::Disconnected { generation, reason } => {
                if self.connection.as_ref().map(|c| c.generation) == Some(generation) {
                    tracing::info!(
                        "disconnected ({reason}); {} workload(s) keep running, {} event(s) queued",
                        self.runtime.live_count(),
                        self.runtime.pending_events()
                    );
                    self.connection = None;
                }
            }
        }
    }

    /// Says hello on a new connection: identity, inventory, and every workload
    /// still alive or exited-but-unreported.
    fn hello(&mut self, generation: u64, outbound: UnboundedSender<NodeMessage>) {
        let workloads = self.runtime.hello_reports();
        let reported = workloads.iter().map(|w| w.allocation_id.clone()).collect();
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            node_name: self.config.node_name.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            node_secret: self.secret.clone(),
            data_dir: self.config.data_dir.display().to_string(),
            inventory: caldera_spec::node::NodeInventory {
                runtimes: self.runtime.runtimes(),
                ..self
                    .probe
                    .inventory(&self.config.labels, &self.runtime.isolation_label())
            },
            workloads,
            cache: self.cache_report(),
            peer_url: self.weights.peer_url(),
            advertise_host: self.config.advertise_host.clone(),
            images: self.hello_images(),
        };
        let hello_sent_ms = boottime_ms();
        let _ = outbound.send(NodeMessage::Hello(hello));
        self.connection = Some(Connection {
            generation,
            outbound,
            epoch: None,
            reported,
            hello_sent_ms,
            lease: LeaseClock::default(),
            events: EventNumbers::default(),
        });
    }

    fn on_message(&mut self, message: ServerMessage) {
        match message {
            ServerMessage::Welcome(welcome) => self.welcome(welcome),
            ServerMessage::LeaseRenewed { epoch, seq } => self.lease_renewed(epoch, seq),
            ServerMessage::Refused { reason, code } => {
                tracing::warn!(
                    code,
                    "control plane refused this node: {reason}; will retry"
                );
            }
            ServerMessage::NodeSecret { epoch, secret } => {
                if self.live_epoch() == Some(epoch) {
                    tracing::info!("the node secret was rotated; the new one is kept");
                    self.keep_secret(secret);
                } else {
                    tracing::warn!("ignoring a node secret for epoch {epoch}");
                }
            }
            ServerMessage::Warm(cmd) => self.warm(cmd),
            ServerMessage::PeerGrant(grant) => self.peer_grant(grant),
            ServerMessage::Evict(cmd) => self.evict(cmd),
            ServerMessage::Pin(cmd) => self.pin(cmd),
            ServerMessage::Swap(cmd) => {
                if self.current_epoch(cmd.epoch, "swap", &cmd.allocation_id) {
                    self.swap(&cmd);
                    self.flush();
                }
            }
            ServerMessage::Prepull(cmd) => self.prepull(cmd),
            ServerMessage::Resync { epoch, request } => self.digest(epoch, request),
            ServerMessage::Start(cmd) => {
                if self.current_epoch(cmd.epoch, "start", &cmd.allocation_id) {
                    self.image_used(&cmd);
                    self.start(&cmd);
                    self.flush();
                }
            }
            ServerMessage::Stop(cmd) => {
                if self.current_epoch(cmd.epoch, "stop", &cmd.allocation_id) {
                    tracing::info!("stopping allocation {}: {}", cmd.allocation_id, cmd.reason);
                    let grace = Duration::from_millis(cmd.grace_ms);
                    self.runtime.stop(&cmd.allocation_id, grace, cmd.epoch);
                    self.flush();
                }
            }
            ServerMessage::FetchLogs {
                request_id,
                epoch,
                allocation_id,
                task_id,
                tail_bytes,
                from_byte,
            } => {
                if self.current_epoch(epoch, "fetch_logs", &allocation_id) {
                    let ((content, truncated), end_byte) = match from_byte {
                        Some(from) => {
                            let (content, end) =
                                self.runtime
                                    .read_log(&allocation_id, &task_id, from, tail_bytes);
                            ((content, false), Some(end))
                        }
                        None => (
                            self.runtime.tail_log(&allocation_id, &task_id, tail_bytes),
                            None,
                        ),
                    };
                    self.send(NodeMessage::Logs {
                        request_id,
                        allocation_id,
                        content,
                        truncated,
                        end_byte,
                    });
                }
            }
        }
    }

    /// True when `epoch` is this session's; otherwise logs and says no.
    fn current_epoch(&self, epoch: u64, what: &str, allocation_id: &str) -> bool {
        let current = self.connection.as_ref().and_then(|c| c.epoch);
        if current == Some(epoch) {
            return true;
        }
        tracing::warn!(
            "ignoring {what} for allocation {allocation_id}: epoch {epoch}, current {current:?}"
        );
        false
    }

    /// Keeps the node secret the control plane issued (at registration, or
    /// a rotation's): on disk for the next start, and in memory even when
    /// the file cannot be written (this run can still reconnect; a restart
    /// would need the operator).
    fn keep_secret(&mut self, secret: String) {
        store_secret(&self.config.data_dir, &secret);
        self.secret = Some(secret);
    }

    /// A heartbeat was confirmed under `epoch`: the shims' leases move on.
    fn lease_renewed(&mut self, epoch: u64, seq: u64) {
        let Some(conn) = self.connection.as_mut().filter(|c| c.epoch == Some(epoch)) else {
            tracing::debug!("ignoring a lease renewal of epoch {epoch}");
            return;
        };
        if let Some(deadline) = conn.lease.renewed(seq) {
            self.runtime.renew_leases(Some(deadline));
        }
    }

    fn welcome(&mut self, welcome: Welcome) {
        let Some(conn) = self.connection.as_mut() else {
            return;
        };
        conn.epoch = Some(welcome.epoch);
        let lease = conn.lease.welcomed(welcome.lease_ms, conn.hello_sent_ms);
        if let Some(secret) = welcome.node_secret {
            store_secret(&self.config.data_dir, &secret);
            self.secret = Some(secret);
        }
        let agent_grace = Duration::from_millis(self.config.shutdown_grace_ms);
        let grace = crate::lease::lapse_grace(agent_grace, welcome.stop_grace_ms);
        if grace < agent_grace && grace != self.runtime.lease_grace() {
            tracing::warn!(
                "a workload whose lease runs out gets {grace:?} between SIGTERM and SIGKILL, \
                 not the configured {agent_grace:?}: the control plane starts fenced tasks \
                 elsewhere after lease + its stop grace of {grace:?}"
            );
        }
        self.runtime.set_lease_grace(grace);
        let reported = std::mem::take(&mut conn.reported);
        let killed = self
            .runtime
            .apply_welcome(welcome.epoch, &welcome.keep, &reported);
        self.runtime.renew_leases(lease);
        // Fenced allocations' containers go with their shims; any left of
        // allocations no longer held (a shim that died) go too.
        self.runtime.sweep_orphans();
        tracing::info!(
            "welcomed as {} with epoch {}: adopted {}, killed {killed}, workload lease {}",
            welcome.node_name,
            welcome.epoch,
            welcome.keep.len(),
            match welcome.lease_ms {
                0 => "none (the control plane has no leases)".to_string(),
                ms => format!("{ms} ms"),
            }
        );
        let period = if welcome.heartbeat_interval_ms >= 50 {
            Duration::from_millis(welcome.heartbeat_interval_ms)
        } else {
            self.config.heartbeat()
        };
        self.new_heartbeat = Some(period);
        self.heartbeat();
    }

    fn send(&self, message: NodeMessage) {
        if let Some(conn) = &self.connection {
            let _ = conn.outbound.send(message);
        }
    }

    /// The epoch of a welcomed, still-open session.
    fn live_epoch(&self) -> Option<u64> {
        self.connection
            .as_ref()
            .filter(|c| !c.outbound.is_closed())
            .and_then(|c| c.epoch)
    }

    /// Sends queued workload events, but only on a welcomed session: before the
    /// welcome they wait (the hello's reports cover exits meanwhile).
    fn flush(&mut self) {
        if self.live_epoch().is_none() {
            return;
        }
        let events = self.runtime.take_events();
        let Some(conn) = self.connection.as_mut() else {
            return;
        };
        for event in conn.events.number(events) {
            let _ = conn.outbound.send(NodeMessage::Event(event));
        }
    }

    /// Answers the control plane's resync request: what the node holds
    /// under `epoch`, after every event queued before it (the digest covers
    /// them), as a hello reports it.
    fn digest(&mut self, epoch: u64, request: u64) {
        if self.live_epoch() != Some(epoch) {
            tracing::warn!("ignoring a resync request of epoch {epoch}");
            return;
        }
        self.flush();
        let workloads = self.runtime.hello_reports();
        let Some(conn) = self.connection.as_ref() else {
            return;
        };
        tracing::info!(
            "the control plane asked for a digest: {} workload(s) after {} event(s)",
            workloads.len(),
            conn.events.sent()
        );
        self.send(NodeMessage::Digest(Digest {
            epoch,
            request,
            events_sent: conn.events.sent(),
            workloads,
        }));
    }

    /// Measures and sends one heartbeat (welcomed sessions only: an idle,
    /// disconnected agent does no sampling work at all).
    fn heartbeat(&mut self) {
        let Some(epoch) = self.live_epoch() else {
            return;
        };
        self.flush();
        let gpu_by_pid = self.probe.gpus.per_process();
        self.runtime.sample_usage(&gpu_by_pid);
        let metrics = self.probe.metrics(&self.runtime.simulated_gpu_use());
        let Some(conn) = self.connection.as_mut() else {
            return;
        };
        let seq = conn.lease.next_heartbeat(boottime_ms());
        let events_sent = conn.events.sent();
        let cache = Some(self.cache_report());
        let images = self.changed_images();
        self.send(NodeMessage::Heartbeat(Heartbeat {
            epoch,
            seq,
            metrics,
            workloads: self.runtime.usage_reports(),
            cache,
            images,
            events_sent,
        }));
    }

    /// Something that completed outside the loop (a shim of ours started or
    /// ended, a grace ran out). Shared by the running loop and the drain's.
    fn on_note(&mut self, note: Note) {
        self.runtime.handle(note);
        self.sweep_cache();
        self.flush();
    }

    /// The poll tick, shared by the running loop and the drain's: adopted
    /// shims (started by an earlier agent life, not our children) are seen
    /// to end only by polling, and checkpoints only appear as files.
    fn on_poll_tick(&mut self) {
        self.runtime.poll_adopted();
        self.runtime.poll_checkpoints();
        self.sweep_cache();
        self.flush();
    }

    /// Stops every workload and waits (bounded) for them to be reaped, so their
    /// exits are reported before the agent goes. `keep_held`: the whole
    /// cluster stops, and held reservations stay held for the next agent
    /// to adopt (nothing runs in them; the control plane keeps them too).
    async fn shut_down(&mut self, notes: &mut UnboundedReceiver<Note>, keep_held: bool) {
        let grace = Duration::from_millis(self.config.shutdown_grace_ms);
        tracing::info!("shutting down: stopping workloads (grace {grace:?})");
        if keep_held {
            self.runtime.stop_all_but_held(grace);
        } else {
            self.runtime.stop_all(grace);
        }
        let deadline = tokio::time::Instant::now() + grace + SHUTDOWN_SLACK;
        while !self.runtime.only_held_left() && tokio::time::Instant::now() < deadline {
            // Our own shims' ends come as notes; adopted ones are polled.
            match tokio::time::timeout(SHUTDOWN_POLL, notes.recv()).await {
                Ok(Some(note)) => self.runtime.handle(note),
                Ok(None) => break,
                Err(_) => self.runtime.poll_adopted(),
            }
        }
        self.flush();
    }
}
