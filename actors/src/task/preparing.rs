//! A container task's Preparing stage on the control plane's side: its
//! pull reports, recorded at most about once a second, and the stage's
//! timeout, the task's own `prepare_timeout` when it sets one.
//!
//! The timer starts when the start is sent, and starts again when the
//! node's pull begins (its first report): a start may wait at the control
//! plane or the node for its turn to pull (`max-image-pulls`), and the pull
//! itself has the whole prepare timeout on the node, as the node counts it.
use super::TaskActor;
use crate::lifecycle::Input;
use actix::prelude::*;
use caldera_spec::container::RuntimeKind;
use caldera_spec::wire::WorkloadEventKind;
use std::time::{Duration, Instant};

/// Pull progress of one preparing task: at most one record per this long
/// (the first, and the one that completes the layers, always).
const PROGRESS_EVERY_MS: u64 = 1000;

/// How long past a container task's prepare timeout the control plane
/// waits before failing it by its own timer: the node's pull has the same
/// deadline and its failure says more (podman's own reason, the code of
/// what went wrong), so it is given the time to arrive first.
const NODE_VERDICT_GRACE: Duration = Duration::from_secs(2);

/// The Preparing stage's bookkeeping (memory only: a rebuilt actor starts
/// the stage's timer afresh).
#[derive(Debug, Default)]
pub(crate) struct PreparingNote {
    /// When a pull report was last recorded (clock ms; 0: none this attempt).
    pub recorded_ms: u64,
    /// When the armed timer fails the task; a timer that fires earlier (it
    /// was armed again since) does nothing.
    pub until: Option<Instant>,
}

impl TaskActor {
    /// Whether a `Pulling` report goes on to the lifecycle; every other
    /// event does. The first report of an attempt starts the timer again.
    pub(crate) fn pull_due(&mut self, ctx: &mut Context<Self>, kind: &WorkloadEventKind) -> bool {
        let WorkloadEventKind::Pulling(p) = kind else {
            return true;
        };
        let now = self.sh.now_ms();
        let first = self.preparing.recorded_ms == 0;
        let complete = p.layers_total > 0 && p.layers_done >= p.layers_total;
        let due = first
            || complete
            || now.saturating_sub(self.preparing.recorded_ms) >= PROGRESS_EVERY_MS;
        if due {
            self.preparing.recorded_ms = now.max(1);
        }
        if first {
            self.arm_preparing_timeout(ctx);
        }
        due
    }

    /// Arms the Preparing timeout of this attempt (at dispatch, and again
    /// when its pull begins); the latest arming is the one that counts.
    pub(crate) fn arm_preparing_timeout(&mut self, ctx: &mut Context<Self>) {
        let attempt = self.rec.attempts;
        let (stated, waited) = self.preparing_timeout();
        self.preparing.until = Some(Instant::now() + waited);
        ctx.run_later(waited, move |act, ctx| {
            if act.preparing.until.is_some_and(|u| Instant::now() < u) {
                return; // armed again since: that timer decides
            }
            let input = Input::PreparingTimeout {
                attempt,
                after_secs: stated.as_secs(),
            };
            act.react(ctx, input, None);
        });
    }

    /// A new attempt was dispatched: its first pull report starts the
    /// timer again.
    pub(crate) fn reset_preparing(&mut self) {
        self.preparing = PreparingNote::default();
    }

    /// The Preparing timeout of this task, as stated and as waited: its own
    /// `prepare_timeout` when it sets one, else the server's
    /// `preparing-timeout-ms`; a container task's is waited with the grace
    /// for its node's verdict.
    fn preparing_timeout(&self) -> (Duration, Duration) {
        let spec = &self.rec.spec;
        let stated = Duration::from_millis(
            spec.prepare_timeout_ms()
                .unwrap_or(self.sh.config.scheduling.preparing_timeout_ms),
        );
        let container = spec.image.is_some() && spec.runtime_kind() == RuntimeKind::Container;
        match container {
            true => (stated, stated + NODE_VERDICT_GRACE),
            false => (stated, stated),
        }
    }
}
