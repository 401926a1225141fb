//! Node agents of `caldera up` as supervised child processes.
//!
//! Each agent is a real `caldera node` process (the same binary), so the
//! embedded default exercises exactly what a multi-machine cluster runs. An
//! agent that exits on its own is restarted with exponential backoff; on
//! shutdown it gets SIGUSR1 (a drain as the whole cluster stops: every agent
//! stops at once, so none waits to move work to another), time to stop its
//! workloads, and SIGKILL only if it overstays.
use super::profiles::AgentPlan;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// First restart delay; doubled after each quick failure.
const FIRST_DELAY: Duration = Duration::from_millis(500);
/// Longest restart delay.
const MAX_DELAY: Duration = Duration::from_secs(30);
/// An agent that ran this long before exiting was healthy: restart it quickly.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// Time an agent gets after SIGUSR1 before SIGKILL: longer than its drain
/// timeout (15 s, itself longer than the workload stop grace of 10 s) plus its
/// shutdown grace (2 s), so the node is drained and its workloads stopped by
/// the agent itself.
const STOP_GRACE: Duration = Duration::from_secs(25);

/// Restart delays: 0.5 s, 1 s, 2 s, ... up to 30 s.
#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST_DELAY }
    }
}

impl Backoff {
    /// The delay to wait now; the following one is twice as long (capped).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX_DELAY);
        delay
    }

    /// Back to the first delay (after a healthy run).
    pub fn reset(&mut self) {
        self.next = FIRST_DELAY;
    }
}

/// Runs one agent until `stop` turns true (or its sender is dropped),
/// restarting it whenever it exits unexpectedly. Its output goes to
/// `log_path` (appended) so the terminal shows the control plane's lines and
/// the tokens, not two agents' heartbeats.
pub async fn supervise(
    exe: PathBuf,
    plan: AgentPlan,
    log_path: PathBuf,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = Backoff::default();
    loop {
        if *stop.borrow() {
            return;
        }
        let started = Instant::now();
        match spawn(&exe, &plan, &log_path) {
            Err(e) => tracing::error!(agent = %plan.name, "cannot start the node agent: {e}"),
            Ok(mut child) => {
                tracing::info!(agent = %plan.name, pid = child.id(), log = %log_path.display(), "node agent started");
                tokio::select! {
                    status = child.wait() => {
                        if *stop.borrow() {
                            return;
                        }
                        if started.elapsed() >= HEALTHY_RUN {
                            backoff.reset();
                        }
                        let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                        tracing::warn!(agent = %plan.name, %status, log = %log_path.display(), "node agent exited unexpectedly; restarting it");
                    }
                    _ = stop.changed() => {
                        terminate(&plan.name, child).await;
                        return;
                    }
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff.next_delay()) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Starts the agent in its own process group, so a Ctrl-C in the terminal
/// reaches only `caldera up`, which then stops the agents in order.
fn spawn(exe: &Path, plan: &AgentPlan, log_path: &Path) -> std::io::Result<Child> {
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)?;
    let mut command = Command::new(exe);
    command
        .args(&plan.args)
        .env("CALDERA_JOIN_TOKEN", &plan.join_token)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    // SAFETY: the closure runs between fork and exec and only calls prctl,
    // which is async-signal-safe and touches no memory of the parent. It makes
    // the kernel send SIGTERM to the agent if `caldera up` dies without
    // cleaning up (e.g. kill -9), so no orphaned agents keep running.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    command.spawn()
}

/// SIGUSR1, wait up to [`STOP_GRACE`], then SIGKILL. SIGUSR1, not SIGTERM:
/// `up` stops every agent at once, so each is told the whole cluster is
/// stopping, and its node's work (service replicas included) is stopped
/// where it is rather than waiting to be moved to a node that stops too.
async fn terminate(name: &str, mut child: Child) {
    if let Some(pid) = child.id().and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: kill(2) has no memory-safety preconditions; `pid` is our
        // own child that has not been reaped yet, so it cannot be reused.
        unsafe {
            libc::kill(pid, libc::SIGUSR1);
        }
    }
    match tokio::time::timeout(STOP_GRACE, child.wait()).await {
        Ok(Ok(status)) => tracing::info!(agent = %name, %status, "node agent stopped"),
        Ok(Err(e)) => tracing::warn!(agent = %name, "waiting for the node agent: {e}"),
        Err(_) => {
            tracing::warn!(agent = %name, "node agent did not stop within {}s; killing it", STOP_GRACE.as_secs());
            if let Err(e) = child.kill().await {
                tracing::warn!(agent = %name, "killing the node agent: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..9).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(
            delays,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(500));
    }
}
