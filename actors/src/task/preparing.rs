//! A container task's Preparing stage on the control plane's side: its
//! pull reports, recorded at most about once a second, and the stage's
//! timeout, the task's own `prepare_timeout` when it sets one.
use super::TaskActor;
use caldera_spec::wire::WorkloadEventKind;
use std::time::Duration;

/// Pull progress of one preparing task: at most one record per this long
/// (the first, and the one that completes the layers, always).
const PROGRESS_EVERY_MS: u64 = 1000;

/// How long past a container task's prepare timeout the control plane
/// waits before failing it by its own timer: the node's pull has the same
/// deadline and its failure says more (podman's own reason, the code of
/// what went wrong), so it is given the time to arrive first.
const NODE_VERDICT_GRACE: Duration = Duration::from_secs(2);

impl TaskActor {
    /// Whether a `Pulling` report goes on to the lifecycle; every other
    /// event does.
    pub(crate) fn pull_due(&mut self, kind: &WorkloadEventKind) -> bool {
        let WorkloadEventKind::Pulling(p) = kind else {
            return true;
        };
        let now = self.sh.now_ms();
        let complete = p.layers_total > 0 && p.layers_done >= p.layers_total;
        let due = self.pull_recorded_ms == 0
            || complete
            || now.saturating_sub(self.pull_recorded_ms) >= PROGRESS_EVERY_MS;
        if due {
            self.pull_recorded_ms = now.max(1);
        }
        due
    }

    /// The Preparing timeout of this task, as stated and as waited: its own
    /// `prepare_timeout` when it sets one (waited with the grace for its
    /// node's verdict), else the server's `preparing-timeout-ms`.
    pub(crate) fn preparing_timeout(&self) -> (Duration, Duration) {
        match self.rec.spec.prepare_timeout_ms() {
            Some(ms) => {
                let own = Duration::from_millis(ms);
                (own, own + NODE_VERDICT_GRACE)
            }
            None => {
                let server = Duration::from_millis(self.sh.config.preparing_timeout_ms);
                (server, server)
            }
        }
    }
}
