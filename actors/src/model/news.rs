//! What a version's actor hears: a node that needs a copy, a node's
//! reports on its copy, its cache seen or lost, an origin slot freed
//! elsewhere. Each plans the sources it implies (`warmup.rs`), records them,
//! then tells the nodes.
use super::sources;
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use crate::protocol::model::{NodeCacheSeen, NodeGone, NodeNeeds, OriginFreed, WarmupFrom};
use actix::prelude::*;
use caldera_spec::weights::{WarmupProgress, WarmupReport};
use caldera_spec::{CopyState, EventKind, ModelState, NodeCopy};

impl ModelVersionActor {
    /// A node's report on its copy.
    pub(super) fn on_report(&mut self, ctx: &mut Context<Self>, node: &str, report: WarmupReport) {
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
                if self
                    .rec
                    .nodes
                    .get(node)
                    .is_some_and(|c| c.copy == CopyState::Verified)
                {
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
                if self
                    .rec
                    .nodes
                    .get(node)
                    .is_none_or(|c| c.copy != CopyState::Warming)
                {
                    return;
                }
                self.read_failed(&mut plan, node, &source, bytes_done, &reason);
            }
            WarmupProgress::Evicted { reason } => {
                let msg = format!("node {node} no longer holds {model}: {reason}");
                plan.rec
                    .nodes
                    .insert(node.to_string(), NodeCopy::new(CopyState::Evicted, 0, ""));
                plan.events
                    .push(self.event(Some(node), EventKind::ModelWarmup, msg));
                // Found corrupt before use: a start on that node waits for
                // the copy (the agent deleted it and waits as on a miss), so
                // it is served again at once. A plain eviction (LRU, evict)
                // waits for the node's next need.
                if reason.starts_with(caldera_spec::codes::WEIGHTS_CORRUPT.name) {
                    self.serve(&mut plan, node, None);
                }
            }
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<NodeNeeds> for ModelVersionActor {
    type Result = ();
    fn handle(&mut self, m: NodeNeeds, ctx: &mut Context<Self>) {
        let mut plan = self.plan();
        // A task new to the version (or a need no task names) is something
        // that changed: a copy that gave up, or waits out a backoff, is read
        // again now.
        let asked_anew = m.task.as_ref().is_none_or(|t| !self.rec.tasks.contains(t));
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
            Some(CopyState::Retrying | CopyState::Failed) if !asked_anew => {}
            Some(CopyState::Retrying | CopyState::Failed) => {
                Self::forget_failures(&mut plan, &m.node);
                self.serve(&mut plan, &m.node, None);
            }
            Some(CopyState::Verified)
                if self.sh.fleet.get(&m.node).is_none_or(|c| {
                    !c.live || c.holds(&self.rec.spec.weights.sha256, self.rec.owner.as_deref())
                }) => {}
            _ => self.serve(&mut plan, &m.node, None),
        }
        // A need no task names (a prewarm's) holds on its own.
        if m.task.is_none() {
            if let Some(c) = plan.rec.nodes.get_mut(&m.node) {
                c.prewarm = matches!(c.copy, CopyState::Warming | CopyState::Waiting);
            }
        }
        // A node that just began reading may stream on to those waiting.
        if self.sh.config.models.peer_stream_partial {
            self.serve_waiting(&mut plan);
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
    }
}

impl Handler<WarmupFrom> for ModelVersionActor {
    type Result = ();
    /// Reports go to every version with the digest; one about another
    /// audience's fetch (another tenant's version declaring the same
    /// digest) is not this version's news.
    fn handle(&mut self, m: WarmupFrom, ctx: &mut Context<Self>) {
        if m.report.concerns(self.rec.owner.as_deref()) {
            self.on_report(ctx, &m.node, m.report);
        }
    }
}

impl Handler<NodeCacheSeen> for ModelVersionActor {
    type Result = ();
    /// What the node's cache report says wins over the record: a copy it
    /// holds is verified (waiting nodes may read it), one it no longer lists
    /// is gone. A hello that shows no fetch of a copy the record says it is
    /// warming (the agent restarted, or the control plane did and the agent
    /// never heard) is told its source again.
    fn handle(&mut self, m: NodeCacheSeen, ctx: &mut Context<Self>) {
        let Some(cache) = self.sh.fleet.get(&m.node) else {
            return;
        };
        if !cache.live {
            return;
        }
        let sha = &self.rec.spec.weights.sha256;
        let owner = self.rec.owner.as_deref();
        if self.rec.state == ModelState::Retired && cache.holds(sha, owner) {
            // Offline when it was retired, or its copy was in use then.
            self.evict_on(&m.node);
        }
        let recorded = self.rec.nodes.get(&m.node).map(|c| c.copy);
        let mut plan = self.plan();
        if cache.holds(sha, owner) && recorded != Some(CopyState::Verified) {
            self.mark_verified(
                &mut plan,
                &m.node,
                "cache",
                "its cache report lists a verified copy",
            );
            self.serve_waiting(&mut plan);
        } else if !cache.holds(sha, owner) && recorded == Some(CopyState::Verified) {
            plan.rec
                .nodes
                .insert(m.node.clone(), NodeCopy::new(CopyState::Evicted, 0, ""));
            let msg = format!(
                "node {} no longer lists {} in its cache",
                m.node,
                self.key()
            );
            plan.events
                .push(self.event(Some(&m.node), EventKind::ModelWarmup, msg));
        } else if m.hello
            && recorded == Some(CopyState::Warming)
            // A cut fetch is listed with its partial but no source reading
            // it (an agent killed mid-fetch and started again): that is no
            // fetch under way either.
            && !cache
                .report
                .fetching
                .iter()
                .any(|f| &f.sha256 == sha && !f.source.is_empty())
        {
            let msg = format!(
                "node {} said hello without its fetch of {}: told its source again",
                m.node,
                self.key()
            );
            plan.events
                .push(self.event(Some(&m.node), EventKind::ModelWarmup, msg));
            // Its own read does not count against it: the same source, or a better one.
            self.serve(&mut plan, &m.node, None);
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
        if plan.rec.nodes.get(&m.node).is_some_and(|c| {
            matches!(
                c.copy,
                CopyState::Warming | CopyState::Waiting | CopyState::Retrying
            )
        }) {
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
            let msg = format!(
                "peer {} of node {r} is gone: another source for {model}",
                m.node
            );
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
