//! The process runtime: turns `Start`/`Stop` commands into supervised process
//! groups and reports what happens to them as [`WorkloadEvent`]s.
//!
//! The runtime is owned by the agent's single event loop (no locks). Things
//! that complete later — a process exiting, a stop's grace period running out —
//! come back as [`Note`]s on a channel that the loop feeds into [`Runtime::handle`].
//! Events wait in an outbox until a live session takes them.
pub mod checkpoint;
mod launch;
pub mod ledger;
pub mod logs;
pub mod procfs;
pub mod spawn;
pub mod usage;
pub mod workload;

pub use workload::Workload;

use crate::cgroup::Isolation;
use crate::error::StartError;
use crate::probe::ProcessGpuUse;
use caldera_spec::wire::{
    ExitStatus, StartCommand, WorkloadEvent, WorkloadEventKind, WorkloadReport,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// Allocation ids remembered after their workload is gone, so a duplicated
/// start command can never run a task a second time.
const FINISHED_MEMORY: usize = 4096;

/// Something that completed outside the event loop.
#[derive(Debug)]
pub enum Note {
    /// The leader process of run `run` ended.
    Exited {
        allocation_id: String,
        run: u64,
        status: Result<std::process::ExitStatus, String>,
    },
    /// The grace period of a stop ended: SIGKILL whatever is left.
    GraceOver { allocation_id: String, run: u64 },
}

/// All workloads of this node.
pub struct Runtime {
    data_dir: PathBuf,
    isolation: Isolation,
    simulated_gpus: bool,
    workloads: BTreeMap<String, Workload>,
    outbox: VecDeque<WorkloadEvent>,
    notes: UnboundedSender<Note>,
    next_run: u64,
    /// (allocation id, task id) of workloads that are gone, newest last.
    finished: VecDeque<(String, String)>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One path component from any name (shared with the control plane, which
/// checks checkpoint paths against the same dir).
pub use caldera_spec::node::safe_file_name;

impl Runtime {
    /// A runtime keeping its files under `data_dir`; the receiver carries its notes.
    pub fn new(
        data_dir: PathBuf,
        isolation: Isolation,
        simulated_gpus: bool,
    ) -> (Runtime, UnboundedReceiver<Note>) {
        let (notes, rx) = unbounded_channel();
        let runtime = Runtime {
            data_dir,
            isolation,
            simulated_gpus,
            workloads: BTreeMap::new(),
            outbox: VecDeque::new(),
            notes,
            next_run: 1,
            finished: VecDeque::new(),
        };
        (runtime, rx)
    }

    /// The isolation applied to workloads.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    /// Kills what a previous agent life left running (see [`ledger`]) and keeps
    /// those workloads as exited (SIGKILL), so the next hello reports them.
    pub fn recover_leftovers(&mut self) {
        let path = ledger::path(&self.data_dir);
        let entries = ledger::read(&path);
        if entries.is_empty() {
            return;
        }
        let mut killed = ledger::kill_leftovers(&entries);
        for e in &entries {
            killed += self.isolation.reap(&e.allocation_id);
        }
        tracing::warn!(
            "previous agent left {} workload(s) in {}; killed {killed} leftover process(es)",
            entries.len(),
            path.display()
        );
        for e in entries {
            self.remember_finished(&e.allocation_id, &e.task_id);
            let log_path = logs::log_path(&self.data_dir, &e.task_id);
            let mut w = Workload::leftover(&e.allocation_id, &e.task_id, e.epoch, log_path);
            w.pid = Some(e.pgid);
            w.start_ticks = e.start_ticks;
            w.exit = Some(ExitStatus {
                code: None,
                signal: Some(libc::SIGKILL),
                stopped: false,
            });
            self.workloads.insert(e.allocation_id, w);
        }
        self.write_ledger();
    }

    fn event(&mut self, allocation_id: &str, task_id: &str, epoch: u64, kind: WorkloadEventKind) {
        self.outbox.push_back(WorkloadEvent {
            allocation_id: allocation_id.to_string(),
            task_id: task_id.to_string(),
            epoch,
            at_ms: now_ms(),
            kind,
        });
    }

    /// Prepares and starts one allocation's workload. Every outcome is an event:
    /// Preparing, Ready, then Started or StartFailed. A start for an allocation
    /// this node already has (or recently had) is ignored: nothing runs twice.
    pub fn start(&mut self, cmd: &StartCommand) {
        let id = &cmd.allocation_id;
        if self.workloads.contains_key(id) || self.finished.iter().any(|(a, _)| a == id) {
            // A redelivered command: its first delivery already produced events,
            // and a second StartFailed would misreport the first run.
            tracing::warn!(
                "ignoring a second start of allocation {id}: {}",
                StartError::Duplicate(id.clone())
            );
            return;
        }
        self.event(id, &cmd.task_id, cmd.epoch, WorkloadEventKind::Preparing);
        let run = self.next_run;
        self.next_run += 1;
        match self.launch(cmd, run) {
            Ok(w) => {
                let pid = w.pid;
                self.workloads.insert(id.clone(), w);
                self.event(
                    id,
                    &cmd.task_id,
                    cmd.epoch,
                    WorkloadEventKind::Started { pid },
                );
                self.write_ledger();
                tracing::info!("started allocation {id} (task {}) pid {pid:?}", cmd.task_id);
            }
            Err(e) => {
                tracing::warn!("allocation {id} failed to start [{}]: {e}", e.code());
                self.remember_finished(id, &cmd.task_id);
                let reason = e.to_string();
                self.event(
                    id,
                    &cmd.task_id,
                    cmd.epoch,
                    WorkloadEventKind::StartFailed { reason },
                );
            }
        }
    }

    /// Dirs, log, cgroup, then the process (or nothing, for a reservation).
    fn launch(&mut self, cmd: &StartCommand, run: u64) -> Result<Workload, StartError> {
        let prepared = launch::prepare(&self.data_dir, cmd)?;
        let (cgroup, isolation) = if cmd.command.is_empty() {
            (None, self.isolation.label())
        } else {
            launch::isolate(&self.isolation, cmd)
        };
        let ready = WorkloadEventKind::Ready { isolation };
        self.event(&cmd.allocation_id, &cmd.task_id, cmd.epoch, ready);
        let mut w = Workload::new(cmd, run, &prepared.checkpoint_dir, prepared.log_path);
        if cmd.command.is_empty() {
            return Ok(w);
        }
        let spawned = spawn::spawn(spawn::SpawnSpec {
            argv: &cmd.command,
            env: launch::workload_env(cmd, &prepared.checkpoint_dir),
            log: prepared.log,
            cgroup_fds: cgroup.as_ref().map(|c| c.join_fds()).unwrap_or_default(),
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                if let Some(cg) = &cgroup {
                    cg.remove();
                }
                return Err(e);
            }
        };
        w.pid = child.id();
        w.start_ticks = w.pid.and_then(procfs::stat).map_or(0, |s| s.start_ticks);
        w.cgroup = cgroup;
        launch::watch_exit(child, self.notes.clone(), cmd.allocation_id.clone(), run);
        Ok(w)
    }

    /// Stops a workload: SIGTERM to its group, then SIGKILL after `grace`
    /// (at once when `grace` is zero). A reservation is released at once.
    /// A stop for an allocation never seen here is answered with an `Exited`
    /// (stopped, no code, empty task id) under `epoch`.
    pub fn stop(&mut self, allocation_id: &str, grace: Duration, epoch: u64) {
        let Some(w) = self.workloads.get_mut(allocation_id) else {
            if !self.finished.iter().any(|(a, _)| a == allocation_id) {
                // Never heard of it (e.g. killed as a leftover after an agent
                // restart): say it is not running, so the stop gets an answer.
                tracing::info!("stop for allocation {allocation_id}, which this node does not run");
                let status = ExitStatus::STOPPED_WITHOUT_PROCESS;
                self.event(allocation_id, "", epoch, WorkloadEventKind::Exited(status));
            }
            return;
        };
        if !w.is_alive() {
            return;
        }
        w.stop_requested = true;
        let Some(pgid) = w.pid else {
            let (task, epoch) = (w.task_id.clone(), w.epoch);
            w.exit = Some(ExitStatus::STOPPED_WITHOUT_PROCESS);
            self.report_exit(
                allocation_id,
                &task,
                epoch,
                ExitStatus::STOPPED_WITHOUT_PROCESS,
            );
            return;
        };
        if grace.is_zero() {
            kill_workload(w);
            return;
        }
        spawn::signal_group(pgid, libc::SIGTERM);
        let notes = self.notes.clone();
        let (allocation_id, run) = (allocation_id.to_string(), w.run);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let _ = notes.send(Note::GraceOver { allocation_id, run });
        });
    }

    /// Stops every live workload (agent shutdown).
    pub fn stop_all(&mut self, grace: Duration) {
        let ids: Vec<String> = self.workloads.keys().cloned().collect();
        for id in ids {
            self.stop(&id, grace, 0);
        }
    }

    /// Applies a note from a child waiter or a grace timer.
    pub fn handle(&mut self, note: Note) {
        match note {
            Note::GraceOver { allocation_id, run } => {
                if let Some(w) = self.workloads.get(&allocation_id) {
                    if w.run == run && w.is_alive() {
                        tracing::info!(
                            "allocation {allocation_id} ignored SIGTERM; sending SIGKILL"
                        );
                        kill_workload(w);
                    }
                }
            }
            Note::Exited {
                allocation_id,
                run,
                status,
            } => self.exited(&allocation_id, run, status),
        }
    }

    fn exited(
        &mut self,
        allocation_id: &str,
        run: u64,
        status: Result<std::process::ExitStatus, String>,
    ) {
        let Some(w) = self.workloads.get_mut(allocation_id) else {
            return;
        };
        if w.run != run || !w.is_alive() {
            return;
        }
        // The leader is gone; nothing else of the group may outlive it unowned.
        kill_workload(w);
        if let Some(cg) = w.cgroup.take() {
            cg.remove();
        }
        let status = match status {
            Ok(s) => ExitStatus {
                code: s.code(),
                signal: s.signal(),
                stopped: w.stop_requested,
            },
            Err(e) => {
                tracing::warn!("waiting for allocation {allocation_id} failed: {e}");
                ExitStatus {
                    code: None,
                    signal: None,
                    stopped: w.stop_requested,
                }
            }
        };
        tracing::info!("allocation {allocation_id} exited: {status:?}");
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
        self.write_ledger();
    }

    /// Remembers the allocation as finished and reports its exit.
    fn report_exit(&mut self, allocation_id: &str, task: &str, epoch: u64, status: ExitStatus) {
        self.remember_finished(allocation_id, task);
        self.event(
            allocation_id,
            task,
            epoch,
            WorkloadEventKind::Exited(status),
        );
    }

    fn remember_finished(&mut self, allocation_id: &str, task_id: &str) {
        if self.finished.len() >= FINISHED_MEMORY {
            self.finished.pop_front();
        }
        self.finished
            .push_back((allocation_id.to_string(), task_id.to_string()));
    }

    /// True when nothing runs or is held.
    pub fn all_exited(&self) -> bool {
        self.workloads.values().all(|w| !w.is_alive())
    }

    /// One workload, by allocation id.
    pub fn workload(&self, allocation_id: &str) -> Option<&Workload> {
        self.workloads.get(allocation_id)
    }

    /// Reports of everything alive, and of exits not yet known to be delivered.
    pub fn reports(&self) -> Vec<WorkloadReport> {
        self.workloads.values().map(Workload::report).collect()
    }

    /// Takes the queued events for sending; an `Exited` handed out marks its
    /// workload for removal after the next heartbeat ([`Runtime::purge_reported`]).
    pub fn take_events(&mut self) -> Vec<WorkloadEvent> {
        let events: Vec<WorkloadEvent> = self.outbox.drain(..).collect();
        for e in &events {
            if matches!(e.kind, WorkloadEventKind::Exited(_)) {
                if let Some(w) = self.workloads.get_mut(&e.allocation_id) {
                    w.exit_sent = true;
                }
            }
        }
        events
    }

    /// Number of events waiting for a session.
    pub fn pending_events(&self) -> usize {
        self.outbox.len()
    }

    /// Forgets exited workloads whose exit went out (call after a heartbeat that
    /// included them was sent on the same session).
    pub fn purge_reported(&mut self) {
        self.workloads.retain(|_, w| w.is_alive() || !w.exit_sent);
    }

    /// Applies a welcome: workloads of the hello in `keep` are adopted under
    /// `epoch`; the other live ones are killed (no longer ours); exited ones were
    /// reported by the hello and are forgotten.
    /// Returns how many live workloads were killed.
    pub fn apply_welcome(&mut self, epoch: u64, keep: &[String], reported: &[String]) -> usize {
        let mut to_kill = Vec::new();
        for id in reported {
            let Some(w) = self.workloads.get_mut(id) else {
                continue;
            };
            if !w.is_alive() {
                self.workloads.remove(id);
            } else if keep.contains(id) {
                w.epoch = epoch;
            } else {
                to_kill.push(id.clone());
            }
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
        self.write_ledger();
        killed
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
        let procs = procfs::all();
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

    fn write_ledger(&self) {
        let boot_id = procfs::boot_id();
        let entries: Vec<ledger::LedgerEntry> = self
            .workloads
            .values()
            .filter(|w| w.is_alive())
            .filter_map(|w| {
                Some(ledger::LedgerEntry {
                    allocation_id: w.allocation_id.clone(),
                    task_id: w.task_id.clone(),
                    epoch: w.epoch,
                    pgid: w.pid?,
                    start_ticks: w.start_ticks,
                    boot_id: boot_id.clone(),
                })
            })
            .collect();
        let path = ledger::path(&self.data_dir);
        if let Err(e) = ledger::write(&path, &entries) {
            tracing::error!(
                "cannot write {}: {e}; a crash now could leave workloads unowned",
                path.display()
            );
        }
    }
}

/// SIGKILL to the workload's group and, where there is one, its whole cgroup.
fn kill_workload(w: &Workload) {
    if let Some(pgid) = w.pid {
        spawn::signal_group(pgid, libc::SIGKILL);
    }
    if let Some(cg) = &w.cgroup {
        cg.kill_all();
    }
}
