//! One allocation's workload as the runtime tracks it.
use super::checkpoint::CheckpointWatch;
use crate::shim::files::PidRecord;
use caldera_spec::wire::{AllocationUse, ExitStatus, StartCommand, WorkloadReport};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A workload: running, held (a reservation), or exited and not yet reported.
#[derive(Debug)]
pub struct Workload {
    pub allocation_id: String,
    pub task_id: String,
    /// Epoch it runs under (bumped when a welcome adopts it).
    pub epoch: u64,
    /// Leader pid = process group id; None for a reservation.
    pub pid: Option<u32>,
    /// A reservation: room held, no command, so no process ever runs.
    pub reservation: bool,
    /// Its shim's dir (a reservation's too: it records the hold).
    pub shim_dir: PathBuf,
    /// The shim, where one runs: its pid record, and whether it is this
    /// agent's child (then its end comes as a note; an adopted one is polled).
    pub shim: Option<PidRecord>,
    pub shim_is_child: bool,
    pub gpu_indices: Vec<u32>,
    pub gpu_memory_mb: u64,
    /// Set once it has ended.
    pub exit: Option<ExitStatus>,
    /// A stop (from the control plane or shutdown) was requested.
    pub stop_requested: bool,
    /// Its shim stopped it because the lease ran out: not reported as an
    /// exit (see `Runtime::finish`).
    pub lease_expired: bool,
    /// Distinguishes this run's notes from an older run's.
    pub run: u64,
    pub checkpoint: CheckpointWatch,
    pub log_path: PathBuf,
    pub usage: AllocationUse,
    /// CPU ticks of the tree at the last sample, and when.
    pub last_cpu: Option<(u64, Instant)>,
    /// The sha256 of the model version it reads, if any.
    pub model_sha256: Option<String>,
    /// Its start, while it waits for its model's verified copy (warming):
    /// no shim and no process yet.
    pub warming: Option<Box<StartCommand>>,
    /// Its port on the node (CALDERA_PORT), held while the record lives.
    pub port: Option<u16>,
    /// How it is probed for readiness (None: ready once started).
    pub readiness: Option<caldera_spec::ReadinessProbe>,
    /// The uid it runs as (a command probe runs as it too).
    pub uid: Option<u32>,
    /// The running probe, stopped when the workload ends.
    pub probe: Option<tokio::task::AbortHandle>,
    /// Generation of the process now running: 0 for the first start.
    pub generation: u32,
    /// Readiness as last reported (None: not yet), for hellos and digests.
    pub ready: Option<bool>,
    /// The `name:version` its process serves (None: it names no model).
    pub model: Option<String>,
    /// An in-place swap under way (see `runtime::swap`).
    pub swap: Option<super::swap_state::PendingSwap>,
    /// New containers of swaps that ended without them, until their
    /// shims end (see `runtime::container_swap`).
    pub swap_leftovers: Vec<super::swap_state::Candidate>,
    /// Its start, while its image is pulled: no shim and no process yet.
    pub pulling: Option<Box<super::containers::Pulling>>,
    /// It runs in this container (its pid is the container's pid 1 on the host).
    pub container: Option<crate::shim::files::ContainerShim>,
    /// Its memory cgroup (a container's processes are found under it).
    pub memory_cgroup: Option<PathBuf>,
    /// Its shim runs and has not yet said the workload started (a
    /// container takes a moment to come up): reported as not started.
    pub starting: bool,
}

impl Workload {
    /// A workload about to run `cmd` (no process yet).
    pub fn new(cmd: &StartCommand, run: u64, checkpoint_dir: &Path, log_path: PathBuf) -> Self {
        let mut w = Self::bare(&cmd.allocation_id, &cmd.task_id, cmd.epoch, log_path);
        w.run = run;
        w.gpu_indices = cmd.gpu_indices.clone();
        w.gpu_memory_mb = cmd.gpu_memory_mb;
        w.checkpoint = CheckpointWatch::new(checkpoint_dir.to_path_buf());
        w.model_sha256 = cmd.model.as_ref().map(|m| m.sha256.clone());
        w.readiness = cmd.readiness.clone();
        w.model = cmd.model.as_ref().map(super::launch::model_label);
        w.reservation = cmd.is_reservation();
        w
    }

    /// Starts probing its readiness (its process runs), or, without a
    /// probe, answers that it is ready now: the event to send, if any.
    pub fn watch_readiness(
        &mut self,
        notes: &tokio::sync::mpsc::UnboundedSender<super::Note>,
    ) -> Option<caldera_spec::wire::WorkloadEventKind> {
        self.stop_probe();
        self.ready = None;
        let Some(probe) = self.readiness.clone() else {
            self.ready = Some(true);
            return Some(caldera_spec::wire::WorkloadEventKind::Readiness {
                ready: true,
                generation: self.generation,
                detail: "no readiness probe: ready once started".into(),
            });
        };
        let target = super::readiness::Target {
            allocation_id: self.allocation_id.clone(),
            run: self.run,
            generation: self.generation,
            port: self.port,
            uid: self.uid,
        };
        let container = self
            .container
            .as_ref()
            .map(|c| super::readiness::InContainer {
                podman: c.podman.clone(),
                name: c.name.clone(),
            });
        self.probe = super::readiness::watch_in(probe, target, container, notes.clone());
        None
    }

    /// Stops its probe (it ended, or a new process replaces it).
    pub fn stop_probe(&mut self) {
        if let Some(p) = self.probe.take() {
            p.abort();
        }
    }

    /// A bare record (filled in by a start or an adoption).
    pub fn bare(allocation_id: &str, task_id: &str, epoch: u64, log_path: PathBuf) -> Self {
        Workload {
            allocation_id: allocation_id.to_string(),
            task_id: task_id.to_string(),
            epoch,
            pid: None,
            reservation: false,
            shim_dir: PathBuf::new(),
            shim: None,
            shim_is_child: false,
            gpu_indices: Vec::new(),
            gpu_memory_mb: 0,
            exit: None,
            stop_requested: false,
            lease_expired: false,
            run: 0,
            checkpoint: CheckpointWatch::new(PathBuf::new()),
            log_path,
            usage: AllocationUse::default(),
            last_cpu: None,
            model_sha256: None,
            warming: None,
            port: None,
            readiness: None,
            uid: None,
            probe: None,
            generation: 0,
            ready: None,
            model: None,
            swap: None,
            swap_leftovers: Vec::new(),
            pulling: None,
            container: None,
            memory_cgroup: None,
            starting: false,
        }
    }

    /// True while its process runs or its reservation is held.
    pub fn is_alive(&self) -> bool {
        self.exit.is_none()
    }

    /// A reservation still held: nothing runs, so nothing needs stopping
    /// for the node to stop; its dir keeps the hold for the next agent.
    pub fn is_held_reservation(&self) -> bool {
        self.reservation && self.is_alive()
    }

    /// How the agent reports it in a hello or digest.
    pub fn report(&self) -> WorkloadReport {
        WorkloadReport {
            allocation_id: self.allocation_id.clone(),
            task_id: self.task_id.clone(),
            epoch: self.epoch,
            pid: self.pid,
            exit: self.exit.clone(),
            usage: self.usage.clone(),
            // Nothing started yet while its image is pulled, nor before
            // its shim says it runs.
            warming: self.warming.is_some() || self.pulling.is_some() || self.starting,
            ready: self.ready,
            generation: self.generation,
            port: self.port,
        }
    }
}
