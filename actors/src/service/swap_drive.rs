//! Carrying a recorded swap out. Each turn reads what the replicas' records
//! say now (the node's reports, recorded by each replica), asks the rules
//! (`lifecycle/swap_steps.rs`) for the next step, records it in the
//! service's record, and only then acts: a warm asked of the version's
//! actor, a Swap command to the node. A control plane killed mid-swap reads
//! the same record back and asks the same question: a Swap whose answer is
//! not recorded is sent again (the agent answers a repeated generation with
//! the outcome it reached), one already answered moves on.
use super::ServiceActor;
use crate::commit_site::CommitSite;
use crate::container::start::NotBuilt;
use crate::lifecycle::swap_steps::{self, Limits, Next, ReplicaSeen};
use crate::model::mount::mount_of_version;
use crate::protocol::model::{NodeNeeds, TasksLeft};
use crate::protocol::node::SendWeights;
use crate::protocol::service::SwapTick;
use crate::protocol::task::{Release, RunsModel};
use actix::prelude::*;
use caldera_spec::wire::{ServerMessage, SwapCommand};
use caldera_spec::{
    local_id, CopyState, EventKind, ModelRef, SwapPhase, SwapProgress, SwapStep, TaskState,
};
use std::collections::HashMap;
use std::time::Duration;

/// How often a swap under way is looked at (its reports are read from the
/// replicas' records; a SwapFailed also wakes it at once).
const TURN: Duration = Duration::from_millis(200);
/// A Swap command not answered within this is sent again (a node that
/// reconnected meanwhile lost it; the agent answers a repeat idempotently).
const RESEND_MS: u64 = 10_000;
/// Between a replica leaving the endpoints list and its Swap command: a
/// client that listed it just before still finishes its request on the old
/// process (the drain Kubernetes does before SIGTERM).
const DRAIN: Duration = Duration::from_millis(750);
/// The readiness wait without a probe's `ready_timeout_s` (its default).
const DEFAULT_READY_MS: u64 = 300_000;

/// What a service keeps in memory of its swap: never the truth (the record
/// is), only what saves repeating itself.
#[derive(Debug, Default)]
pub(crate) struct SwapLive {
    /// (replica, generation) -> when its Swap command was last sent.
    sent: HashMap<(String, u32), u64>,
    /// SwapFailed reports by replica: (generation, reason).
    pub(crate) failed: HashMap<String, (u32, String)>,
    /// A turn is armed already.
    armed: bool,
}

impl ServiceActor {
    /// Moves the swap under way on as far as it can go now, then arms the
    /// next turn while it is not over.
    pub(crate) fn drive_swap(&mut self, ctx: &mut Context<Self>) {
        self.swap_live.armed = false;
        // Each pass records at most one step; a handful covers a turn.
        for _ in 0..16 {
            let Some(swap) = self.rec.swap.clone() else {
                return;
            };
            if swap.phase.is_over() || self.rec.state.is_terminal() {
                return;
            }
            if swap.replicas.iter().any(|r| r.surge) {
                // Not in place: the surge replica decides (`swap_surge.rs`).
                self.drive_surge();
                break;
            }
            let seen = self.swap_seen(&swap);
            self.resend_swaps(&swap, &seen);
            let next = swap_steps::next(&swap, &seen, self.sh.now_ms(), self.swap_limits());
            if next == Next::Wait || !self.take_swap_step(ctx, swap, next) {
                break;
            }
        }
        if self.rec.swap.as_ref().is_some_and(|s| !s.phase.is_over()) && !self.swap_live.armed {
            self.swap_live.armed = true;
            ctx.notify_later(SwapTick, TURN);
        }
    }

    pub(super) fn swap_limits(&self) -> Limits {
        let ready_ms = super::swap_image::swap_ready_ms(
            &self.rec.spec,
            DEFAULT_READY_MS,
            self.sh.config.scheduling.preparing_timeout_ms,
        );
        Limits {
            warm_ms: self.sh.config.models.warming_timeout_ms,
            ready_ms,
        }
    }

    /// What each replica's record (and the target's copy on its node) says now.
    fn swap_seen(&self, swap: &SwapProgress) -> Vec<Option<ReplicaSeen>> {
        let store = self.sh.gate.store();
        let target = store.model_version(&swap.to.to_string()).ok().flatten();
        swap.replicas
            .iter()
            .map(|r| {
                let rec = store.task(&r.replica).ok().flatten()?;
                let same_allocation = rec
                    .allocation
                    .as_ref()
                    .is_some_and(|a| a.allocation_id == r.allocation_id);
                let verified =
                    target.as_ref().is_some_and(|t| {
                        t.nodes
                            .get(&r.node)
                            .is_some_and(|c| c.copy == CopyState::Verified)
                            || self.sh.fleet.get(&r.node).is_some_and(|c| {
                                c.holds(&t.spec.weights.sha256, t.owner.as_deref())
                            })
                    });
                Some(ReplicaSeen {
                    running: rec.state == TaskState::Running && same_allocation,
                    ready: rec.ready,
                    generation: rec.generation,
                    swap_failed: self.swap_live.failed.get(&r.replica).cloned(),
                    target_verified: verified,
                })
            })
            .collect()
    }

    /// Records `next` and acts on it; false when it could not be recorded
    /// (the actor is being rebuilt from sled and resumes from there).
    fn take_swap_step(
        &mut self,
        ctx: &mut Context<Self>,
        mut swap: SwapProgress,
        next: Next,
    ) -> bool {
        let now = self.sh.now_ms();
        let (msg, then): (String, Option<Then>) = match next {
            Next::Wait => return false,
            Next::Step {
                index,
                step,
                generation,
            } => {
                let on = match step {
                    SwapStep::Done => Some(swap.to.clone()),
                    SwapStep::RolledBack => Some(swap.from.clone()),
                    _ => None,
                };
                let runs = on.map(|m| {
                    let replica = &swap.replicas[index].replica;
                    (self.swap_image(&m), self.replica_digest(replica))
                });
                let r = &mut swap.replicas[index];
                r.step = step;
                r.generation = generation;
                r.since_ms = now;
                if let Some((image, digest)) = runs.filter(|(image, _)| image.is_some()) {
                    // What its container runs now, for the swap's record.
                    r.image = image;
                    r.image_digest = digest;
                }
                let name = local_id(&r.replica).to_string();
                let msg = step_message(&swap, index, &name);
                (msg, Some(Then::Replica(index)))
            }
            Next::Finish => {
                swap.phase = SwapPhase::Done;
                swap.finished_ms = Some(now);
                let msg = format!(
                    "swap {} -> {} done: {} replicas ready on {} in {:.1} s, same allocations",
                    swap.from,
                    swap.to,
                    swap.replicas.len(),
                    swap.to,
                    now.saturating_sub(swap.started_ms) as f64 / 1000.0
                );
                (msg, Some(Then::Left(swap.from.clone(), swap.to.clone())))
            }
            Next::RollBack { reason } => {
                swap.phase = SwapPhase::RollingBack;
                swap.reason = Some(reason.clone());
                let msg = format!(
                    "swap {} -> {} rolls back: {reason}; the replicas already swapped go back to {}",
                    swap.from, swap.to, swap.from
                );
                (msg, None)
            }
            Next::GiveUp { index, reason } => {
                let r = &mut swap.replicas[index];
                r.step = SwapStep::RolledBack;
                r.since_ms = now;
                (reason, Some(Then::Release(index)))
            }
            Next::RolledBack => {
                swap.phase = SwapPhase::RolledBack;
                swap.finished_ms = Some(now);
                let why = swap.reason.clone().unwrap_or_default();
                let msg = format!(
                    "swap {} -> {} rolled back ({why}); the service serves {}",
                    swap.from, swap.to, swap.from
                );
                (msg, Some(Then::Left(swap.to.clone(), swap.from.clone())))
            }
        };
        let mut planned = self.rec.clone();
        if swap.phase == SwapPhase::Done {
            serve_target(&mut planned, &swap.to, self.swap_image(&swap.to));
        }
        planned.swap = Some(swap.clone());
        let e = self.event_of(&planned, EventKind::ModelSwap, msg);
        if self
            .record(CommitSite::ServiceSwap, planned, vec![e])
            .is_err()
        {
            return false;
        }
        match then {
            Some(Then::Replica(i)) => self.act_on_step(ctx, &swap, i),
            Some(Then::Left(off, onto)) => self.tell_version_left(&swap, &off, &onto),
            Some(Then::Release(i)) => {
                // Still wanted by its slot: once it has ended, the service
                // replaces it (on the version its spec names now).
                let id = swap.replicas[i].replica.clone();
                if let Some(r) = self.sh.registry.task(&id) {
                    r.do_send(Release {
                        by: format!(
                            "swap rollback of {} (not back in time)",
                            local_id(self.id())
                        ),
                    });
                }
            }
            None => {}
        }
        true
    }

    /// What a replica's recorded step asks for: its node warms the target,
    /// or restarts it in place (forward or back).
    fn act_on_step(&mut self, ctx: &mut Context<Self>, swap: &SwapProgress, i: usize) {
        let r = &swap.replicas[i];
        let model = match r.step {
            SwapStep::Warming => {
                if let Some(m) = self.sh.registry.model(&swap.to.to_string()) {
                    m.do_send(NodeNeeds {
                        node: r.node.clone(),
                        task: Some(r.replica.clone()),
                    });
                }
                return;
            }
            SwapStep::Restarting => swap.to.clone(),
            SwapStep::RollingBack => swap.from.clone(),
            _ => return,
        };
        // Off the endpoints list first, then (after the drain) the restart.
        if let Some(rep) = self.sh.registry.task(&r.replica) {
            rep.do_send(RunsModel {
                model: model.to_string(),
                image: self.swap_image(&model),
            });
        }
        let key = (r.replica.clone(), r.generation);
        self.swap_live.sent.insert(key, self.sh.now_ms());
        let swap = swap.clone();
        ctx.run_later(DRAIN, move |act, _| act.send_swap(&swap, i, &model));
    }

    /// Sends again each Swap whose generation the replica does not report
    /// yet and that was not sent lately (never, in a rebuilt control plane).
    fn resend_swaps(&mut self, swap: &SwapProgress, seen: &[Option<ReplicaSeen>]) {
        let now = self.sh.now_ms();
        for (i, r) in swap.replicas.iter().enumerate() {
            let model = match r.step {
                SwapStep::Restarting => &swap.to,
                SwapStep::RollingBack => &swap.from,
                _ => continue,
            };
            let reported = seen
                .get(i)
                .and_then(|s| s.as_ref())
                .is_some_and(|s| s.generation == r.generation);
            let key = (r.replica.clone(), r.generation);
            let lately = self
                .swap_live
                .sent
                .get(&key)
                .is_some_and(|t| now.saturating_sub(*t) < RESEND_MS);
            if !reported && !lately {
                self.send_swap(swap, i, model);
            }
        }
    }

    /// The Swap command of replica `i` to `model`, under its recorded
    /// generation, to its node (same allocation, same GPUs).
    fn send_swap(&mut self, swap: &SwapProgress, i: usize, model: &ModelRef) {
        let r = &swap.replicas[i];
        self.swap_live
            .sent
            .insert((r.replica.clone(), r.generation), self.sh.now_ms());
        let Some(mount) = mount_of_version(self.sh.gate.store(), &model.to_string()) else {
            tracing::error!(model = %model, "swap: the version's record is unreadable");
            return;
        };
        let container = match self.swap_container(model) {
            Ok(c) => c,
            Err(NotBuilt::Refused(why)) => {
                // Refused the same on every try: the swap fails for it.
                let why = format!("its container could not be prepared: {why}");
                let failed = (r.generation, why);
                self.swap_live.failed.insert(r.replica.clone(), failed);
                return;
            }
            Err(NotBuilt::Unreadable(why)) => {
                tracing::warn!(replica = %r.replica, "swap: {why}; sent again later");
                return;
            }
        };
        let cmd = SwapCommand {
            allocation_id: r.allocation_id.clone(),
            task_id: r.replica.clone(),
            epoch: 0, // the NodeActor sends it under the node's current epoch
            generation: r.generation,
            model: mount,
            grace_ms: self.sh.config.nodes.stop_grace_ms,
            container,
        };
        match self.sh.registry.node(&r.node) {
            Some(n) => n.do_send(SendWeights(ServerMessage::Swap(cmd))),
            None => tracing::info!(node = %r.node, "swap: node not connected; sent again later"),
        }
    }

    /// The swap ended: the replicas no longer use `off` (they serve `onto`).
    pub(super) fn tell_version_left(&self, swap: &SwapProgress, off: &ModelRef, onto: &ModelRef) {
        let tasks = swap.replicas.iter().map(|r| r.replica.clone()).collect();
        let why = format!("service {} serves {onto}", local_id(self.id()));
        self.tell_tasks_left(&off.to_string(), tasks, why);
    }

    /// Tells the version `key` (`name:version`) that `tasks` no longer use
    /// it; a retiring one looks at its users again at once.
    pub(crate) fn tell_tasks_left(&self, key: &str, tasks: Vec<String>, why: String) {
        if let Some(m) = self.sh.registry.model(key) {
            m.do_send(TasksLeft { tasks, why });
        }
    }
}

/// A done swap's service record: new replicas (a replacement, a scale-out)
/// start on `to` from now, and the record serves it too (it started as the
/// spec's model, and a retire counts what a record serves). Both the in-place
/// and the surge swap end here.
pub(super) fn serve_target(
    planned: &mut caldera_spec::TaskRecord,
    to: &ModelRef,
    image: Option<String>,
) {
    planned.spec.model = Some(to.to_string());
    planned.serving_model = Some(to.to_string());
    if let Some(image) = image {
        // New replicas start in the image the swapped ones run.
        planned.spec.image = Some(image);
    }
}

/// ", image I (sha256:...)" for a replica whose container's image is
/// known, else nothing.
fn runs_image(r: &caldera_spec::SwapReplica) -> String {
    match (&r.image, &r.image_digest) {
        (Some(image), Some(digest)) => format!(", image {image} ({digest})"),
        (Some(image), None) => format!(", image {image}"),
        _ => String::new(),
    }
}

/// What follows a recorded swap step.
enum Then {
    Replica(usize),
    /// The replicas left the first version for the second.
    Left(ModelRef, ModelRef),
    Release(usize),
}

/// The event text of replica `i` entering its recorded step.
fn step_message(swap: &SwapProgress, i: usize, name: &str) -> String {
    let r = &swap.replicas[i];
    let n = swap.replicas.len();
    match r.step {
        SwapStep::Warming => format!(
            "swap replica {name} ({}/{n}): warming {} on node {} while {} serves",
            i + 1,
            swap.to,
            r.node,
            swap.from
        ),
        SwapStep::Restarting => format!(
            "swap replica {name}: restarting in place on {} (generation {}, allocation {})",
            swap.to,
            r.generation,
            local_id(&r.allocation_id)
        ),
        SwapStep::WaitingReady => format!(
            "swap replica {name}: runs {} (generation {}), waiting for its readiness",
            swap.to, r.generation
        ),
        SwapStep::Done => format!(
            "replica {name} swapped to {}: ready (generation {}), same allocation {}{}",
            swap.to,
            r.generation,
            local_id(&r.allocation_id),
            runs_image(r)
        ),
        SwapStep::RollingBack => format!(
            "swap replica {name}: rolling back to {} (generation {})",
            swap.from, r.generation
        ),
        SwapStep::RolledBack => {
            format!("replica {name} serves {} again{}", swap.from, runs_image(r))
        }
        SwapStep::Pending => format!("swap replica {name}: back to pending on {}", swap.from),
    }
}
