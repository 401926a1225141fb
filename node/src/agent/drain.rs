//! A stop is a drain: on SIGTERM the agent tells the
//! control plane `Draining` and keeps its session — heartbeats, commands,
//! events — while the control plane moves its work away as planned stops
//! (training checkpoints, then resumes elsewhere; no retry spent). It leaves
//! once nothing runs on it, or after `drain-timeout-ms`, saying what it left
//! (the shutdown that follows stops that, and its exits say `stopped`, which
//! the control plane also takes as a planned stop). When the whole cluster
//! stops with it (`caldera up`), it says so: the control plane then stops its
//! work where it is rather than wait to move it to nodes that stop too.
use super::Agent;
use crate::runtime::Note;
use caldera_spec::codes;
use caldera_spec::wire::NodeMessage;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Interval;

/// What the loop hands the drain: the same inputs it reads.
pub(super) struct Inputs<'a> {
    pub events: &'a mut UnboundedReceiver<crate::session::SessionEvent>,
    pub notes: &'a mut UnboundedReceiver<Note>,
    pub cache_notes: &'a mut UnboundedReceiver<crate::cache::CacheNote>,
    pub heartbeat: &'a mut Interval,
    pub checkpoints: &'a mut Interval,
}

impl Agent {
    /// Says `Draining` on the welcomed session, once per session: after a
    /// reconnect (the control plane restarted) the new one has not heard it.
    fn tell_draining(&mut self, told: &mut Option<u64>, why: &str, cluster_stopping: bool) {
        let Some(epoch) = self.live_epoch() else {
            return;
        };
        if *told != Some(epoch) {
            *told = Some(epoch);
            self.send(NodeMessage::Draining {
                epoch,
                reason: why.to_string(),
                cluster_stopping,
            });
        }
    }

    /// Drains the node: `Draining`, then the usual loop until nothing is
    /// left on it or the drain timeout passes. Without a welcomed session
    /// there is no one to move the work, so it returns at once.
    /// `cluster_stopping`: the whole cluster stops with this node; its held
    /// reservations stay held (the control plane keeps them too, and the
    /// next agent adopts them), so the drain waits only for what runs.
    pub(super) async fn drain(&mut self, why: &str, cluster_stopping: bool, inputs: Inputs<'_>) {
        if self.live_epoch().is_none() {
            tracing::warn!(
                "stopping without a session: the node cannot be drained; its workloads are stopped"
            );
            return;
        }
        let drained = |runtime: &crate::runtime::Runtime| match cluster_stopping {
            true => runtime.only_held_left(),
            false => runtime.all_exited(),
        };
        if drained(&self.runtime) {
            self.say_held(cluster_stopping);
            return;
        }
        tracing::info!(
            "draining: asking the control plane to move {} workload(s) away",
            self.runtime.live_count()
        );
        let mut told = None;
        self.tell_draining(&mut told, why, cluster_stopping);
        let bound = Duration::from_millis(self.config.drain_timeout_ms);
        let deadline = tokio::time::Instant::now() + bound;
        while !drained(&self.runtime) {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                Some(event) = inputs.events.recv() => {
                    self.on_session(event);
                    self.tell_draining(&mut told, why, cluster_stopping);
                }
                Some(note) = inputs.notes.recv() => self.on_note(note),
                Some(note) = inputs.cache_notes.recv() => self.on_cache_note(note),
                _ = inputs.checkpoints.tick() => self.on_poll_tick(),
                _ = inputs.heartbeat.tick() => self.heartbeat(),
            }
        }
        // The last exits go out (as events, flushed by the heartbeat) before
        // the session closes.
        self.heartbeat();
        let left: Vec<String> = self
            .runtime
            .hello_reports()
            .into_iter()
            .filter(|w| w.exit.is_none())
            .filter(|w| !(cluster_stopping && self.is_held(&w.allocation_id)))
            .map(|w| w.allocation_id)
            .collect();
        if left.is_empty() && !self.say_held(cluster_stopping) {
            tracing::info!("drained: nothing left on this node");
        } else if !left.is_empty() {
            tracing::warn!(
                code = codes::AGENT_DRAIN_INCOMPLETE.code,
                "drain not finished after {bound:?}: {} left ({}); stopping them",
                left.len(),
                left.join(", ")
            );
        }
    }
}

impl Agent {
    /// Says how many reservations stay held as the whole cluster stops;
    /// answers whether there were any.
    fn say_held(&self, cluster_stopping: bool) -> bool {
        let reports = self.runtime.hello_reports();
        let held = reports
            .iter()
            .filter(|w| cluster_stopping && self.is_held(&w.allocation_id))
            .count();
        if held > 0 {
            tracing::info!("drained: {held} reservation(s) stay held for the cluster's next start");
        }
        held > 0
    }

    /// Whether `allocation_id` is a reservation still held here.
    fn is_held(&self, allocation_id: &str) -> bool {
        self.runtime
            .workload(allocation_id)
            .is_some_and(crate::runtime::workload::Workload::is_held_reservation)
    }
}
