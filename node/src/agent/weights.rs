//! The agent's side of the weight cache: warm, grant, evict and pin
//! commands; starts that name a model (held in warming until the cache has
//! a verified copy); the cache's reports to the control plane; and the
//! workloads' `Warming` progress events.
use super::Agent;
use crate::cache::peer::{PeerServer, PeerShared};
use crate::cache::{CacheEvent, CacheNote, Want, WeightCache};
use crate::config::AgentConfig;
use crate::error::{AgentError, StartError};
use crate::runtime::now_ms;
use caldera_spec::codes;
use caldera_spec::wire::{
    CacheReport, EvictCommand, ModelMount, NodeMessage, PeerGrant, PinCommand, StartCommand,
    SwapCommand, WarmCommand, WarmupProgress, WarmupReport,
};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::UnboundedSender;

/// What the loop keeps of the cache.
pub(super) struct Weights {
    pub cache: WeightCache,
    /// The peer server's shared state and the server (with `--peer-listen`).
    pub peer: Option<(Arc<PeerShared>, PeerServer)>,
}

impl Weights {
    /// Opens the cache and, with `--peer-listen`, starts the peer server.
    pub fn open(
        config: &AgentConfig,
        notes: UnboundedSender<CacheNote>,
    ) -> Result<Weights, AgentError> {
        // Built once: the host's certificate store is read here, not per fetch.
        let tls = crate::cache::fetch::Tls::new(config.origin_ca.as_deref())
            .map_err(|e| AgentError::Config(e.to_string()))?;
        let cache = WeightCache::open(&config.data_dir, config.cache_capacity_bytes(), notes, tls)?;
        let peer = match &config.peer_listen {
            None => None,
            Some(listen) => {
                let shared = Arc::new(PeerShared {
                    grants: Mutex::new(Default::default()),
                    layout: cache.layout(),
                    access: cache.peer_access(),
                    served: cache.served_counter(),
                    pace: config
                        .peer_max_mbps
                        .map(crate::cache::peer::pace::Pace::new),
                });
                let server =
                    PeerServer::start(listen, config.peer_advertise.clone(), shared.clone())
                        .map_err(|e| AgentError::Config(format!("peer-listen {listen}: {e}")))?;
                Some((shared, server))
            }
        };
        Ok(Weights { cache, peer })
    }

    pub fn peer_url(&self) -> Option<String> {
        self.peer.as_ref().map(|(_, s)| s.url.clone())
    }

    /// Stops fetching and serving (the partials stay for the next start).
    pub async fn close(self) {
        let mut cache = self.cache;
        cache.abort_fetches();
        if let Some((_, server)) = self.peer {
            server.stop().await;
        }
    }
}

impl Agent {
    /// The cache as the hello and heartbeats carry it.
    pub(super) fn cache_report(&mut self) -> CacheReport {
        let in_use = self.runtime.models_in_use();
        self.weights.cache.report(&in_use)
    }

    /// A start: one naming a model is held in warming until its copy is
    /// verified (a copy already here is checked again first).
    pub(super) fn start(&mut self, cmd: &StartCommand) {
        let Some(model) = cmd.model.clone() else {
            self.runtime.start(cmd);
            return;
        };
        if self.runtime.knows(&cmd.allocation_id) {
            self.runtime.start(cmd); // says it is a duplicate, does nothing
            return;
        }
        if !self.weights.cache.enabled() {
            let name = crate::runtime::model_label(&model);
            self.runtime.refuse(cmd, &StartError::NoCache(name));
            return;
        }
        self.runtime.start(cmd);
        self.want_copy(&model);
    }

    /// Asks the cache for `model`'s verified copy (checked again if here;
    /// else it waits for a warm) and says so in `Warming` events.
    fn want_copy(&mut self, model: &ModelMount) {
        let (source, bytes_done) =
            match self
                .weights
                .cache
                .want(&model.sha256, model.size_bytes, model.owner.as_deref())
            {
                Want::Checking => ("cache".to_string(), 0),
                Want::Waiting { source, bytes_done } => (source, bytes_done),
            };
        self.runtime
            .warming_progress(&model.sha256, &source, bytes_done, 0);
    }

    /// An in-place swap (see `runtime::swap`): the new version's copy is
    /// made sure of first, through the same path as a start's, while the
    /// old process serves.
    pub(super) fn swap(&mut self, cmd: &SwapCommand) {
        if !self.runtime.begin_swap(cmd) {
            return;
        }
        if !self.weights.cache.enabled() {
            let why = StartError::NoCache(crate::runtime::model_label(&cmd.model));
            self.runtime
                .swap_failed(cmd, codes::SWAP_VERIFY_FAILED, why.to_string());
            return;
        }
        self.want_copy(&cmd.model);
    }

    pub(super) fn warm(&mut self, cmd: WarmCommand) {
        if !self.current_epoch(cmd.epoch, "warm", &cmd.model) {
            return;
        }
        tracing::info!(
            "warming {} ({}) from {}",
            cmd.model,
            cmd.sha256,
            cmd.source.label()
        );
        let in_use = self.runtime.models_in_use();
        let events = self.weights.cache.warm(&cmd, &in_use);
        self.on_cache_events(events);
    }

    pub(super) fn peer_grant(&mut self, grant: PeerGrant) {
        if !self.current_epoch(grant.epoch, "peer grant", &grant.receiver) {
            return;
        }
        match &self.weights.peer {
            Some((shared, _)) => shared.grant(
                &grant.token,
                &grant.sha256,
                &grant.receiver,
                grant.expires_at_ms,
                grant.owner.as_deref(),
            ),
            None => tracing::warn!(
                "a peer grant for {} came, but this agent serves no peers (no --peer-listen)",
                grant.receiver
            ),
        }
    }

    pub(super) fn evict(&mut self, cmd: EvictCommand) {
        if !self.current_epoch(cmd.epoch, "evict", &cmd.sha256) {
            return;
        }
        let in_use = self.runtime.models_in_use();
        let events = self.weights.cache.evict(&cmd.sha256, &cmd.reason, &in_use);
        self.on_cache_events(events);
    }

    pub(super) fn pin(&mut self, cmd: PinCommand) {
        if self.current_epoch(cmd.epoch, "pin", &cmd.sha256) {
            self.weights.cache.pin(&cmd.sha256, cmd.pinned);
        }
    }

    /// A fetch or a check ended or moved on.
    pub(super) fn on_cache_note(&mut self, note: CacheNote) {
        let events = self.weights.cache.on_note(note);
        self.on_cache_events(events);
    }

    /// Evictions that waited for a copy's last user (after exits).
    pub(super) fn sweep_cache(&mut self) {
        let in_use = self.runtime.models_in_use();
        let events = self.weights.cache.sweep(&in_use);
        self.on_cache_events(events);
    }

    fn on_cache_events(&mut self, events: Vec<CacheEvent>) {
        for event in events {
            match event {
                CacheEvent::Ready { sha256 } => {
                    let path = self.weights.cache.copy_path(&sha256);
                    // Only the starts whose audience this copy serves: one
                    // waiting for its own fetch keeps waiting.
                    let cache = &self.weights.cache;
                    let serves = |owner: Option<&str>| cache.serves(&sha256, owner);
                    self.runtime.weights_ready(&sha256, &path, &serves);
                }
                CacheEvent::Report {
                    sha256,
                    owner,
                    progress,
                } => {
                    match &progress {
                        WarmupProgress::Fetching {
                            source,
                            bytes_done,
                            rate_bytes_per_s,
                            ..
                        } => self.runtime.warming_progress(
                            &sha256,
                            source,
                            *bytes_done,
                            *rate_bytes_per_s,
                        ),
                        WarmupProgress::Failed {
                            bytes_done, reason, ..
                        } => {
                            self.runtime.warming_progress(&sha256, "", *bytes_done, 0);
                            self.runtime.swap_copy_failed(&sha256, reason);
                        }
                        WarmupProgress::Evicted { reason, .. } => {
                            self.runtime.warming_progress(&sha256, "", 0, 0);
                            self.runtime.swap_copy_failed(&sha256, reason);
                        }
                        WarmupProgress::Verified { .. } => {}
                    }
                    if let Some(epoch) = self.live_epoch() {
                        self.send(NodeMessage::Warmup(WarmupReport {
                            epoch,
                            sha256,
                            at_ms: now_ms(),
                            progress,
                            owner,
                        }));
                    }
                }
            }
        }
        self.flush();
    }
}
