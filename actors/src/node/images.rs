//! The node's images as the control plane sees them, and its side of the
//! pull stagger.
//!
//! Reports (hello, heartbeats when changed) go into the shared directory and,
//! when what placement weighs changed, to the Scheduler.
//!
//! The stagger's go-ahead is the start command itself: a start whose image
//! the node does not hold (or with pull policy `always`) asks for a pull
//! slot; without one, it is held back here and the task is told it is
//! Preparing, with an `image_pull` event naming the nodes pulling the image
//! now. When a slot frees (a pull here or on another node ended: the
//! workload became ready, started or failed, was stopped, or its deadline
//! passed), the start goes out. The agent needs nothing new: it pulls when
//! its start arrives. A pre-pull waits for a slot the same way.
use super::NodeActor;
use crate::images::node_images;
use crate::images::pulls::{prepull_key, Admission, LetGo, Puller};
use crate::protocol::node::{NoLiveSession, PullSlotFree, SendPrepull};
use crate::protocol::scheduler::NodeImagesUpdate;
use actix::prelude::*;
use caldera_spec::container::PullPolicy;
use caldera_spec::images::{canonical, ImageReport, PrepullCommand, PrepullReport};
use caldera_spec::wire::{ServerMessage, StartCommand, WorkloadEvent, WorkloadEventKind};
use caldera_spec::{Event, EventKind};

/// Slack past a pull's own timeout before its slot is taken back: the
/// agent's failure report is on its way.
const SLOT_SLACK_MS: u64 = 10_000;

/// A start or pre-pull held back for a pull slot.
pub(super) struct Withheld {
    msg: ServerMessage,
    /// The epoch it was meant for: a new session drops it.
    epoch: u64,
}

impl NodeActor {
    /// A report from the hello or a heartbeat.
    pub(super) fn images_seen(&mut self, report: &ImageReport) {
        if self.sh.images.update(&self.rec.name, report) {
            self.sh.scheduler.do_send(NodeImagesUpdate {
                name: self.rec.name.clone(),
                images: node_images(report),
            });
        }
    }

    fn pull_limit(&self) -> usize {
        self.sh.config.scheduling.max_image_pulls as usize
    }

    /// Whether `cmd` waits for a pull slot; it is then held back here (see
    /// the module comment) and true is answered.
    pub(super) fn start_waits_for_pull(&mut self, cmd: &StartCommand) -> bool {
        let Some(c) = &cmd.container else {
            return false;
        };
        if c.pull == PullPolicy::IfNotPresent && self.sh.images.holds(&self.rec.name, &c.image) {
            return false;
        }
        let until_ms = self.sh.now_ms() + c.prepare_timeout_ms + SLOT_SLACK_MS;
        let Some((pulling, ahead)) = self.ask_slot(&c.image, &cmd.allocation_id, until_ms) else {
            return false;
        };
        let msg = format!(
            "{} waits to pull {} on {}: {} pulling it now (scheduling.max-image-pulls {}), {ahead} waiting before it",
            cmd.task_id,
            c.image,
            self.rec.name,
            pulling.join(", "),
            self.pull_limit(),
        );
        self.record_pull(msg, Some(&cmd.task_id));
        self.withheld.insert(
            cmd.allocation_id.clone(),
            Withheld {
                msg: ServerMessage::Start(cmd.clone()),
                epoch: cmd.epoch,
            },
        );
        self.forward(
            &cmd.task_id,
            &cmd.allocation_id,
            WorkloadEventKind::Preparing,
        );
        true
    }

    /// Asks for a slot to pull `image` under `key`: None to go now, else
    /// the nodes pulling it and how many wait before this one.
    fn ask_slot(&mut self, image: &str, key: &str, until_ms: u64) -> Option<(Vec<String>, usize)> {
        let puller = Puller {
            node: self.rec.name.clone(),
            key: key.to_string(),
            until_ms,
        };
        let limit = self.pull_limit();
        let now = self.sh.now_ms();
        let (expired, admission) = {
            let mut slots = self.sh.images.slots();
            let expired = slots.expire(now, limit);
            (expired, slots.ask(&canonical(image), puller, limit))
        };
        self.let_go(expired);
        match admission {
            Admission::Go => None,
            Admission::Wait { pulling, ahead } => Some((pulling, ahead)),
        }
    }

    /// An event of the agent's that ends a start's pull (it is ready,
    /// started or failed).
    pub(super) fn pull_event(&mut self, ev: &WorkloadEvent) {
        if matches!(
            ev.kind,
            WorkloadEventKind::Ready { .. }
                | WorkloadEventKind::Started { .. }
                | WorkloadEventKind::StartFailed { .. }
                | WorkloadEventKind::Exited(_)
        ) {
            self.pull_ended(&ev.allocation_id);
        }
    }

    /// The pull (or the wait) of `key` on this node ended or never will.
    pub(super) fn pull_ended(&mut self, key: &str) {
        self.withheld.remove(key);
        let limit = self.pull_limit();
        let go = self.sh.images.slots().release(&self.rec.name, key, limit);
        self.let_go(go);
    }

    /// The session ended or a new one began: what was held back for the old
    /// one is dropped (its tasks learn from the hello's reconciliation) and
    /// the node's slots go to others.
    pub(super) fn pulls_gone(&mut self) {
        self.withheld.clear();
        let limit = self.pull_limit();
        let go = self.sh.images.slots().release_node(&self.rec.name, limit);
        self.let_go(go);
    }

    /// Slots past their deadline go to the next in line.
    pub(super) fn expire_pulls(&mut self) {
        let limit = self.pull_limit();
        let now = self.sh.now_ms();
        let go = self.sh.images.slots().expire(now, limit);
        self.let_go(go);
    }

    /// Tells each node a waiter of which was let go.
    fn let_go(&mut self, go: Vec<LetGo>) {
        for g in go {
            if g.puller.node == self.rec.name {
                self.send_withheld(&g.puller.key);
            } else if let Some(n) = self.sh.registry.node(&g.puller.node) {
                n.do_send(PullSlotFree { key: g.puller.key });
            }
        }
    }

    /// Sends what waited for the slot `key` got; when nothing waits (any
    /// more), the slot is given back.
    fn send_withheld(&mut self, key: &str) {
        let Some(w) = self.withheld.remove(key) else {
            self.pull_ended(key);
            return;
        };
        if w.epoch != self.rec.epoch || self.session.is_none() {
            self.pull_ended(key);
            return;
        }
        let mut msg = w.msg;
        if let ServerMessage::Prepull(p) = &mut msg {
            p.epoch = self.rec.epoch;
        }
        if !self.send(msg) {
            self.pull_ended(key);
        }
    }

    /// The operator's pre-pull: sent now, or held back for a slot.
    fn prepull(&mut self, m: SendPrepull) -> std::result::Result<bool, NoLiveSession> {
        if self.session.is_none() {
            return Err(NoLiveSession {
                node: self.rec.name.clone(),
            });
        }
        let cmd = ServerMessage::Prepull(PrepullCommand {
            epoch: self.rec.epoch,
            image: m.image.clone(),
            timeout_ms: m.timeout_ms,
        });
        let key = prepull_key(&canonical(&m.image));
        let held = self.sh.images.holds(&self.rec.name, &m.image);
        let until_ms = self.sh.now_ms() + m.timeout_ms + SLOT_SLACK_MS;
        let wait = if held {
            None
        } else {
            self.ask_slot(&m.image, &key, until_ms)
        };
        match wait {
            None => {
                self.record_pull(
                    format!("pre-pull of {} sent to {}", m.image, self.rec.name),
                    None,
                );
                if self.send(cmd) {
                    Ok(true)
                } else {
                    self.pull_ended(&key);
                    Err(NoLiveSession {
                        node: self.rec.name.clone(),
                    })
                }
            }
            Some((pulling, ahead)) => {
                let msg = format!(
                    "pre-pull of {} on {} waits: {} pulling it now (scheduling.max-image-pulls {}), {ahead} waiting before it",
                    m.image,
                    self.rec.name,
                    pulling.join(", "),
                    self.pull_limit(),
                );
                self.record_pull(msg, None);
                let epoch = self.rec.epoch;
                self.withheld.insert(key, Withheld { msg: cmd, epoch });
                Ok(false)
            }
        }
    }

    /// The agent's answer to a pre-pull.
    pub(super) fn on_prepulled(&mut self, r: PrepullReport) {
        if r.epoch != self.rec.epoch {
            return;
        }
        let msg = match r.ok {
            true => format!(
                "pre-pull of {} on {}: done ({})",
                r.image, self.rec.name, r.digest
            ),
            false => format!(
                "pre-pull of {} on {} failed: {}",
                r.image, self.rec.name, r.detail
            ),
        };
        self.record_pull(msg, None);
        self.pull_ended(&prepull_key(&canonical(&r.image)));
    }

    fn record_pull(&self, msg: String, task: Option<&str>) {
        let mut e = Event::new(self.sh.now_ms(), EventKind::ImagePull, msg).node(&self.rec.name);
        if let Some(t) = task {
            e = e.task(t);
            if let Some(tenant) = caldera_spec::tenant_of(t) {
                e = e.tenant(tenant);
            }
        }
        self.sh.record(e);
    }
}

impl Handler<PullSlotFree> for NodeActor {
    type Result = ();
    fn handle(&mut self, m: PullSlotFree, _: &mut Context<Self>) {
        self.send_withheld(&m.key);
    }
}

impl Handler<SendPrepull> for NodeActor {
    type Result = std::result::Result<bool, NoLiveSession>;
    fn handle(&mut self, m: SendPrepull, _: &mut Context<Self>) -> Self::Result {
        self.prepull(m)
    }
}
