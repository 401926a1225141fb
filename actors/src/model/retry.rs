//! A node's failed read of a version: re-sourced at once, backed off, or
//! given up (the schedule is [`super::backoff`]), and never retried for a
//! node where nothing needs the version any more. Only the first failure,
//! the start of the backoff, the give-up and the stop are events: a read
//! failing for hours writes a handful, not one per try.
use super::backoff::{self, AfterFailure, RetryPolicy};
use super::warmup::Plan;
use super::ModelVersionActor;
use crate::commit_site::CommitSite;
use actix::prelude::*;
use caldera_spec::{CopyState, EventKind, ModelState};
use std::time::Duration;

impl ModelVersionActor {
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            first: Duration::from_millis(self.sh.config.models.warm_retry_first_ms),
            max: Duration::from_millis(self.sh.config.models.warm_retry_max_ms),
            attempts: self.sh.config.models.warm_retry_attempts,
        }
    }

    /// Whether anything still wants a copy on `node`: not once the version
    /// is retired; else a prewarm that asked for it, or a task that used the
    /// version, has not ended and holds an allocation there (a replica being
    /// swapped to it included). Reads only the records of the version's own
    /// tasks.
    pub(super) fn needed_on(&self, node: &str) -> bool {
        if self.rec.state == ModelState::Retired {
            return false;
        }
        if self.rec.nodes.get(node).is_some_and(|c| c.prewarm) {
            return true;
        }
        let store = self.sh.gate.store();
        self.rec.tasks.iter().any(|key| {
            store.task(key).ok().flatten().is_some_and(|t| {
                !t.state.is_terminal() && t.allocation.as_ref().is_some_and(|a| a.node == node)
            })
        })
    }

    /// `node`'s read from `source` failed at `bytes_done` bytes: plans what
    /// follows into `plan` (its copy was `warming`).
    pub(super) fn read_failed(
        &self,
        plan: &mut Plan,
        node: &str,
        source: &str,
        bytes_done: u64,
        reason: &str,
    ) {
        let model = self.key();
        let Some(mut copy) = plan.rec.nodes.get(node).cloned() else {
            return;
        };
        let began = self.read_began.get(node).copied().unwrap_or(bytes_done);
        let failures = backoff::failures_in_a_row(copy.failures, began, bytes_done);
        let why = format!("{source}: {reason}");
        if !self.needed_on(node) {
            plan.rec.nodes.remove(node);
            let msg = format!(
                "node {node}'s read of {model} from {source} failed ({reason}); nothing needs it there any more: no more reads"
            );
            plan.events
                .push(self.event(Some(node), EventKind::ModelWarmup, msg));
            return;
        }
        copy.bytes_done = bytes_done;
        copy.failures = failures;
        copy.reason = why;
        copy.retry_at_ms = None;
        let policy = self.retry_policy();
        match policy.after(failures) {
            AfterFailure::Now => {
                plan.rec.nodes.insert(node.to_string(), copy);
                let msg = format!(
                    "node {node}'s read of {model} from {source} failed at {bytes_done} bytes ({reason}); another source"
                );
                plan.events
                    .push(self.event(Some(node), EventKind::ModelWarmup, msg));
                self.serve(plan, node, Some(source));
            }
            AfterFailure::After(wait) => {
                copy.copy = CopyState::Retrying;
                copy.source = String::new();
                copy.retry_at_ms = Some(self.sh.now_ms() + wait.as_millis() as u64);
                plan.rec.nodes.insert(node.to_string(), copy);
                // The backoff's start is the event; the tries after it only
                // move the record's next retry.
                if failures == 2 {
                    let msg = format!(
                        "node {node}'s read of {model} from {source} failed again ({reason}); next read in {} s, waits doubling up to {} s, {} failed reads in a row at most",
                        wait.as_secs_f64(),
                        policy.max.as_secs_f64(),
                        policy.attempts
                    );
                    plan.events
                        .push(self.event(Some(node), EventKind::ModelWarmup, msg));
                }
            }
            AfterFailure::GiveUp => {
                copy.copy = CopyState::Failed;
                copy.source = String::new();
                plan.rec.nodes.insert(node.to_string(), copy);
                let msg = format!(
                    "node {node} gave up reading {model} after {failures} failed reads in a row (last: {source}: {reason}); it reads again when a new task needs it there or a prewarm asks"
                );
                plan.events
                    .push(self.event(Some(node), EventKind::ModelWarmup, msg));
            }
        }
    }

    /// A copy asked for anew (a new task, a prewarm): its failures are
    /// forgotten, and a backoff or a give-up no longer holds it back.
    pub(super) fn forget_failures(plan: &mut Plan, node: &str) {
        if let Some(c) = plan.rec.nodes.get_mut(node) {
            c.failures = 0;
            c.reason.clear();
            c.retry_at_ms = None;
        }
    }

    /// Schedules the next due retry (one timer for the whole version).
    pub(super) fn arm_retries(&mut self, ctx: &mut Context<Self>) {
        if let Some(h) = self.retry_timer.take() {
            ctx.cancel_future(h);
        }
        let next = self
            .rec
            .nodes
            .values()
            .filter(|c| c.copy == CopyState::Retrying)
            .filter_map(|c| c.retry_at_ms)
            .min();
        let Some(at) = next else {
            return;
        };
        let wait = Duration::from_millis(at.saturating_sub(self.sh.now_ms()));
        let h = ctx.run_later(wait, |act, ctx| {
            act.retry_timer = None;
            act.retry_due(ctx);
        });
        self.retry_timer = Some(h);
    }

    /// Every copy whose backoff has passed is read again where it is still
    /// needed, and dropped (with one event) where it is not.
    fn retry_due(&mut self, ctx: &mut Context<Self>) {
        let now = self.sh.now_ms();
        let due: Vec<String> = self
            .rec
            .nodes
            .iter()
            .filter(|(_, c)| c.copy == CopyState::Retrying)
            .filter(|(_, c)| c.retry_at_ms.is_none_or(|at| at <= now))
            .map(|(n, _)| n.clone())
            .collect();
        let mut plan = self.plan();
        for node in due {
            if !self.needed_on(&node) {
                let reason = plan
                    .rec
                    .nodes
                    .remove(&node)
                    .map(|c| c.reason)
                    .unwrap_or_default();
                let msg = format!(
                    "nothing needs {} on node {node} any more: no more reads (last failure: {reason})",
                    self.key()
                );
                plan.events
                    .push(self.event(Some(&node), EventKind::ModelWarmup, msg));
                continue;
            }
            if let Some(c) = plan.rec.nodes.get_mut(&node) {
                c.retry_at_ms = None;
            }
            self.serve(&mut plan, &node, None);
        }
        self.carry_out(ctx, CommitSite::ModelWarmup, plan);
        self.arm_retries(ctx);
    }
}
