//! A restarted agent adopts what its earlier life left in `<data-dir>/shims/`:
//! a live shim keeps its workload (same pid, same log, no restart), a held
//! reservation stays held, and an exit recorded meanwhile is reported. The
//! hello reports them all; the welcome's keep/kill lists then decide.
use super::checkpoint::CheckpointWatch;
use super::{shim_link, Runtime, Workload};
use std::time::Duration;

/// How long adoption waits for a shim dir without a shim pid (a start the
/// earlier agent did not see through).
const SHIM_PID_WAIT: Duration = Duration::from_secs(2);

/// What [`Runtime::adopt_shims`] found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    /// Shims still running their workload.
    pub running: usize,
    /// Reservations still held.
    pub held: usize,
    /// Workloads that ended meanwhile (their exit is reported).
    pub exited: usize,
    /// Shims that died without recording an exit (what was left is killed).
    pub lost: usize,
}

impl Runtime {
    /// Adopts every shim dir an earlier agent left (see the module doc).
    pub fn adopt_shims(&mut self) -> Adopted {
        let mut counts = Adopted::default();
        let scanned = super::container_swap::one_per_allocation(shim_link::scan(&self.data_dir));
        for found in scanned {
            let spec = &found.spec;
            let id = spec.allocation_id.clone();
            let mut w = Workload::bare(&id, &spec.task_id, spec.epoch, spec.log.clone());
            w.run = self.next_run;
            self.next_run += 1;
            w.gpu_indices = spec.gpu_indices.clone();
            w.gpu_memory_mb = spec.gpu_memory_mb;
            w.checkpoint = CheckpointWatch::new(spec.checkpoint_dir.clone());
            w.model_sha256 = spec.model_sha256.clone();
            w.port = spec.port;
            w.readiness = spec.readiness.clone();
            w.uid = spec.uid;
            w.generation = spec.generation;
            w.model = spec.model.clone();
            w.pid = found.workload.as_ref().map(|r| r.pid);
            w.container = spec.container.clone();
            w.memory_cgroup = spec.memory_cgroup.clone();
            w.shim = found.shim.clone();
            if w.shim.is_none() && found.exit.is_none() && !spec.argv.is_empty() {
                // The earlier agent died right after starting it: give the
                // shim a moment to say it runs before calling it lost.
                w.shim = shim_link::await_shim_pid(&found.dir, SHIM_PID_WAIT);
            }
            w.shim_dir = found.dir.clone();
            let reservation = spec.argv.is_empty();
            w.reservation = reservation;
            let lost = !reservation && !w.shim.as_ref().is_some_and(|s| s.alive());
            if let Some(exit) = &found.exit {
                w.exit = Some(exit.status());
                self.remember_finished(&id, &spec.task_id);
                counts.exited += 1;
                if exit.reason == crate::shim::files::reason::LEASE_EXPIRED {
                    // Not reported: see the runtime's module doc.
                    w.lease_expired = true;
                    w.exit = Some(super::exits::lease_expired_status(exit));
                }
            } else if reservation {
                counts.held += 1;
            } else if lost {
                counts.lost += 1;
            } else {
                counts.running += 1;
                // Probed again: the welcome's epoch stamps what it reports.
                if let Some(ready) = w.watch_readiness(&self.notes) {
                    let (task, epoch) = (w.task_id.clone(), w.epoch);
                    self.event(&id, &task, epoch, ready);
                }
            }
            self.workloads.insert(id.clone(), w);
            if found.exit.is_none() && lost {
                self.finish(&id);
            }
        }
        self.hold_ports();
        if counts != Adopted::default() {
            tracing::info!(
                "adopted from {}: {} running, {} held reservation(s), {} exited meanwhile, {} shim(s) lost",
                shim_link::root(&self.data_dir).display(),
                counts.running,
                counts.held,
                counts.exited,
                counts.lost
            );
        }
        counts
    }
}
