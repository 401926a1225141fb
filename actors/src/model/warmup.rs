//! Carrying out staggered, peer-to-peer warmup for one version: a node's
//! need, its reports, its cache seen or lost. Each handler plans on a copy of
//! the record (the source of every node it serves, chosen by
//! [`sources::choose`]), records it with its events in one batch, and only
//! then tells the nodes: a peer hears its grant before its receiver is
//! pointed at it.
use super::sources::{self, Choice, Limits, LivePeer, ORIGIN};
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::protocol::model::{NodeCacheSeen, NodeGone, NodeNeeds, OriginFreed, WarmupFrom};
use crate::protocol::node::SendWeights;
use actix::prelude::*;
use caldera_spec::weights::{PeerGrant, PinCommand, WarmCommand, WarmupProgress, WeightSource};
use caldera_spec::wire::ServerMessage;
use caldera_spec::{CopyState, Event, EventKind, ModelState, ModelVersionRecord, NodeCopy};

/// What to tell nodes once a plan is recorded.
pub(super) enum Tell {
    /// Warm `node` (origin, or a copy it holds: pin it).
    Send { node: String, msg: ServerMessage },
    /// Grant `peer`, and only once that is on its session, warm `node` from it.
    GrantThenWarm {
        peer: String,
        grant: PeerGrant,
        node: String,
        warm: WarmCommand,
    },
}

/// A plan: the record as it will be, its events, and what to tell after.
pub(super) struct Plan {
    pub rec: ModelVersionRecord,
    pub events: Vec<Event>,
    pub tells: Vec<Tell>,
}

impl ModelVersionActor {
    fn limits(&self) -> Limits {
        Limits {
            per_version: self.sh.config.max_origin_pulls_per_version,
            peer_warmup: self.sh.config.peer_warmup,
        }
    }

    /// Live nodes that serve peers, by name.
    fn live_peers(&self) -> Vec<LivePeer> {
        self.sh
            .fleet
            .all()
            .into_iter()
            .filter(|(_, c)| c.live)
            .filter_map(|(node, c)| c.peer_url.map(|url| LivePeer { node, url }))
            .collect()
    }

    pub(super) fn plan(&self) -> Plan {
        Plan {
            rec: self.rec.clone(),
            events: Vec::new(),
            tells: Vec::new(),
        }
    }

    fn warm_command(&self, source: WeightSource) -> WarmCommand {
        WarmCommand {
            epoch: 0,
            model: self.key(),
            sha256: self.rec.spec.weights.sha256.clone(),
            size_bytes: self.rec.spec.weights.size_bytes,
            source,
            pinned: self.rec.pinned,
        }
    }

    /// Chooses `node`'s source into `plan` (see `sources.rs`), reserving an
    /// origin slot in the registry-wide budget when it is the origin.
    pub(super) fn serve(&self, plan: &mut Plan, node: &str, avoid: Option<&str>) {
        let key = self.key();
        let model = key.clone();
        if self
            .sh
            .fleet
            .get(node)
            .is_some_and(|c| c.holds(&self.rec.spec.weights.sha256))
        {
            self.mark_verified(plan, node, "cache", "its cache holds a verified copy");
            return;
        }
        let live = self.live_peers();
        let limits = self.limits();
        let mut choice = sources::choose(&plan.rec.nodes, node, &live, limits, avoid, true);
        if choice == Choice::Origin {
            let own = plan
                .rec
                .nodes
                .get(node)
                .is_some_and(|c| c.copy == CopyState::Warming && c.source == ORIGIN);
            let wanted = sources::origin_reads(&plan.rec.nodes) + u32::from(!own);
            if !self
                .sh
                .origin_budget
                .admit(&key, wanted, self.sh.config.max_origin_pulls)
            {
                choice = sources::choose(&plan.rec.nodes, node, &live, limits, avoid, false);
            }
        }
        let bytes_done = plan.rec.nodes.get(node).map_or(0, |c| c.bytes_done);
        let (copy, source, msg) = match &choice {
            Choice::Holds => return,
            Choice::Origin => {
                let reads = sources::origin_reads(&plan.rec.nodes) + 1;
                let uri = self.rec.spec.weights.uri.clone();
                plan.tells.push(Tell::Send {
                    node: node.to_string(),
                    msg: ServerMessage::Warm(self.warm_command(WeightSource::Origin { uri })),
                });
                (
                    CopyState::Warming,
                    ORIGIN.to_string(),
                    format!(
                        "node {node} reads {model} from the origin ({reads} of {} origin reads of this version)",
                        limits.per_version
                    ),
                )
            }
            Choice::Peer(p) => {
                let Ok(token) = crate::tokens::generate() else {
                    // No randomness, no grant: the node waits for a later try.
                    return;
                };
                let grant = PeerGrant {
                    epoch: 0,
                    token: token.clone(),
                    sha256: self.rec.spec.weights.sha256.clone(),
                    receiver: node.to_string(),
                    expires_at_ms: self.sh.now_ms() + self.sh.config.peer_token_ttl_ms,
                };
                let warm = self.warm_command(WeightSource::Peer {
                    node: p.node.clone(),
                    url: p.url.clone(),
                    token,
                });
                plan.tells.push(Tell::GrantThenWarm {
                    peer: p.node.clone(),
                    grant,
                    node: node.to_string(),
                    warm,
                });
                (
                    CopyState::Warming,
                    sources::peer_label(&p.node),
                    format!("node {node} reads {model} from peer {}", p.node),
                )
            }
            Choice::Wait(why) => {
                if plan.rec.nodes.get(node).is_some_and(|c| c.copy == CopyState::Waiting) {
                    return; // already waiting, already said why
                }
                (
                    CopyState::Waiting,
                    String::new(),
                    format!("node {node} waits for {model}: {why}"),
                )
            }
        };
        plan.rec.nodes.insert(
            node.to_string(),
            NodeCopy {
                copy,
                bytes_done,
                source,
            },
        );
        plan.events
            .push(self.event(Some(node), EventKind::ModelWarmup, msg));
    }

    fn mark_verified(&self, plan: &mut Plan, node: &str, source: &str, how: &str) {
        plan.rec.nodes.insert(
            node.to_string(),
            NodeCopy {
                copy: CopyState::Verified,
                bytes_done: self.rec.spec.weights.size_bytes,
                source: source.to_string(),
            },
        );
        let msg = format!("node {node} holds {}: {how}", self.key());
        plan.events
            .push(self.event(Some(node), EventKind::ModelWarmup, msg));
    }

    /// Every waiting node gets a source if one may serve it now.
    pub(super) fn serve_waiting(&self, plan: &mut Plan) {
        let waiting: Vec<String> = plan
            .rec
            .nodes
            .iter()
            .filter(|(_, c)| c.copy == CopyState::Waiting)
            .map(|(n, _)| n.clone())
            .collect();
        for n in waiting {
            self.serve(plan, &n, None);
        }
    }

    /// Records the plan, then tells the nodes. Not recorded: nobody is
    /// told, and the answer is false.
    pub(super) fn carry_out(&mut self, ctx: &mut Context<Self>, site: CommitSite, plan: Plan) -> bool {
        if plan.rec == self.rec && plan.events.is_empty() {
            return true;
        }
        let Plan { rec, events, tells } = plan;
        if self.record(site, rec, events).is_err() {
            return false;
        }
        for t in tells {
            self.tell(ctx, t);
        }
        true
    }

    fn tell(&self, ctx: &mut Context<Self>, t: Tell) {
        match t {
            Tell::Send { node, msg } => {
                if let Some(n) = self.sh.registry.node(&node) {
                    n.do_send(SendWeights(msg));
                }
            }
            Tell::GrantThenWarm {
                peer,
                grant,
                node,
                warm,
            } => {
                let sh = self.sh.clone();
                let sha = grant.sha256.clone();
                ctx.spawn(
                    async move {
                        let granted = match sh.registry.node(&peer) {
                            Some(p) => p
                                .send(SendWeights(ServerMessage::PeerGrant(grant)))
                                .await
                                .unwrap_or(false),
                            None => false,
                        };
                        if granted {
                            if let Some(n) = sh.registry.node(&node) {
                                n.do_send(SendWeights(ServerMessage::Warm(warm)));
                            }
                        }
                        (granted, peer, node, sha)
                    }
                    .into_actor(self)
                    .map(|(granted, peer, node, sha), act, ctx| {
                        if !granted {
                            // The peer could not be told: as if it failed the receiver.
                            let report = caldera_spec::weights::WarmupReport {
                                epoch: 0,
                                sha256: sha,
                                at_ms: act.sh.now_ms(),
                                progress: WarmupProgress::Failed {
                                    source: sources::peer_label(&peer),
                                    bytes_done: act.rec.nodes.get(&node).map_or(0, |c| c.bytes_done),
                                    reason: format!("peer {peer} has no live session"),
                                },
                            };
                            act.on_report(ctx, &node, report);
                        }
                    }),
                );
            }
        }
    }

    /// A node's report on its copy.
    pub(super) fn on_report(
        &mut self,
        ctx: &mut Context<Self>,
        node: &str,
        report: caldera_spec::weights::WarmupReport,
    ) {
        if report.sha256 != self.rec.spec.weights.sha256 {
            return;
        }
        let model = self.key();
        let mut plan = self.plan();
        match report.progress {
            WarmupProgress::Fetching { bytes_done, .. } => {
                // Progress lives in memory only: the next report brings it back.
                if let Some(c) = self.rec.nodes.get_mut(node) {
                    if c.copy == CopyState::Warming {
                        c.bytes_done = bytes_done;
                    }
                }
                return;
            }
            WarmupProgress::Verified {
                source,
                bytes_fetched,
                ..
            } => {
                if self.rec.nodes.get(node).is_some_and(|c| c.copy == CopyState::Verified) {
                    return;
                }
                let how = format!("verified after reading {bytes_fetched} bytes from {source}");
                self.mark_verified(&mut plan, node, &source, &how);
                self.serve_waiting(&mut plan);
            }
            WarmupProgress::Failed {
                source,
                bytes_done,
                reason,
            } => {
                if !self.rec.nodes.get(node).is_some_and(|c| c.copy == CopyState::Warming) {
                    return;
                }
                if let Some(c) = plan.rec.nodes.get_mut(node) {
                    c.bytes_done = bytes_done;
                }
                let msg = format!(
                    "node {node}'s read of {model} from {source} failed at {bytes_done} bytes ({reason}); another source"
                );
                plan.events
                    .push(self.event(Some(node), EventKind::ModelWarmup, msg));
                self.serve(&mut plan, node, Some(&source));
            }
            WarmupProgress::Evicted { reason } => {
                let msg = format!("node {node} no longer holds {model}: {reason}");
                plan.rec.nodes.insert(
                    node.to_string(),
                    NodeCopy {
                        copy: CopyState::Evicted,
                        bytes_done: 0,
                        source: String::new(),
                    },
                );
                plan.events
                    .push(self.event(Some(node), EventKind::ModelWarmup, msg));
            }
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<NodeNeeds> for ModelVersionActor {
    type Result = ();
    fn handle(&mut self, m: NodeNeeds, ctx: &mut Context<Self>) {
        let mut plan = self.plan();
        if let Some(task) = &m.task {
            plan.rec.tasks.insert(task.clone());
            if plan.rec.state == ModelState::Registered {
                plan.rec.state = ModelState::Active;
                let msg = format!(
                    "model {} is active: first used by task {}",
                    self.key(),
                    caldera_spec::local_id(task)
                );
                plan.events
                    .push(self.event(None, EventKind::ModelStateChanged, msg));
            }
        }
        let copy = plan.rec.nodes.get(&m.node).map(|c| c.copy);
        match copy {
            Some(CopyState::Warming) => {}
            Some(CopyState::Verified)
                if self
                    .sh
                    .fleet
                    .get(&m.node)
                    .is_none_or(|c| !c.live || c.holds(&self.rec.spec.weights.sha256)) => {}
            _ => self.serve(&mut plan, &m.node, None),
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<WarmupFrom> for ModelVersionActor {
    type Result = ();
    fn handle(&mut self, m: WarmupFrom, ctx: &mut Context<Self>) {
        self.on_report(ctx, &m.node, m.report);
    }
}

impl Handler<NodeCacheSeen> for ModelVersionActor {
    type Result = ();
    /// What the node's cache report says wins over the record: a copy it
    /// holds is verified (waiting nodes may read it), one it no longer lists
    /// is gone.
    fn handle(&mut self, m: NodeCacheSeen, ctx: &mut Context<Self>) {
        let Some(cache) = self.sh.fleet.get(&m.node) else {
            return;
        };
        if !cache.live {
            return;
        }
        let sha = &self.rec.spec.weights.sha256;
        let recorded = self.rec.nodes.get(&m.node).map(|c| c.copy);
        let mut plan = self.plan();
        if cache.holds(sha) && recorded != Some(CopyState::Verified) {
            self.mark_verified(&mut plan, &m.node, "cache", "its cache report lists a verified copy");
            self.serve_waiting(&mut plan);
        } else if !cache.holds(sha) && recorded == Some(CopyState::Verified) {
            plan.rec.nodes.insert(
                m.node.clone(),
                NodeCopy {
                    copy: CopyState::Evicted,
                    bytes_done: 0,
                    source: String::new(),
                },
            );
            let msg = format!("node {} no longer lists {} in its cache", m.node, self.key());
            plan.events
                .push(self.event(Some(&m.node), EventKind::ModelWarmup, msg));
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<NodeGone> for ModelVersionActor {
    type Result = ();
    /// A lost node's own read stops (its slot is freed); every receiver it
    /// served is given another source.
    fn handle(&mut self, m: NodeGone, ctx: &mut Context<Self>) {
        let mut plan = self.plan();
        let model = self.key();
        if plan
            .rec
            .nodes
            .get(&m.node)
            .is_some_and(|c| matches!(c.copy, CopyState::Warming | CopyState::Waiting))
        {
            plan.rec.nodes.remove(&m.node);
            let msg = format!("node {} is gone: its warmup of {model} stopped", m.node);
            plan.events
                .push(self.event(Some(&m.node), EventKind::ModelWarmup, msg));
        }
        let label = sources::peer_label(&m.node);
        let receivers: Vec<String> = plan
            .rec
            .nodes
            .iter()
            .filter(|(_, c)| c.copy == CopyState::Warming && c.source == label)
            .map(|(n, _)| n.clone())
            .collect();
        for r in receivers {
            let msg = format!("peer {} of node {r} is gone: another source for {model}", m.node);
            plan.events
                .push(self.event(Some(&r), EventKind::ModelWarmup, msg));
            self.serve(&mut plan, &r, Some(&label));
        }
        self.serve_waiting(&mut plan);
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<OriginFreed> for ModelVersionActor {
    type Result = ();
    fn handle(&mut self, _: OriginFreed, ctx: &mut Context<Self>) {
        let mut plan = self.plan();
        self.serve_waiting(&mut plan);
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl ModelVersionActor {
    /// Pins (or unpins) the copy on every live holder.
    pub(super) fn pin_holders(&self) {
        for (node, c) in &self.rec.nodes {
            if c.copy != CopyState::Verified {
                continue;
            }
            if let Some(n) = self.sh.registry.node(node) {
                n.do_send(SendWeights(ServerMessage::Pin(PinCommand {
                    epoch: 0,
                    sha256: self.rec.spec.weights.sha256.clone(),
                    pinned: self.rec.pinned,
                })));
            }
        }
    }
}
