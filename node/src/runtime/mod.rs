//! The process runtime: turns `Start`/`Stop` commands into workloads, each
//! run by its own shim (`caldera shim`, see [`crate::shim`]), and reports what
//! happens to them as [`WorkloadEvent`]s.
//!
//! The runtime is owned by the agent's single event loop (no locks). Things
//! that complete later — a shim this agent started exiting — come back as
//! [`Note`]s on a channel that the loop feeds into [`Runtime::handle`]; shims
//! an earlier agent started are adopted ([`Runtime::adopt_shims`]) and polled.
//! Events wait in an outbox until a live session takes them.
//!
//! An exit is kept on disk (the shim dir's `exit.json`) until the control
//! plane has it for sure: it is reported in the `Exited` event, in every
//! hello and digest until a welcome says the control plane no longer owns the
//! allocation (then the dir is removed), and a `Stop` for it is answered with
//! the recorded exit, for as long as it is owned. So a control plane that
//! lost an exit (a failed commit, a restart, an event lost on the wire) hears
//! it again: a lost event shows as a gap in the event numbering and is
//! repaired by a resync's digest. Heartbeats carry only usage. Within one
//! session the control plane keeps the exits it was told, and a task rebuilt
//! after a failed commit asks for its own again.
//!
//! A workload its shim stopped because the lease ran out is the exception: it
//! did not end on its own (a training job that checkpointed on SIGTERM and
//! exited 0 must not read as finished), so it is not reported at all — the
//! next hello leaves it out, and a control plane that still owns the
//! allocation handles it as a workload that vanished (requeued). Only if it
//! ran out between a hello that reported it and the welcome keeping it is it
//! reported, as killed (failed, never finished).
mod adopt;
pub mod checkpoint;
mod container_swap;
mod containers;
mod exits;
pub mod gpu_devices;
mod launch;
pub mod logs;
mod port_claims;
pub mod ports;
pub mod readiness;
pub mod shim_link;
pub mod swap;
mod swap_state;
pub mod usage;
mod warming;
pub mod workload;

pub use containers::ContainerHost;
pub use launch::model_label;
pub use shim_link::ShimCommand;
pub use workload::Workload;

use crate::cgroup::Isolation;
use crate::error::StartError;
use crate::probe::ProcessGpuUse;
use crate::scratch_volume::ScratchVolumes;
use crate::shim::files::{reason, PidRecord};
use crate::tenancy::Tenancy;
use caldera_spec::wire::{
    ExitStatus, StartCommand, UsageReport, WorkloadEvent, WorkloadEventKind, WorkloadReport,
};
use exits::agent_exit;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// Allocation ids remembered after their workload is gone, so a duplicated
/// start command can never run a task a second time; the oldest one's shim
/// dir goes when it is forgotten.
const FINISHED_MEMORY: usize = 4096;

/// Something that completed outside the event loop.
#[derive(Debug)]
pub enum Note {
    /// The shim of run `run` said the workload runs (its pid; None when it
    /// already ended), or why it could not start it.
    ShimStarted {
        allocation_id: String,
        run: u64,
        outcome: Result<Option<PidRecord>, StartError>,
    },
    /// The readiness probe of run `run` saw readiness change.
    Readiness {
        allocation_id: String,
        run: u64,
        generation: u32,
        ready: bool,
        detail: String,
    },
    /// The image pull of run `run` made progress.
    Pulling {
        allocation_id: String,
        run: u64,
        progress: caldera_spec::container::PullProgress,
    },
    /// A sweep listed this agent's containers (see `sweep_orphans`).
    Orphans(Vec<crate::container::orphans::Labelled>),
    /// The image pull of run `run` ended: the digest to run, or why not.
    Pulled {
        allocation_id: String,
        run: u64,
        outcome: Result<String, StartError>,
    },
    /// The shim of run `run` (this agent's child) ended; the workload's exit
    /// is in its dir.
    ShimExited {
        allocation_id: String,
        run: u64,
        status: std::io::Result<std::process::ExitStatus>,
    },
    /// A swap's new container of run `run` is past its ready wait.
    SwapDeadline { allocation_id: String, run: u64 },
}

/// All workloads of this node.
pub struct Runtime {
    data_dir: PathBuf,
    isolation: Isolation,
    tenancy: Tenancy,
    shim_command: ShimCommand,
    /// SIGTERM -> SIGKILL when a shim's lease runs out.
    lease_grace: Duration,
    /// Where GPU device files are looked for (`/dev`).
    device_dir: PathBuf,
    /// The node's lease deadline (ms on `CLOCK_BOOTTIME`) as the shims have it.
    lease: Option<u64>,
    simulated_gpus: bool,
    workloads: BTreeMap<String, Workload>,
    outbox: VecDeque<WorkloadEvent>,
    notes: UnboundedSender<Note>,
    next_run: u64,
    /// (allocation id, task id) of workloads that are gone, newest last.
    finished: VecDeque<(String, String)>,
    /// Where workloads' ports come from.
    ports: ports::ReplicaPorts,
    /// How starts with an image run (None: refused, no container runtime).
    containers: Option<ContainerHost>,
    /// The runtimes the inventory reports (empty: the process runtime only).
    runtimes: Vec<caldera_spec::container::RuntimeInfo>,
    /// How containers' scratch space is held to their `disk.size_gb`.
    scratch: ScratchVolumes,
}

/// Milliseconds since the Unix epoch.
pub use crate::clock::now_ms;

/// One path component from any name (shared with the control plane, which
/// checks checkpoint paths against the same dir).
pub use caldera_spec::node::safe_file_name;

impl Runtime {
    /// A runtime keeping its files under `data_dir`; the receiver carries its
    /// notes. Shims are `caldera shim` of this binary, workloads run as the
    /// agent's uid, until told otherwise.
    pub fn new(
        data_dir: PathBuf,
        isolation: Isolation,
        simulated_gpus: bool,
    ) -> (Runtime, UnboundedReceiver<Note>) {
        let (notes, rx) = unbounded_channel();
        let runtime = Runtime {
            tenancy: Tenancy::new(&data_dir, None),
            scratch: ScratchVolumes::detect(&data_dir),
            data_dir,
            isolation,
            shim_command: ShimCommand::this_binary(),
            lease_grace: Duration::from_secs(2),
            device_dir: PathBuf::from("/dev"),
            lease: None,
            simulated_gpus,
            workloads: BTreeMap::new(),
            outbox: VecDeque::new(),
            notes,
            next_run: 1,
            finished: VecDeque::new(),
            ports: ports::ReplicaPorts::new(ports::DEFAULT_RANGE),
            containers: None,
            runtimes: Vec::new(),
        };
        (runtime, rx)
    }

    /// Starts shims with `command` (tests use the `caldera-shim` binary).
    pub fn set_shim_command(&mut self, command: ShimCommand) {
        self.shim_command = command;
    }

    /// Hands workloads ports from `range` (`replica-ports`).
    pub fn set_replica_ports(&mut self, range: (u16, u16)) {
        self.ports.set_range(range);
    }

    /// The ports the workloads this runtime knows hold (adopted ones included).
    fn held_ports(&self) -> std::collections::BTreeSet<u16> {
        let swaps = self.workloads.values().flat_map(|w| w.swap_ports());
        self.workloads
            .values()
            .filter_map(|w| w.port)
            .chain(swaps)
            .collect()
    }

    /// Claims host-wide the ports its workloads hold (adopted ones: a
    /// restarted agent's claims died with the agent before it).
    fn hold_ports(&mut self) {
        let held = self.held_ports();
        self.ports.hold(&held);
    }

    /// A port no workload this runtime knows holds (adopted ones included).
    fn pick_port(&mut self) -> Result<u16, StartError> {
        let held = self.held_ports();
        self.ports
            .pick(&held)
            .ok_or_else(|| StartError::PortsExhausted {
                range: self.ports.label(),
            })
    }

    /// How tenants are kept apart (uids).
    pub fn set_tenancy(&mut self, tenancy: Tenancy) {
        self.tenancy = tenancy;
    }

    /// The grace a shim gives its workload when its lease runs out: new
    /// shims get it in their spec, live ones (adopted from an agent that was
    /// told another) in their `grace` file.
    pub fn set_lease_grace(&mut self, grace: Duration) {
        self.lease_grace = grace;
        self.tell_live_shims(
            |dir| shim_link::write_grace(dir, grace),
            "cannot update its stop grace; a lapsed lease keeps the old one",
        );
    }

    /// Writes one file into every live shim's dir; a failure is logged
    /// with `consequence` (the shim goes on with what it had).
    fn tell_live_shims(
        &self,
        write: impl Fn(&std::path::Path) -> std::io::Result<()>,
        consequence: &str,
    ) {
        let live = self.workloads.values();
        for w in live.filter(|w| w.is_alive() && w.shim.is_some()) {
            if let Err(e) = write(&w.shim_dir) {
                tracing::error!("allocation {}: {consequence} ({e})", w.allocation_id);
            }
            // A swap's new container lives under the same lease.
            if let Some(Err(e)) = w.candidate_dir().map(&write) {
                tracing::error!("allocation {}: {consequence} ({e})", w.allocation_id);
            }
        }
    }

    /// The grace new shims get for a lapsed lease.
    pub fn lease_grace(&self) -> Duration {
        self.lease_grace
    }

    /// Looks for GPU device files in `dir` instead of `/dev` (tests).
    pub fn set_device_dir(&mut self, dir: PathBuf) {
        self.device_dir = dir;
    }

    fn gpu_label(&self) -> String {
        let devices = gpu_devices::find(&self.device_dir);
        gpu_devices::label(&devices, self.isolation.limits_devices())
    }

    /// The cgroup isolation applied to workloads.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    /// Everything this node does to keep workloads apart, for the inventory.
    pub fn isolation_label(&self) -> String {
        let scratch = match &self.containers {
            Some(_) => format!("; {}", self.scratch.label()),
            None => String::new(),
        };
        format!(
            "{}; {}; {}{scratch}",
            self.isolation.label(),
            self.tenancy.label(),
            self.gpu_label()
        )
    }

    fn event(&mut self, allocation_id: &str, task_id: &str, epoch: u64, kind: WorkloadEventKind) {
        self.outbox.push_back(WorkloadEvent {
            allocation_id: allocation_id.to_string(),
            task_id: task_id.to_string(),
            epoch,
            at_ms: now_ms(),
            kind,
            seq: 0,
        });
    }

    /// Prepares and starts one allocation's workload. Every outcome is an event:
    /// Preparing, Ready, then Started or StartFailed (once its shim says so,
    /// see [`Note::ShimStarted`]; a reservation's at once). A start for an allocation
    /// this node already has (or recently had, or has a shim dir for) is
    /// ignored: nothing runs twice.
    pub fn start(&mut self, cmd: &StartCommand) {
        let id = &cmd.allocation_id;
        if self.workloads.contains_key(id)
            || self.finished.iter().any(|(a, _)| a == id)
            || shim_link::dir_of(&self.data_dir, id).exists()
        {
            // A redelivered command: its first delivery already produced events,
            // and a second StartFailed would misreport the first run.
            tracing::warn!(
                "ignoring a second start of allocation {id}: {}",
                StartError::Duplicate(id.clone())
            );
            return;
        }
        self.event(id, &cmd.task_id, cmd.epoch, WorkloadEventKind::Preparing);
        if cmd.model.is_some() {
            self.park(cmd);
            return;
        }
        self.launch_now(cmd, None);
    }

    /// Launches a start whose Preparing event went out (with its model's
    /// verified copy, if it names one).
    fn launch_now(&mut self, cmd: &StartCommand, model_path: Option<PathBuf>) {
        if cmd.container.is_some() {
            // Its image first: launched once pulled (see `containers`).
            self.pull(cmd, model_path);
            return;
        }
        self.launch_with(cmd, model_path, None);
    }

    /// Launches a start now (a container's with the digest of its image).
    fn launch_with(
        &mut self,
        cmd: &StartCommand,
        model_path: Option<PathBuf>,
        image_digest: Option<String>,
    ) {
        let id = &cmd.allocation_id;
        let run = self.next_run;
        self.next_run += 1;
        match self.launch(cmd, run, model_path, image_digest) {
            Ok(w) => {
                let reservation = cmd.is_reservation();
                self.workloads.insert(id.clone(), w);
                if reservation {
                    let started = WorkloadEventKind::Started {
                        image_digest: None,
                        pid: None,
                        port: None,
                    };
                    self.event(id, &cmd.task_id, cmd.epoch, started);
                }
            }
            Err(e) => self.start_failed(id, &cmd.task_id, cmd.epoch, &e),
        }
    }

    fn start_failed(&mut self, id: &str, task_id: &str, epoch: u64, e: &StartError) {
        tracing::warn!("allocation {id} failed to start [{}]: {e}", e.code());
        self.remember_finished(id, task_id);
        let reason = e.to_string();
        let code = e.error_code().code;
        self.event(
            id,
            task_id,
            epoch,
            WorkloadEventKind::StartFailed { code, reason },
        );
    }

    /// The shim said how the start went.
    fn shim_started(&mut self, id: &str, outcome: Result<Option<PidRecord>, StartError>) {
        let swap_outcome = outcome.as_ref().map(|pid| pid.as_ref().map(|r| r.pid));
        if self.swap_started(id, swap_outcome) {
            return;
        }
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        let (task, epoch) = (w.task_id.clone(), w.epoch);
        w.starting = false;
        match outcome {
            Ok(pid) => {
                w.pid = pid.map(|r| r.pid);
                let (pid, port) = (w.pid, w.port);
                tracing::info!("started allocation {id} (task {task}) pid {pid:?} port {port:?}");
                let ready_now = w.watch_readiness(&self.notes);
                let image_digest = w.container.as_ref().and_then(|c| c.image_digest.clone());
                self.event(
                    id,
                    &task,
                    epoch,
                    WorkloadEventKind::Started {
                        image_digest,
                        pid,
                        port,
                    },
                );
                if let Some(ready) = ready_now {
                    self.event(id, &task, epoch, ready);
                }
            }
            Err(e) => {
                let dir = w.shim_dir.clone();
                self.workloads.remove(id);
                self.isolation.reap(id);
                self.scratch.release(id);
                shim_link::remove(&dir);
                self.start_failed(id, &task, epoch, &e);
            }
        }
    }

    /// Identity, dirs, log, cgroup, the shim dir, then the shim (or nothing,
    /// for a reservation: its dir alone records the hold).
    fn launch(
        &mut self,
        cmd: &StartCommand,
        run: u64,
        model_path: Option<PathBuf>,
        image_digest: Option<String>,
    ) -> Result<Workload, StartError> {
        let tenant = caldera_spec::tenant_of(&cmd.task_id).unwrap_or("_");
        let uid = self.tenancy.uid_of(tenant)?;
        let reservation = cmd.is_reservation();
        let port = match reservation {
            true => None,
            false => Some(self.pick_port()?),
        };
        let mut prepared = launch::prepare(&self.data_dir, cmd, uid)?;
        prepared.model_path = match (model_path, &cmd.model) {
            (Some(copy), Some(m)) => Some(launch::model_path(&self.data_dir, &copy, m, uid)?),
            (path, _) => path,
        };
        prepared.port = port;
        let (cgroup, cgroup_label) = match reservation {
            true => (None, self.isolation.label()),
            false => match launch::isolate(&self.isolation, cmd, &self.denied_devices(cmd)) {
                Ok(cg) => (cg, self.isolation.label()),
                Err(no) => (None, no.to_string()),
            },
        };
        let dir = shim_link::dir_of(&self.data_dir, &cmd.allocation_id);
        let container = match (&cmd.container, reservation) {
            (Some(c), false) => {
                let tree = launch::checkpoint_tree(&self.data_dir, cmd);
                let parts = match &self.containers {
                    Some(host) => containers::parts(
                        host,
                        cmd,
                        c,
                        &prepared,
                        &tree,
                        uid,
                        cgroup.as_ref(),
                        &dir,
                        image_digest,
                    ),
                    None => Err(StartError::Container(
                        "the task runs in a container and this node's container runtime is down"
                            .into(),
                    )),
                };
                match parts {
                    Ok(p) => Some(p),
                    Err(e) => {
                        if let Some(cg) = &cgroup {
                            cg.remove();
                        }
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        let scratch_label = match &container {
            Some(_) => match self.size_scratch(cmd, uid) {
                Ok(label) => label,
                Err(e) => {
                    if let Some(cg) = &cgroup {
                        cg.remove();
                    }
                    return Err(e);
                }
            },
            None => String::new(),
        };
        let identity = match uid {
            Some(uid) => format!("uid {uid} (tenant {tenant})"),
            None => self.tenancy.label(),
        };
        let runtime_label = match (&container, &self.containers) {
            (Some(_), Some(host)) => format!("container (podman {}); ", host.engine.version),
            _ => String::new(),
        };
        let gpus = match &container {
            // A container gets its GPUs as CDI devices, not by device rules.
            Some(_) => gpu_devices::cdi_label(&cmd.gpu_indices, self.simulated_gpus),
            None => self.gpu_label(),
        };
        let isolation = format!("{runtime_label}{cgroup_label}; {identity}; {gpus}{scratch_label}");
        let ready = WorkloadEventKind::Ready { isolation };
        self.event(&cmd.allocation_id, &cmd.task_id, cmd.epoch, ready);
        let mut w = Workload::new(
            cmd,
            run,
            &prepared.checkpoint_dir,
            prepared.log_path.clone(),
        );
        let mut spec = launch::shim_spec(cmd, prepared, uid, cgroup.as_ref(), self.lease_grace);
        if let Some(parts) = container {
            // The podman client runs as root, outside the workload's cgroup
            // (podman puts the container there); the workload's uid and
            // environment go to the container.
            spec.argv = parts.argv;
            spec.env = parts.env;
            (spec.uid, spec.gid) = (None, None);
            spec.cgroup_procs = Vec::new();
            spec.cgroup_kill = None;
            spec.hide_processes = false;
            spec.container = Some(parts.shim);
        }
        w.container = spec.container.clone();
        w.memory_cgroup = spec.memory_cgroup.clone();
        w.shim_dir = dir.clone();
        w.port = port;
        w.uid = uid;
        let created =
            shim_link::create(&dir, &spec, self.lease).map_err(|source| StartError::Prepare {
                path: dir.clone(),
                source,
            });
        let spawned = created.and_then(|()| match reservation {
            true => Ok(None),
            false => shim_link::spawn(&self.shim_command, &dir).map(Some),
        });
        let spawned = match spawned {
            Ok(s) => s,
            Err(e) => {
                if let Some(cg) = &cgroup {
                    cg.remove();
                }
                self.scratch.release(&cmd.allocation_id);
                shim_link::remove(&dir);
                return Err(e);
            }
        };
        if let Some(child) = spawned {
            w.shim = child.id().and_then(PidRecord::of);
            w.shim_is_child = true;
            w.starting = true;
            watch_shim(
                child,
                dir,
                self.notes.clone(),
                cmd.allocation_id.clone(),
                run,
            );
        }
        Ok(w)
    }

    /// GPU device files of GPUs the command was not given.
    fn denied_devices(&self, cmd: &StartCommand) -> Vec<(u32, u32)> {
        gpu_devices::denied(&gpu_devices::find(&self.device_dir), &cmd.gpu_indices)
    }

    /// Stops a workload: its shim sends SIGTERM to the group, then SIGKILL
    /// after `grace` (at once when `grace` is zero). A reservation is released
    /// at once. A stop for an allocation whose workload already ended is
    /// answered with its recorded exit; for one never seen here with an
    /// `Exited` (stopped, no code, empty task id) under `epoch`.
    pub fn stop(&mut self, allocation_id: &str, grace: Duration, epoch: u64) {
        let Some(w) = self.workloads.get_mut(allocation_id) else {
            if !self.finished.iter().any(|(a, _)| a == allocation_id) {
                tracing::info!("stop for allocation {allocation_id}, which this node does not run");
                let status = ExitStatus::STOPPED_WITHOUT_PROCESS;
                self.event(allocation_id, "", epoch, WorkloadEventKind::Exited(status));
            }
            return;
        };
        if let Some(status) = w.exit.clone() {
            // The control plane asks about an exit it may have lost: say it again.
            let task = w.task_id.clone();
            self.event(
                allocation_id,
                &task,
                epoch,
                WorkloadEventKind::Exited(status),
            );
            return;
        }
        w.stop_requested = true;
        if let Some(mut p) = w.swap.take() {
            // A stop wins: the task ends, whatever stage its swap was in.
            tracing::info!(
                "allocation {allocation_id}: stop during its swap to generation {}",
                p.cmd.generation
            );
            Runtime::drop_candidate(w, &mut p);
        }
        // Warming or pulling (its shim dir not written yet) or a
        // reservation: no process.
        let warming = w.warming.take().is_some() | w.pulling.take().is_some();
        if warming || w.shim.is_none() {
            if warming {
                tracing::info!("allocation {allocation_id} stopped while warming");
            } else {
                let record = agent_exit(None, reason::STOPPED);
                shim_link::record_exit(&w.shim_dir, &record);
            }
            let (task, epoch) = (w.task_id.clone(), w.epoch);
            w.exit = Some(ExitStatus::STOPPED_WITHOUT_PROCESS);
            self.report_exit(
                allocation_id,
                &task,
                epoch,
                ExitStatus::STOPPED_WITHOUT_PROCESS,
            );
            return;
        }
        if let Err(e) = shim_link::request_stop(&w.shim_dir, grace) {
            tracing::error!(
                "allocation {allocation_id}: cannot ask its shim to stop ({e}); killing it"
            );
            if let Some(c) = &w.container {
                if let Err(e) = crate::container::podman::remove(&c.podman, &c.name) {
                    tracing::error!("allocation {allocation_id}: {e}");
                }
            }
            if let Some(pid) = w.pid {
                crate::shim::signal_group(pid, libc::SIGKILL);
            }
        }
    }

    /// Stops every live workload (agent shutdown).
    pub fn stop_all(&mut self, grace: Duration) {
        self.stop_all_but(grace, |_| false);
    }

    /// [`Runtime::stop_all`], but held reservations stay held (the whole
    /// cluster stops: the next agent adopts them, still held).
    pub fn stop_all_but_held(&mut self, grace: Duration) {
        self.stop_all_but(grace, Workload::is_held_reservation);
    }

    fn stop_all_but(&mut self, grace: Duration, keep: impl Fn(&Workload) -> bool) {
        let ids: Vec<String> = self.workloads.keys().cloned().collect();
        for id in ids {
            if self
                .workloads
                .get(&id)
                .is_some_and(|w| w.is_alive() && !keep(w))
            {
                self.stop(&id, grace, 0);
            }
        }
    }

    /// Applies a note from a shim waiter.
    pub fn handle(&mut self, note: Note) {
        let Some(note) = self.swap_note(note) else {
            return;
        };
        let (allocation_id, run, status) = match note {
            Note::ShimStarted {
                allocation_id,
                run,
                outcome,
            } => {
                if self
                    .workloads
                    .get(&allocation_id)
                    .is_some_and(|w| w.run == run)
                {
                    self.shim_started(&allocation_id, outcome);
                }
                return;
            }
            Note::Readiness {
                allocation_id,
                run,
                generation,
                ready,
                detail,
            } => {
                self.readiness_changed(&allocation_id, run, generation, ready, detail);
                return;
            }
            Note::Pulling {
                allocation_id,
                run,
                progress,
            } => {
                self.pulling(&allocation_id, run, progress);
                return;
            }
            Note::Pulled {
                allocation_id,
                run,
                outcome,
            } => {
                self.pulled(&allocation_id, run, outcome);
                return;
            }
            Note::Orphans(found) => {
                self.orphans_found(found);
                return;
            }
            Note::ShimExited {
                allocation_id,
                run,
                status,
            } => (allocation_id, run, status),
            // Only a swap's new container has one (taken above).
            Note::SwapDeadline { .. } => return,
        };
        let Some(w) = self.workloads.get(&allocation_id) else {
            return;
        };
        if w.run != run || !w.is_alive() {
            return;
        }
        if let Err(e) = &status {
            tracing::warn!("waiting for the shim of allocation {allocation_id} failed: {e}");
        }
        self.finish(&allocation_id);
    }

    /// A probe saw readiness change: reported if it is about the process
    /// that runs now (not an older run or generation).
    fn readiness_changed(
        &mut self,
        id: &str,
        run: u64,
        generation: u32,
        ready: bool,
        detail: String,
    ) {
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        if w.run != run || w.generation != generation || !w.is_alive() {
            return;
        }
        w.ready = Some(ready);
        tracing::info!("allocation {id} generation {generation}: ready {ready} ({detail})");
        let (task, epoch) = (w.task_id.clone(), w.epoch);
        let kind = WorkloadEventKind::Readiness {
            ready,
            generation,
            detail,
        };
        self.event(id, &task, epoch, kind);
    }

    /// Polls the shims this agent adopted (not its children): one that
    /// recorded an exit, or is gone, has finished.
    pub fn poll_adopted(&mut self) {
        let done: Vec<String> = self
            .workloads
            .values()
            .filter(|w| w.is_alive() && !w.shim_is_child)
            .filter(|w| {
                w.shim
                    .as_ref()
                    .is_some_and(|s| shim_link::read_exit(&w.shim_dir).is_some() || !s.alive())
            })
            .map(|w| w.allocation_id.clone())
            .collect();
        for id in done {
            self.finish(&id);
        }
    }

    /// True when nothing runs or is held.
    pub fn all_exited(&self) -> bool {
        self.workloads.values().all(|w| !w.is_alive())
    }

    /// Whether nothing runs here but held reservations.
    pub fn only_held_left(&self) -> bool {
        self.workloads
            .values()
            .all(|w| !w.is_alive() || w.is_held_reservation())
    }

    /// One workload, by allocation id.
    pub fn workload(&self, allocation_id: &str) -> Option<&Workload> {
        self.workloads.get(allocation_id)
    }

    /// A heartbeat's entries: the measured usage of every live workload.
    /// Exits are not among them: they go out as events, and a lost one is
    /// repaired by a resync.
    pub fn usage_reports(&self) -> Vec<UsageReport> {
        self.workloads
            .values()
            .filter(|w| w.is_alive() && !w.lease_expired)
            .map(|w| UsageReport {
                allocation_id: w.allocation_id.clone(),
                usage: w.usage.clone(),
            })
            .collect()
    }

    /// Number of workloads alive on the node (held reservations included).
    pub fn live_count(&self) -> usize {
        self.workloads
            .values()
            .filter(|w| w.is_alive() && !w.lease_expired)
            .count()
    }

    /// A hello's reports: everything alive, and every exit the control plane
    /// has not yet been seen to let go of (a welcome that no longer keeps it).
    pub fn hello_reports(&self) -> Vec<WorkloadReport> {
        self.workloads
            .values()
            .filter(|w| !w.lease_expired)
            .map(Workload::report)
            .collect()
    }

    /// Number of events waiting for a session.
    pub fn pending_events(&self) -> usize {
        self.outbox.len()
    }

    /// Hands the node's lease deadline (ms on `CLOCK_BOOTTIME`; None: no
    /// lease) to every live shim.
    pub fn renew_leases(&mut self, deadline_ms: Option<u64>) {
        self.lease = deadline_ms;
        self.tell_live_shims(
            |dir| shim_link::write_lease(dir, deadline_ms),
            "cannot renew its lease; it stops when the lease runs out",
        );
    }

    /// Checks every live workload's checkpoint dir for a new checkpoint.
    pub fn poll_checkpoints(&mut self) {
        let mut found = Vec::new();
        for w in self.workloads.values_mut().filter(|w| w.is_alive()) {
            if let Some(path) = w.checkpoint.poll() {
                found.push((w.allocation_id.clone(), w.task_id.clone(), w.epoch, path));
            }
        }
        for (id, task, epoch, path) in found {
            let path = path.to_string_lossy().into_owned();
            self.event(
                &id,
                &task,
                epoch,
                WorkloadEventKind::CheckpointSaved { path },
            );
        }
    }

    /// Measures every live workload (one /proc scan, only when something runs).
    pub fn sample_usage(&mut self, gpu_by_pid: &HashMap<u32, ProcessGpuUse>) {
        if !self
            .workloads
            .values()
            .any(|w| w.is_alive() && w.pid.is_some())
        {
            return;
        }
        let procs = crate::procfs::all();
        for w in self.workloads.values_mut() {
            usage::measure(w, &procs, gpu_by_pid, self.simulated_gpus);
        }
    }

    /// Per simulated GPU: (utilisation %, memory MiB) of the workloads on it.
    pub fn simulated_gpu_use(&self) -> HashMap<u32, (u32, u64)> {
        usage::simulated_gpu_use(self.workloads.values())
    }

    /// The tail of an allocation's log (its task's file, also after the workload
    /// is gone, and after this agent restarted: then the control plane's
    /// `task_id` names the file), and whether it was cut.
    pub fn tail_log(&self, allocation_id: &str, task_id: &str, tail_bytes: u64) -> (String, bool) {
        let Some(path) = self.log_file(allocation_id, task_id) else {
            return (String::new(), false);
        };
        logs::tail(&path, tail_bytes).unwrap_or_else(|e| {
            tracing::warn!("reading log {}: {e}", path.display());
            (String::new(), false)
        })
    }

    /// Up to `max_bytes` of the log from byte `from`, and the offset past
    /// them (following a log, `caldera logs -f`).
    pub fn read_log(
        &self,
        allocation_id: &str,
        task_id: &str,
        from: u64,
        max_bytes: u64,
    ) -> (String, u64) {
        let Some(path) = self.log_file(allocation_id, task_id) else {
            return (String::new(), from);
        };
        logs::read_from(&path, from, max_bytes).unwrap_or_else(|e| {
            tracing::warn!("reading log {}: {e}", path.display());
            (String::new(), from)
        })
    }

    /// The log file of an allocation: a live or finished one it remembers,
    /// else its task's (a restarted agent still finds it on disk).
    fn log_file(&self, allocation_id: &str, task_id: &str) -> Option<std::path::PathBuf> {
        match self.workloads.get(allocation_id) {
            Some(w) => Some(w.log_path.clone()),
            None => match self.finished.iter().rev().find(|(a, _)| a == allocation_id) {
                Some((_, task)) => Some(logs::log_path(&self.data_dir, task)),
                None if !task_id.is_empty() => Some(logs::log_path(&self.data_dir, task_id)),
                None => None,
            },
        }
    }
}

/// Waits in the background for the shim to report the workload's start, then
/// for the shim itself (reaping it), and reports both, in that order.
fn watch_shim(
    mut child: tokio::process::Child,
    dir: PathBuf,
    notes: UnboundedSender<Note>,
    allocation_id: String,
    run: u64,
) {
    tokio::spawn(async move {
        let outcome = shim_link::started(&dir, &mut child).await;
        let _ = notes.send(Note::ShimStarted {
            allocation_id: allocation_id.clone(),
            run,
            outcome,
        });
        let status = child.wait().await;
        let _ = notes.send(Note::ShimExited {
            allocation_id,
            run,
            status,
        });
    });
}
