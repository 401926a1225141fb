//! The one resync, applied to a node's session (the comparison itself is
//! [`crate::resync::plan`]): a hello is answered with what the node keeps
//! and kills; a gap in the session's events, or a task rebuilt from sled
//! that may have missed what its workload did, asks the agent for a digest
//! of what it holds, and the digest is compared with the books the same
//! way. Either way the tasks of kept workloads hear what the node holds
//! (a task that already has it ignores it), under the node-trust rules: the
//! session speaks only for the allocations it holds under its epoch.
use super::NodeActor;
use crate::protocol::scheduler::AllocationsOn;
use crate::protocol::task::WorkloadMissing;
use crate::resync::{plan, Occasion, Plan, TaskNews};
use actix::prelude::*;
use caldera_spec::wire::{Digest, ServerMessage, Welcome, WorkloadReport};
use caldera_spec::{Allocation, Event, EventKind, NodeState};
use std::collections::HashMap;

impl NodeActor {
    /// Answers the hello once the books' view of the node is known: keep
    /// and kill lists, the node's room back in the pool, what the kept
    /// workloads did (exits kept while away, starts and readiness a task
    /// may never have recorded), and news for the tasks whose workload the
    /// node no longer has.
    pub(super) fn welcome(
        &mut self,
        ctx: &mut Context<Self>,
        owned: &[Allocation],
        reported: &[WorkloadReport],
        node_secret: Option<String>,
    ) {
        let p = plan(owned, reported, Occasion::Hello);
        let mine = owned.iter().filter(|a| a.node == self.rec.name);
        let mine = mine.map(|a| (a.allocation_id.clone(), a.task_id.clone()));
        self.held.reset(mine, &p.kill);
        if let Some(notice) = p.kill_notice(&self.rec.name) {
            self.sh.record(
                Event::new(self.sh.now_ms(), EventKind::NodeFenced, notice).node(&self.rec.name),
            );
        }
        let welcomed = self.send(ServerMessage::Welcome(Welcome {
            node_name: self.rec.name.clone(),
            epoch: self.rec.epoch,
            heartbeat_interval_ms: self.sh.config.nodes.heartbeat_interval_ms,
            lease_ms: self.lease_ms(),
            stop_grace_ms: self.sh.config.nodes.stop_grace_ms,
            keep: p.keep.clone(),
            kill: p.kill.clone(),
            node_secret,
        }));
        // The agent may count its lease from the welcome: so do we (conservative).
        self.lease_renewed = self.sh.clock.instant();
        if welcomed {
            // Placeable only with a session to start work on: one that
            // closed while the hello was answered is not.
            self.announce_up();
        }
        self.resume_drain(ctx);
        self.tell_news(p.news);
        for w in p.missing {
            if let Some(t) = self.sh.registry.task(&w.task_id) {
                t.do_send(WorkloadMissing {
                    node: self.rec.name.clone(),
                });
            }
        }
    }

    /// Event number `seq` arrived: a gap it shows asks for a digest.
    pub(super) fn event_numbered(&mut self, seq: u64) {
        if let Some(why) = self.events.event(seq) {
            self.ask_digest(&why, false);
        }
    }

    /// A heartbeat counted `events_sent` events: fewer arrived, a digest.
    pub(super) fn heartbeat_counted(&mut self, events_sent: u64) {
        if let Some(why) = self.events.heartbeat(events_sent) {
            self.ask_digest(&why, false);
        }
    }

    /// Asks the agent for a digest of what it holds, for `why`; `always`:
    /// even while one asked for a gap is on its way (see
    /// [`crate::resync::SessionEvents::ask`]).
    pub(super) fn ask_digest(&mut self, why: &str, always: bool) {
        if self.session.is_none() || self.rec.state != NodeState::Ready {
            return;
        }
        if let Some(ask) = self.events.ask(why, always) {
            tracing::info!(node = %self.rec.name, "asking for a digest: {why}");
            self.send(ServerMessage::Resync {
                epoch: self.rec.epoch,
                request: ask.request,
            });
        }
    }

    /// A digest arrived: compared with the books once the Scheduler answers
    /// what it gives the node, on the session that sent it. The session's
    /// later events wait meanwhile (as for a hello), so a task never hears
    /// the digest's older news after an event that followed it.
    pub(super) fn on_digest(&mut self, ctx: &mut Context<Self>, d: Digest) {
        if d.epoch != self.rec.epoch {
            tracing::debug!(node = %self.rec.name, "ignoring a digest of epoch {}", d.epoch);
            return;
        }
        let why = self
            .events
            .digest(d.request, d.events_sent)
            .unwrap_or_else(|| "a digest asked for earlier".into());
        let session = self.session.as_ref().map(|s| s.id);
        let node = self.rec.name.clone();
        let sh = self.sh.clone();
        ctx.wait(
            async move { sh.scheduler.send(AllocationsOn { node }).await }
                .into_actor(self)
                .map(move |owned, act, _| {
                    if act.session.as_ref().map(|s| s.id) != session {
                        return; // a new session resyncs at its hello
                    }
                    match owned {
                        Ok(owned) => act.repair(&owned, &d, &why),
                        // Nothing known of the books: nothing repaired; the
                        // next gap or rebuilt task asks again.
                        Err(e) => tracing::warn!(
                            node = %act.rec.name,
                            "a digest could not be compared with the books: {e}"
                        ),
                    }
                }),
        );
    }

    /// Repairs what a digest shows: workloads the books no longer give the
    /// node are stopped, and the tasks of the others hear what the node
    /// holds, only for allocations this session holds under its epoch.
    fn repair(&mut self, owned: &[Allocation], d: &Digest, why: &str) {
        let mine: Vec<Allocation> = owned
            .iter()
            .filter(|a| a.node == self.rec.name)
            .cloned()
            .collect();
        let p = plan(&mine, &d.workloads, Occasion::Digest);
        let epochs: HashMap<&str, u64> = d
            .workloads
            .iter()
            .map(|w| (w.allocation_id.as_str(), w.epoch))
            .collect();
        let news: Vec<TaskNews> = p
            .news
            .iter()
            .filter(|n| {
                let epoch = epochs.get(n.allocation_id.as_str()).copied().unwrap_or(0);
                let what = "digest report";
                self.vouch(epoch, &n.allocation_id, &n.task_id, what)
                    .is_some()
            })
            .cloned()
            .collect();
        self.held.fence(&p.kill);
        for id in &p.kill {
            self.send(ServerMessage::Stop(caldera_spec::wire::StopCommand {
                allocation_id: id.clone(),
                epoch: self.rec.epoch,
                grace_ms: self.sh.config.nodes.stop_grace_ms,
                reason: "the control plane's books no longer give this node the allocation".into(),
            }));
        }
        let notice = resync_notice(&self.rec.name, why, d, &p, news.len());
        self.sh.record(
            Event::new(self.sh.now_ms(), EventKind::NodeResynced, notice).node(&self.rec.name),
        );
        self.tell_news(news);
    }

    /// Tells each task what the node holds of its workload; an exit once
    /// per session, and nothing more once it is in (as for events).
    fn tell_news(&mut self, news: Vec<TaskNews>) {
        for n in news {
            if !n.is_exit() && self.exits_forwarded.contains_key(&n.allocation_id) {
                continue;
            }
            self.forward(&n.task_id, &n.allocation_id, n.kind);
        }
    }
}

/// The text of the event a digest's repair records.
fn resync_notice(node: &str, why: &str, d: &Digest, p: &Plan, told: usize) -> String {
    let killed = match p.kill.is_empty() {
        true => "none".to_string(),
        false => p.kill.join(", "),
    };
    format!(
        "node {node} resynced ({why}): it holds {} workload(s) after {} event(s); \
         {told} piece(s) of news told to their tasks; stopped as no longer its own: {killed}",
        d.workloads.len(),
        d.events_sent
    )
}
