//! NodeActor: one per node. It is the session with the node's agent: inventory,
//! lease epoch, heartbeats and liveness, commands out, events in. A node silent
//! past the timeout is declared lost: its epoch is bumped (fencing whatever the
//! old session still runs) and its tasks are requeued. It trusts its agent
//! only for what the node holds (`node_trust`): one session per name, opened
//! with the name's secret; events and reports only for its own allocations
//! under its current epoch.
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::node_trust::{self, Held, Refusal};
use crate::protocol::lifecycle::Observe;
use crate::protocol::node::{
    AgentGone, AgentHello, AgentMessage, Dispatch, DispatchRefused, FetchLogs, LogChunk,
    NodeSnapshot, Reannounce, SendWeights, StopWorkload,
};
use crate::protocol::scheduler::{AllocationsOn, NodeDown, NodeMetricsUpdate};
use crate::protocol::task::NodeLost;
use crate::protocol::NodeHandle;
use crate::resync::SessionEvents;
use crate::shared::Shared;
use crate::supervision::{reread, Reread, Supervision};
use actix::prelude::*;
use caldera_spec::wire::{ExitStatus, Hello, NodeMessage, ServerMessage, StopCommand};
use caldera_spec::{Event, EventKind, NodeMetrics, NodeRecord, NodeState};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
mod drain;
mod exits;
mod images;
mod join_notice;
mod lease;
mod resync;
#[cfg(test)]
mod resync_tests;
mod rotate;
mod trust;
mod weights;
use join_notice::join_notice;

// tokio's clock: liveness runs on the same (pausable) time as the timers.
use tokio::sync::{mpsc::UnboundedSender, oneshot};
use tokio::time::Instant;

/// How long an API call waits for a node to send a log tail.
const LOG_TIMEOUT: Duration = Duration::from_secs(5);

struct Session {
    id: u64,
    tx: UnboundedSender<ServerMessage>,
}

pub struct NodeActor {
    rec: NodeRecord,
    sh: Arc<Shared>,
    session: Option<Session>,
    last_seen: Instant,
    metrics: NodeMetrics,
    log_waiters: HashMap<u64, oneshot::Sender<LogChunk>>,
    next_request: u64,
    /// Exits this session forwarded, by allocation id: (task id, exit). A
    /// resync repeating one does not double it, and a task rebuilt before
    /// it could record one asks for it again ([`ResendExit`]).
    exits_forwarded: HashMap<String, (String, ExitStatus)>,
    /// The session's workload events as received: gaps, and the digests
    /// asked for (see `resync.rs`).
    events: SessionEvents,
    /// The allocations this session may speak for.
    held: Held,
    /// The agent's data dir, from its hello (checkpoint paths are inside it).
    data_dir: String,
    /// Where the node is reached, from its hello (its advertised host, or
    /// the address the gateway saw it connect from).
    address: String,
    /// When the last LeaseRenewed was sent (or, conservatively, when this
    /// actor was created or welcomed the agent): see `lease.rs`.
    lease_renewed: Instant,
    /// Starts and pre-pulls held back for a pull slot, by allocation id (or
    /// pre-pull key): see `images.rs`.
    withheld: HashMap<String, images::Withheld>,
    sup: Supervision<NodeActor>,
}

impl NodeActor {
    /// A node actor for a new session, or rebuilt from its record at boot;
    /// `grace` is added to the normal timeout before it can be declared lost.
    pub fn new(rec: NodeRecord, sh: Arc<Shared>, grace: Duration) -> Self {
        NodeActor {
            rec,
            last_seen: sh.clock.instant() + grace,
            lease_renewed: sh.clock.instant(),
            sh,
            session: None,
            metrics: NodeMetrics::default(),
            log_waiters: HashMap::new(),
            next_request: 1,
            exits_forwarded: HashMap::new(),
            events: SessionEvents::default(),
            held: Held::default(),
            data_dir: String::new(),
            address: "127.0.0.1".into(),
            withheld: HashMap::new(),
            sup: Supervision::default(),
        }
    }

    /// Starts a node actor under supervision and returns its handle.
    pub fn spawn(rec: NodeRecord, sh: Arc<Shared>, grace: Duration) -> NodeHandle {
        sh.metrics().node_known(&rec.name);
        NodeHandle::new(actix::Supervisor::start(move |_| {
            NodeActor::new(rec, sh, grace)
        }))
    }

    fn send(&self, m: ServerMessage) -> bool {
        self.session.as_ref().is_some_and(|s| s.tx.send(m).is_ok())
    }

    /// Records `planned` with one event at `site`; only then is it the
    /// record. Not recorded: the record stays as it was, and the actor is
    /// rebuilt from sled.
    fn record(
        &mut self,
        site: CommitSite,
        planned: NodeRecord,
        kind: EventKind,
        msg: String,
    ) -> Option<crate::durability::Ticket> {
        let mut b = self.sh.batch();
        b.put_node(&planned);
        b.append_event(Event::new(self.sh.now_ms(), kind, msg).node(&planned.name));
        let t = self.sh.commit(site, b);
        match t {
            Some(_) => self.rec = planned,
            None => self.sup.fail(format!(
                "node {}: {site} could not be recorded",
                self.rec.name
            )),
        }
        t
    }

    fn check_liveness(&mut self, ctx: &mut Context<Self>) {
        let timeout = Duration::from_millis(self.sh.config.nodes.timeout_ms);
        let now = self.sh.clock.instant();
        if self.rec.state == NodeState::Ready
            && now > self.last_seen
            && now - self.last_seen > timeout
        {
            self.lose(ctx);
        }
    }

    /// Declares the node lost: fence its epoch, drop the session, requeue its tasks.
    fn lose(&mut self, ctx: &mut Context<Self>) {
        let silent = self.sh.clock.since(self.last_seen);
        let fence = self.fence_wait();
        let fence_until_ms = self.sh.now_ms().saturating_add(fence.as_millis() as u64);
        let mut planned = self.rec.clone();
        planned.state = NodeState::Lost;
        planned.epoch += 1;
        let notice = crate::node_loss::loss_notice(&planned.name, silent, planned.epoch, fence);
        // The fence must be on record before any task is requeued; not
        // recorded, nothing happens, and the next liveness check tries again.
        if self
            .record(CommitSite::NodeLoss, planned, EventKind::NodeLost, notice)
            .is_none()
        {
            return;
        }
        self.sh.metrics().node_lost(&self.rec.name);
        self.session = None;
        self.pulls_gone();
        self.sh.scheduler.do_send(NodeDown {
            name: self.rec.name.clone(),
        });
        self.weights_gone();
        self.tell_tasks_lost(ctx, fence_until_ms);
    }

    /// Every task with an allocation on this lost node hears `NodeLost`
    /// once (each decides: requeued, or fenced until `fence_until_ms`).
    fn tell_tasks_lost(&mut self, ctx: &mut Context<Self>, fence_until_ms: u64) {
        let name = self.rec.name.clone();
        let sh = self.sh.clone();
        ctx.spawn(
            async move {
                let allocs = sh
                    .scheduler
                    .send(AllocationsOn { node: name.clone() })
                    .await
                    .unwrap_or_default();
                for task_id in crate::node_loss::tasks_to_tell(&name, &allocs) {
                    if let Some(t) = sh.registry.task(&task_id) {
                        t.do_send(NodeLost {
                            node: name.clone(),
                            fence_until_ms,
                        });
                    }
                }
            }
            .into_actor(self),
        );
    }

    /// A node recorded lost before a restart may still have tasks that never
    /// heard of it (the control plane stopped between recording the loss and
    /// telling them). Once the boot grace has passed without the agent coming
    /// back, they are told again; those that did hear ignore it. The fence
    /// counts from this actor's creation: never earlier than the lease.
    fn retell_loss_at_boot(&mut self, ctx: &mut Context<Self>) {
        if self.rec.state != NodeState::Lost {
            return;
        }
        let wait = self
            .last_seen
            .saturating_duration_since(self.sh.clock.instant());
        ctx.run_later(wait, |act, ctx| {
            if act.rec.state == NodeState::Lost {
                let fence = act.fence_wait().as_millis() as u64;
                act.tell_tasks_lost(ctx, act.sh.now_ms().saturating_add(fence));
            }
        });
    }

    /// Opens the session a hello asked for: a new epoch, the inventory it
    /// brought, the secret issued (its hash), and the joined event, recorded
    /// before anything else; answers that event's ticket. Not recorded: the
    /// hello is refused with a code the agent retries on, nothing changed.
    fn open_session(
        &mut self,
        hello: &Hello,
        session_id: u64,
        tx: UnboundedSender<ServerMessage>,
        secret: Option<&str>,
    ) -> Option<crate::durability::Ticket> {
        let returned = self.rec.state == NodeState::Lost;
        let mut planned = self.rec.clone();
        planned.epoch += 1;
        planned.state = NodeState::Ready;
        planned.inventory = hello.inventory.clone();
        planned.last_seen_ms = self.sh.now_ms();
        NodeActor::lift_agent_cordon(&mut planned);
        if let Some(s) = secret {
            planned.secret_sha256 = Some(self.sh.tokens.digest(s));
        }
        let notice = join_notice(&planned.name, planned.epoch, returned, &planned.inventory);
        let Some(t) = self.record(
            CommitSite::NodeHello,
            planned,
            EventKind::NodeJoined,
            notice,
        ) else {
            let detail = format!(
                "node {}: the hello could not be recorded; say hello again",
                self.rec.name
            );
            self.refuse_hello(&tx, Refusal::HelloUnanswered, detail);
            return None;
        };
        self.last_seen = self.sh.clock.instant();
        self.session = Some(Session { id: session_id, tx });
        self.exits_forwarded.clear();
        self.events = SessionEvents::default();
        Some(t)
    }
}

impl Actor for NodeActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.sup.started(ctx);
        let every = Duration::from_millis((self.sh.config.nodes.heartbeat_interval_ms / 2).max(50));
        ctx.run_interval(every, |act, ctx| {
            act.check_liveness(ctx);
            act.expire_pulls();
        });
        self.retell_loss_at_boot(ctx);
    }
}

impl actix::Supervised for NodeActor {
    /// The record (epoch, state, inventory) is read back from sled. The live
    /// session is not state to rebuild: it is the agent's socket, kept as is,
    /// so a connected agent stays connected across the rebuild.
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.sup.restarted("node");
        self.log_waiters.clear();
        let read = self.sh.gate.store().node(&self.rec.name);
        if let Reread::Found(r) = reread("node", &self.rec.name, read) {
            self.rec = r;
        }
    }
}

crate::supervision::rebuild_on_request!(NodeActor);

impl Handler<Observe> for NodeActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        let state = match self.rec.state {
            NodeState::Ready => "ready",
            NodeState::Lost => "lost",
        };
        MessageResult(self.sup.observe("node", &self.rec.name, state))
    }
}

impl Handler<AgentHello> for NodeActor {
    type Result = ();
    fn handle(&mut self, m: AgentHello, ctx: &mut Context<Self>) {
        let Some(secret) = self.admit_hello(&m) else {
            return;
        };
        let Some(ticket) = self.open_session(&m.hello, m.session_id, m.tx, secret.as_deref())
        else {
            return;
        };
        self.data_dir = m.hello.data_dir.clone();
        if let Some(host) = &m.hello.advertise_host {
            self.address = host.clone();
        }
        self.cache_seen(&m.hello.cache, m.hello.peer_url.clone(), true);
        self.pulls_gone();
        self.images_seen(&m.hello.images);
        let sh = self.sh.clone();
        let name = self.rec.name.clone();
        ctx.wait(
            async move {
                sh.gate.durable(ticket).await;
                sh.scheduler.send(AllocationsOn { node: name }).await
            }
            .into_actor(self)
            .map(move |owned, act, ctx| match owned {
                Ok(owned) => act.welcome(ctx, &owned, &m.hello.workloads, secret),
                // Without the Scheduler's answer nothing is known to be
                // owned: welcoming now would tell the agent to kill every
                // workload it reported. Refuse; the agent says hello again.
                Err(e) => act.refuse_unanswered(&e.to_string()),
            }),
        );
    }
}

impl NodeActor {
    /// The hello could not be answered (the Scheduler is being rebuilt):
    /// refused with a code the agent retries on, the session dropped, and no
    /// workload touched.
    fn refuse_unanswered(&mut self, why: &str) {
        let detail = format!(
            "node {}: the control plane cannot answer the hello now ({why}); say hello again",
            self.rec.name
        );
        if let Some(session) = self.session.take() {
            self.refuse_hello(&session.tx, Refusal::HelloUnanswered, detail);
        }
    }
}

impl Handler<AgentMessage> for NodeActor {
    type Result = ();
    fn handle(&mut self, m: AgentMessage, ctx: &mut Context<Self>) {
        if self.session.as_ref().map(|s| s.id) != Some(m.session_id) {
            return; // a superseded or fenced session
        }
        self.last_seen = self.sh.clock.instant();
        match m.msg {
            NodeMessage::Heartbeat(hb) => {
                if hb.epoch != self.rec.epoch {
                    let reason = format!(
                        "heartbeat under stale epoch {} (current {}): reconnect",
                        hb.epoch, self.rec.epoch
                    );
                    node_trust::refuse(&self.sh, &self.rec.name, Refusal::StaleEpoch, &reason);
                    self.send(ServerMessage::Refused {
                        reason,
                        code: Refusal::StaleEpoch.code().code,
                    });
                    self.session = None;
                    return;
                }
                self.rec.last_seen_ms = self.sh.now_ms();
                self.renew_lease(hb.seq);
                self.metrics = hb.metrics.clone();
                if let Some(c) = &hb.cache {
                    self.cache_seen(c, None, false);
                }
                if let Some(i) = &hb.images {
                    self.images_seen(i);
                }
                self.heartbeat_counted(hb.events_sent);
                let usage = self.usage_of(&hb.workloads).into_iter().collect();
                self.sh.scheduler.do_send(NodeMetricsUpdate {
                    name: self.rec.name.clone(),
                    metrics: hb.metrics,
                    usage,
                });
            }
            NodeMessage::Event(ev) => {
                self.event_numbered(ev.seq);
                self.pull_event(&ev);
                self.on_event(ev)
            }
            NodeMessage::Digest(d) => self.on_digest(ctx, d),
            NodeMessage::Warmup(w) => self.on_warmup(w),
            NodeMessage::Prepulled(r) => self.on_prepulled(r),
            NodeMessage::Logs {
                request_id,
                content,
                truncated,
                end_byte,
                ..
            } => {
                if let Some(w) = self.log_waiters.remove(&request_id) {
                    let _ = w.send(LogChunk {
                        content,
                        truncated,
                        end_byte,
                    });
                }
            }
            NodeMessage::Draining {
                reason,
                epoch,
                cluster_stopping,
            } => self.agent_draining(ctx, epoch, &reason, cluster_stopping),
            NodeMessage::Hello(_) => {
                self.send(ServerMessage::Refused {
                    reason: "hello sent twice in one session".into(),
                    code: caldera_spec::codes::NODE_SESSION_LIVE.code,
                });
            }
        }
    }
}

impl Handler<AgentGone> for NodeActor {
    type Result = ();
    fn handle(&mut self, m: AgentGone, _: &mut Context<Self>) {
        if self.session.as_ref().map(|s| s.id) == Some(m.session_id) {
            self.session = None;
            self.pulls_gone();
            // No placements here until the agent says hello again: a task
            // granted room here now could not be started, and would be
            // requeued and granted again while the node stays "healthy".
            // What runs here keeps running; it is lost only past the timeout.
            self.sh.scheduler.do_send(NodeDown {
                name: self.rec.name.clone(),
            });
            // Chosen as nobody's peer while away; its receivers report
            // their own failures.
            self.sh.fleet.update(&self.rec.name, |c| c.live = false);
        }
    }
}

impl Handler<Dispatch> for NodeActor {
    type Result = std::result::Result<u64, DispatchRefused>;
    fn handle(&mut self, mut m: Dispatch, _: &mut Context<Self>) -> Self::Result {
        if self.rec.state != NodeState::Ready {
            return Err(DispatchRefused::Lost);
        }
        m.0.epoch = self.rec.epoch;
        self.held.insert(&m.0.allocation_id, &m.0.task_id);
        if self.session.is_some() && self.start_waits_for_pull(&m.0) {
            return Ok(self.rec.epoch);
        }
        if self.send(ServerMessage::Start(m.0)) {
            Ok(self.rec.epoch)
        } else {
            Err(DispatchRefused::NoSession)
        }
    }
}

impl Handler<SendWeights> for NodeActor {
    type Result = bool;
    /// Stamped with the current epoch: an agent ignores commands of another.
    fn handle(&mut self, mut m: SendWeights, _: &mut Context<Self>) -> bool {
        if self.rec.state != NodeState::Ready {
            return false;
        }
        let epoch = self.rec.epoch;
        match &mut m.0 {
            ServerMessage::Warm(c) => c.epoch = epoch,
            ServerMessage::PeerGrant(g) => g.epoch = epoch,
            ServerMessage::Evict(e) => e.epoch = epoch,
            ServerMessage::Pin(p) => p.epoch = epoch,
            ServerMessage::Swap(s) => s.epoch = epoch,
            _ => return false,
        }
        self.send(m.0)
    }
}

impl Handler<StopWorkload> for NodeActor {
    type Result = bool;
    fn handle(&mut self, m: StopWorkload, _: &mut Context<Self>) -> bool {
        // A start held back for a pull slot never goes out, and a pull
        // being stopped gives its slot to the next node.
        self.pull_ended(&m.allocation_id);
        self.send(ServerMessage::Stop(StopCommand {
            allocation_id: m.allocation_id,
            epoch: self.rec.epoch,
            grace_ms: m.grace_ms,
            reason: m.reason,
        }))
    }
}

impl Handler<FetchLogs> for NodeActor {
    type Result = ResponseFuture<Result<LogChunk>>;
    fn handle(&mut self, m: FetchLogs, _: &mut Context<Self>) -> Self::Result {
        let id = self.next_request;
        self.next_request += 1;
        let (tx, rx) = oneshot::channel();
        let sent = self.send(ServerMessage::FetchLogs {
            request_id: id,
            epoch: self.rec.epoch,
            allocation_id: m.allocation_id,
            task_id: m.task_id,
            tail_bytes: m.tail_bytes,
            from_byte: m.from_byte,
        });
        if sent {
            self.log_waiters.insert(id, tx);
        }
        let node = self.rec.name.clone();
        Box::pin(async move {
            if !sent {
                return Err(ActorError::Unavailable(format!(
                    "node {node} is not connected; its logs cannot be read now"
                )));
            }
            match tokio::time::timeout(LOG_TIMEOUT, rx).await {
                Ok(Ok(v)) => Ok(v),
                _ => Err(ActorError::Unavailable(format!(
                    "node {node} did not send the logs in time"
                ))),
            }
        })
    }
}

impl Handler<NodeSnapshot> for NodeActor {
    type Result = MessageResult<NodeSnapshot>;
    fn handle(&mut self, _: NodeSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult((
            self.rec.clone(),
            self.session.is_some(),
            self.metrics.clone(),
        ))
    }
}

impl Handler<Reannounce> for NodeActor {
    type Result = ();
    fn handle(&mut self, _: Reannounce, _: &mut Context<Self>) {
        if self.session.is_some() && self.rec.state == NodeState::Ready {
            self.announce_up();
        }
    }
}
