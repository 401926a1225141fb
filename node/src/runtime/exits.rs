//! How workloads end as the control plane hears it: a shim's recorded exit
//! (or, for a shim that died without one, what the agent kills and records),
//! the `Exited` event, the hellos and digests that repeat it, and the
//! welcome that lets it go. See the runtime's module doc for the rules.
use super::{now_ms, shim_link, Runtime, FINISHED_MEMORY};
use crate::procfs;
use crate::shim::files::{reason, ExitRecord, PidRecord};
use caldera_spec::wire::{ExitStatus, WorkloadEvent, WorkloadEventKind};
use std::time::Duration;

impl Runtime {
    /// The workload's shim is done: read its exit (or, if the shim died
    /// without one, kill what is left and record that), clean its cgroup,
    /// report.
    pub(super) fn finish(&mut self, allocation_id: &str) {
        if self.swap_takes_exit(allocation_id) {
            return;
        }
        let Some(w) = self.workloads.get_mut(allocation_id) else {
            return;
        };
        let record = shim_link::read_exit(&w.shim_dir).unwrap_or_else(|| {
            tracing::warn!(
                "the shim of allocation {allocation_id} ended without recording an exit"
            );
            let pid: Option<PidRecord> =
                crate::shim::files::read_json(&w.shim_dir.join(crate::shim::files::WORKLOAD_PID))
                    .ok();
            if let Some(p) = pid.filter(PidRecord::alive) {
                crate::shim::signal_group(p.pid, libc::SIGKILL);
            }
            if let Some(shim) = &w.shim {
                kill_session_of(shim);
            }
            // Its container outlives the client the session held.
            if let Some(c) = &w.container {
                if let Err(e) = crate::container::podman::remove(&c.podman, &c.name) {
                    tracing::error!("allocation {allocation_id}: {e}");
                }
            }
            let record = agent_exit(Some(libc::SIGKILL), reason::SHIM_LOST);
            shim_link::record_exit(&w.shim_dir, &record);
            record
        });
        self.isolation.reap(allocation_id);
        // Its container is gone: nothing holds the scratch filesystem now.
        self.scratch.release(allocation_id);
        w.stop_probe();
        if record.reason == reason::LEASE_EXPIRED {
            tracing::warn!(
                "allocation {allocation_id}: its lease ran out, so its shim stopped it; \
                 left out of reports (the control plane requeues it if it still owns it)"
            );
            w.lease_expired = true;
            w.exit = Some(lease_expired_status(&record));
            let task = w.task_id.clone();
            self.remember_finished(allocation_id, &task);
            return;
        }
        let status = record.status();
        tracing::info!(
            "allocation {allocation_id} exited ({}{}): {status:?}",
            record.reason,
            if record.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", record.detail)
            }
        );
        w.exit = Some(status.clone());
        let (task, epoch) = (w.task_id.clone(), w.epoch);
        // A job stopped for preemption typically saves on SIGTERM: report it before the exit.
        if let Some(path) = w.checkpoint.poll() {
            let path = path.to_string_lossy().into_owned();
            self.event(
                allocation_id,
                &task,
                epoch,
                WorkloadEventKind::CheckpointSaved { path },
            );
        }
        self.report_exit(allocation_id, &task, epoch, status);
    }

    /// Remembers the allocation as finished and reports its exit.
    pub(super) fn report_exit(
        &mut self,
        allocation_id: &str,
        task: &str,
        epoch: u64,
        status: ExitStatus,
    ) {
        self.remember_finished(allocation_id, task);
        self.event(
            allocation_id,
            task,
            epoch,
            WorkloadEventKind::Exited(status),
        );
    }

    pub(super) fn remember_finished(&mut self, allocation_id: &str, task_id: &str) {
        if self.finished.len() >= FINISHED_MEMORY {
            if let Some((old, _)) = self.finished.pop_front() {
                if self.workloads.get(&old).is_some_and(|w| !w.is_alive()) {
                    self.workloads.remove(&old);
                }
                if !self.workloads.contains_key(&old) {
                    shim_link::remove(&shim_link::dir_of(&self.data_dir, &old));
                }
            }
        }
        self.finished
            .push_back((allocation_id.to_string(), task_id.to_string()));
    }

    /// Takes the queued events for sending. An exit handed out stays in
    /// memory (and on disk): nothing tells the agent the control plane acted
    /// on it within a session, so every hello and digest still reports it
    /// and a `Stop` for it is answered with it, until a welcome shows the
    /// control plane no longer owns the allocation (or it ages out of
    /// [`FINISHED_MEMORY`]; its dir then goes too).
    pub fn take_events(&mut self) -> Vec<WorkloadEvent> {
        self.outbox.drain(..).collect()
    }

    /// Applies a welcome: workloads of the hello in `keep` are adopted under
    /// `epoch`; the other live ones are stopped at once (no longer ours).
    /// An exited one the control plane no longer owns is forgotten, its dir
    /// removed (its exit was acted on); one it still owns is kept, as the
    /// welcome forwards its exit to a task that may yet fail to record it.
    /// Returns how many live workloads were killed.
    pub fn apply_welcome(&mut self, epoch: u64, keep: &[String], reported: &[String]) -> usize {
        let mut to_kill = Vec::new();
        let mut expired_meanwhile = Vec::new();
        for id in reported {
            let Some(w) = self.workloads.get_mut(id) else {
                continue;
            };
            if w.lease_expired && keep.contains(id) {
                // Reported running, kept, and stopped by its lease since: say it ended.
                let exit = w
                    .exit
                    .clone()
                    .unwrap_or(ExitStatus::STOPPED_WITHOUT_PROCESS);
                let exit = ExitStatus {
                    stopped: false,
                    ..exit
                };
                expired_meanwhile.push((id.clone(), w.task_id.clone(), exit));
                w.lease_expired = false;
            } else if !w.is_alive() {
                if !keep.contains(id) {
                    shim_link::remove(&w.shim_dir);
                    self.workloads.remove(id);
                }
            } else if keep.contains(id) {
                w.epoch = epoch;
            } else {
                to_kill.push(id.clone());
            }
        }
        // Lease-expired ones the hello left out: the control plane has decided.
        let left_out: Vec<String> = self
            .workloads
            .values()
            .filter(|w| w.lease_expired)
            .map(|w| w.allocation_id.clone())
            .collect();
        for id in left_out {
            if let Some(w) = self.workloads.remove(&id) {
                shim_link::remove(&w.shim_dir);
            }
        }
        for (id, task, exit) in expired_meanwhile {
            self.event(&id, &task, epoch, WorkloadEventKind::Exited(exit));
        }
        for e in self.outbox.iter_mut() {
            if keep.contains(&e.allocation_id) {
                e.epoch = epoch;
            }
        }
        let killed = to_kill.len();
        for id in to_kill {
            tracing::warn!("control plane says allocation {id} is no longer ours: killing it");
            self.stop(&id, Duration::ZERO, epoch);
        }
        killed
    }
}

/// SIGKILLs what is left in a dead shim's session: its workload (also one
/// whose pid was never recorded) and the workload's children. Processes
/// older than the shim are not of it (session ids are pids, and pids are reused).
fn kill_session_of(shim: &PidRecord) {
    if shim.pid <= 1 || shim.boot_id != procfs::boot_id() {
        return;
    }
    for p in procfs::all()
        .iter()
        .filter(|p| p.session == shim.pid && p.start_ticks >= shim.start_ticks)
    {
        // SAFETY: kill(2) on a pid just read from /proc; no memory is touched.
        unsafe {
            libc::kill(p.pid as i32, libc::SIGKILL);
        }
    }
}

/// What a lease-expired workload answers a `Stop` with: stopped, and never a
/// code (a code 0 would finish the task).
pub(super) fn lease_expired_status(record: &ExitRecord) -> ExitStatus {
    ExitStatus {
        code: None,
        signal: record.signal.or(Some(libc::SIGTERM)),
        stopped: true,
        oom_killed: false,
    }
}

/// An exit the agent records itself (no shim, or a lost one).
pub(super) fn agent_exit(signal: Option<i32>, why: &str) -> ExitRecord {
    ExitRecord {
        code: None,
        signal,
        reason: why.to_string(),
        detail: String::new(),
        at_ms: now_ms(),
    }
}
