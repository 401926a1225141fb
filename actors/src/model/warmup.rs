//! Carrying out staggered, peer-to-peer warmup for one version: planning on
//! a copy of the record the source of every node it serves (chosen by
//! [`sources::choose`]), recording it with its events in one batch, and
//! only then telling the nodes: a peer hears its grant before its receiver
//! is pointed at it. What prompts a plan is in `news.rs`.
use super::sources::{self, Choice, Limits, LivePeer, ORIGIN};
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::protocol::node::SendWeights;
use actix::prelude::*;
use caldera_spec::weights::{PeerGrant, PinCommand, WarmCommand, WarmupProgress, WeightSource};
use caldera_spec::wire::ServerMessage;
use caldera_spec::{CopyState, Event, EventKind, ModelVersionRecord, NodeCopy};

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
            per_version: self.sh.config.models.max_origin_pulls_per_version,
            peer_warmup: self.sh.config.models.peer_warmup,
            stream_partial: self.sh.config.models.peer_stream_partial,
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
            origin: super::origins::access(&self.sh.config, &self.rec),
            owner: self.rec.owner.clone(),
        }
    }

    /// Chooses `node`'s source into `plan` (see `sources.rs`), reserving an
    /// origin slot in the registry-wide budget when it is the origin.
    pub(super) fn serve(&self, plan: &mut Plan, node: &str, avoid: Option<&str>) {
        let key = self.key();
        let model = key.clone();
        // The node's last cache report may still list a copy it has just
        // reported evicted (found corrupt before use): the report is older
        // than the eviction, so an evicted record is served, not believed.
        let evicted = plan
            .rec
            .nodes
            .get(node)
            .is_some_and(|c| c.copy == CopyState::Evicted);
        if !evicted
            && self
                .sh
                .fleet
                .get(node)
                .is_some_and(|c| c.holds(&self.rec.spec.weights.sha256, self.rec.owner.as_deref()))
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
                .admit(&key, wanted, self.sh.config.models.max_origin_pulls)
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
                    expires_at_ms: self.sh.now_ms() + self.sh.config.models.peer_token_ttl_ms,
                    owner: self.rec.owner.clone(),
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
                if plan
                    .rec
                    .nodes
                    .get(node)
                    .is_some_and(|c| c.copy == CopyState::Waiting)
                {
                    return; // already waiting, already said why
                }
                (
                    CopyState::Waiting,
                    String::new(),
                    format!("node {node} waits for {model}: {why}"),
                )
            }
        };
        // A retry keeps the failures behind it (its backoff and budget).
        let mut next = NodeCopy::new(copy, bytes_done, source);
        if let Some(prior) = plan.rec.nodes.get(node) {
            next.failures = prior.failures;
            next.reason = prior.reason.clone();
            next.prewarm = prior.prewarm;
        }
        // A read after a backoff: the backoff's start said so already.
        let backing_off = next.failures >= 2;
        plan.rec.nodes.insert(node.to_string(), next);
        if !backing_off {
            plan.events
                .push(self.event(Some(node), EventKind::ModelWarmup, msg));
        }
    }

    pub(super) fn mark_verified(&self, plan: &mut Plan, node: &str, source: &str, how: &str) {
        plan.rec.nodes.insert(
            node.to_string(),
            NodeCopy::new(
                CopyState::Verified,
                self.rec.spec.weights.size_bytes,
                source,
            ),
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
    pub(super) fn carry_out(
        &mut self,
        ctx: &mut Context<Self>,
        site: CommitSite,
        plan: Plan,
    ) -> bool {
        if plan.rec == self.rec && plan.events.is_empty() {
            return true;
        }
        let Plan { rec, events, tells } = plan;
        if self.record(site, rec, events).is_err() {
            return false;
        }
        for t in tells {
            let node = match &t {
                Tell::Send { node, .. } | Tell::GrantThenWarm { node, .. } => node,
            };
            let began = self.rec.nodes.get(node).map_or(0, |c| c.bytes_done);
            self.read_began.insert(node.clone(), began);
            self.tell(ctx, t);
        }
        self.arm_retries(ctx);
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
                                    bytes_done: act
                                        .rec
                                        .nodes
                                        .get(&node)
                                        .map_or(0, |c| c.bytes_done),
                                    reason: format!("peer {peer} has no live session"),
                                },
                                owner: act.rec.owner.clone(),
                            };
                            act.on_report(ctx, &node, report);
                        }
                    }),
                );
            }
        }
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
