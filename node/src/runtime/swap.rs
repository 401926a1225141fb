//! In-place swap (`ServerMessage::Swap`): one allocation's workload restarted
//! on another model version, keeping the allocation, its GPUs, cgroup, uid,
//! port and env (only CALDERA_MODEL_* change).
//!
//! Order matters for availability: the new version's copy is made sure of
//! first, through the same cache path a start with a model takes (with its
//! `Warming` events), while the old process keeps serving — a copy that
//! cannot be fetched or verified fails the swap and leaves the old process
//! untouched. Only then is the old process stopped through its shim (SIGTERM
//! to its group, `grace_ms`, SIGKILL); its exit is not the task's exit (no
//! `Exited`): the shim dir is rewritten with the new spec (generation and
//! model recorded, so an agent restarted later adopts it as what it is) and a
//! new shim starts the command again. `Swapped`, then `Readiness` once the
//! probe passes (right away without one). A start that fails after the old
//! process stopped leaves nothing running: `SwapFailed`, then the exit.
//!
//! A generation the workload already reached is answered again with that
//! outcome (the control plane resends after its own restart); one in
//! progress is a duplicate and ignored. The swap is not kept on disk: an
//! agent that dies while the old process stops (or before the new shim
//! starts) leaves the old stop, which the next agent reports as the exit (the
//! control plane's swap sees the replica end and rolls back or replaces it);
//! one that dies while the copy warms just loses the swap, which the control
//! plane resends (its generation was never reported).
//!
//! A workload in a container is swapped make-before-break instead (see
//! `runtime::container_swap`): its old container serves until the new one
//! is ready.
use super::launch::{model_label, swapped_env};
use super::swap_state::{PendingSwap, SwapStage};
use super::{exits::agent_exit, shim_link, watch_shim, Runtime};
use crate::shim::files::{self, reason, PidRecord, ShimSpec};
use caldera_spec::codes;
use caldera_spec::wire::{SwapCommand, WorkloadEventKind};
use std::path::Path;
use std::time::Duration;

impl Runtime {
    /// Takes a swap: true when it goes on to warming (the caller makes sure
    /// of the copy); false when it was answered, ignored or refused here.
    pub fn begin_swap(&mut self, cmd: &SwapCommand) -> bool {
        let id = &cmd.allocation_id;
        let Some(w) = self
            .workloads
            .get_mut(id)
            .filter(|w| w.is_alive() && w.task_id == cmd.task_id)
        else {
            let why = format!(
                "allocation {id} runs no workload of task {} on this node",
                cmd.task_id
            );
            self.swap_failed(cmd, codes::SWAP_REFUSED, why);
            return false;
        };
        if w.generation >= cmd.generation && w.swap.is_none() && w.pid.is_some() {
            // Reached already: say so again (the control plane lost it).
            self.answer_swapped(id);
            return false;
        }
        if let Some(p) = &w.swap {
            // Superseded while the old process or container still serves
            // untouched: warming, or a container's new one still on probation
            // (a rollback must not wait for the probe's timeout).
            let replaceable = matches!(p.stage, SwapStage::Warming | SwapStage::Candidate);
            if p.cmd.generation == cmd.generation || !replaceable {
                // A duplicate, or a newer one while the process restarts:
                // the control plane resends what it still wants once this ends.
                tracing::info!(
                    "allocation {id}: swap to generation {} ignored, generation {} under way",
                    cmd.generation,
                    p.cmd.generation
                );
                return false;
            }
            let older = p.cmd.clone();
            let why = format!("superseded by generation {}", cmd.generation);
            self.swap_failed(&older, codes::SWAP_REFUSED, why);
        }
        let Some(w) = self.workloads.get_mut(id) else {
            return false;
        };
        if w.warming.is_some() || w.pid.is_none() || w.shim.is_none() {
            let why = format!(
                "allocation {id} has no running process to swap (still starting, or a reservation)"
            );
            self.swap_failed(cmd, codes::SWAP_REFUSED, why);
            return false;
        }
        if w.container.is_some() {
            return self.begin_container_swap(cmd);
        }
        tracing::info!(
            "allocation {id}: swapping generation {} to {} ({})",
            w.generation,
            cmd.generation,
            model_label(&cmd.model)
        );
        w.swap = Some(PendingSwap {
            cmd: cmd.clone(),
            stage: SwapStage::Warming,
            container: None,
        });
        true
    }

    /// `Swapped` for the generation the workload runs, and its readiness
    /// as last reported (if any).
    fn answer_swapped(&mut self, id: &str) {
        let Some(w) = self.workloads.get(id) else {
            return;
        };
        let (task, epoch, generation) = (w.task_id.clone(), w.epoch, w.generation);
        let swapped = WorkloadEventKind::Swapped {
            generation,
            model: w.model.clone().unwrap_or_default(),
            pid: w.pid,
            port: None,
            image: None,
            image_digest: w.container.as_ref().and_then(|c| c.image_digest.clone()),
        };
        let ready = w.ready.map(|ready| WorkloadEventKind::Readiness {
            ready,
            generation,
            detail: "as reported before (a repeated swap)".into(),
        });
        self.event(id, &task, epoch, swapped);
        if let Some(ready) = ready {
            self.event(id, &task, epoch, ready);
        }
    }

    /// Reports `SwapFailed` for `cmd` and forgets its swap, if it was the
    /// one under way.
    pub fn swap_failed(&mut self, cmd: &SwapCommand, code: codes::ErrorCode, reason: String) {
        let id = &cmd.allocation_id;
        tracing::warn!(
            code = code.code,
            "swap of allocation {id} to generation {} failed: {reason}",
            cmd.generation
        );
        let mut epoch = cmd.epoch;
        if let Some(w) = self.workloads.get_mut(id) {
            epoch = w.epoch;
            if w.swap.as_ref().map(|p| p.cmd.generation) == Some(cmd.generation) {
                if let Some(mut p) = w.swap.take() {
                    Runtime::drop_candidate(w, &mut p);
                }
            }
        }
        let kind = WorkloadEventKind::SwapFailed {
            generation: cmd.generation,
            reason,
        };
        self.event(id, &cmd.task_id, epoch, kind);
    }

    /// The workloads whose swap waits in warming for `sha256`, with it.
    fn warming_for<'a>(
        &'a self,
        sha256: &'a str,
    ) -> impl Iterator<Item = (&'a super::workload::Workload, &'a SwapCommand)> + 'a {
        self.workloads.values().filter_map(move |w| {
            let p = w.swap.as_ref()?;
            (p.stage == SwapStage::Warming && p.cmd.model.sha256 == sha256).then_some((w, &p.cmd))
        })
    }

    /// Swaps waiting in warming for `sha256`.
    fn swaps_warming(&self, sha256: &str) -> Vec<SwapCommand> {
        self.warming_for(sha256).map(|(_, c)| c.clone()).collect()
    }

    /// Model shas of swaps in warming, with the allocation's identity and
    /// the model (for their `Warming` events).
    pub(super) fn swap_warming_targets(
        &self,
        sha256: &str,
    ) -> Vec<(String, String, u64, caldera_spec::wire::ModelMount)> {
        self.warming_for(sha256)
            .map(|(w, c)| {
                let id = w.allocation_id.clone();
                (id, w.task_id.clone(), w.epoch, c.model.clone())
            })
            .collect()
    }

    /// The copy of `sha256` could not be had (`why`): every swap waiting
    /// for it fails; its old process serves on.
    pub fn swap_copy_failed(&mut self, sha256: &str, why: &str) {
        for cmd in self.swaps_warming(sha256) {
            let serving = self
                .workloads
                .get(&cmd.allocation_id)
                .map_or(0, |w| w.generation);
            let reason = format!(
                "{} could not be verified in this node's cache ({why}); generation {serving} keeps serving",
                model_label(&cmd.model)
            );
            self.swap_failed(&cmd, codes::SWAP_VERIFY_FAILED, reason);
        }
    }

    /// The verified copy of `sha256` is at `path`: every swap waiting for it
    /// stops its old process (the new one starts when the old shim ends).
    pub(super) fn swap_copy_ready(
        &mut self,
        sha256: &str,
        path: &Path,
        serves: &dyn Fn(Option<&str>) -> bool,
    ) {
        let swaps = self.swaps_warming(sha256);
        for cmd in swaps
            .into_iter()
            .filter(|c| serves(c.model.owner.as_deref()))
        {
            let id = &cmd.allocation_id;
            let Some(w) = self.workloads.get_mut(id) else {
                continue;
            };
            if w.swap.as_ref().is_some_and(|p| p.container.is_some()) {
                // Its old container serves until the new one is ready.
                self.container_copy_ready(id, path);
                continue;
            }
            if let Some(p) = w.swap.as_mut() {
                p.stage = SwapStage::Stopping(path.to_path_buf());
            }
            w.stop_probe();
            w.ready = Some(false);
            let grace = Duration::from_millis(cmd.grace_ms);
            tracing::info!(
                "allocation {id}: stopping generation {} for the swap",
                w.generation
            );
            if let Err(e) = shim_link::request_stop(&w.shim_dir, grace) {
                tracing::error!("allocation {id}: cannot ask its shim to stop ({e}); killing it");
                if let Some(pid) = w.pid {
                    crate::shim::signal_group(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// Called when a workload's shim ended: true when that was a swap's
    /// stop, and the new process was started (or its failure reported)
    /// instead of the exit. A workload that ended for any other reason
    /// (its own exit while warming, a lapsed lease) fails its swap and ends.
    pub(super) fn swap_takes_exit(&mut self, id: &str) -> bool {
        let Some(w) = self.workloads.get_mut(id) else {
            return false;
        };
        let Some(p) = w.swap.take() else {
            return false;
        };
        if p.container.is_some() {
            return self.container_swap_takes_exit(id, p);
        }
        let exit = shim_link::read_exit(&w.shim_dir);
        let stopped = exit.as_ref().is_some_and(|e| e.reason == reason::STOPPED);
        match (&p.stage, stopped) {
            (SwapStage::Stopping(path), true) => {
                let path = path.clone();
                self.relaunch(id, &p.cmd, &path);
                true
            }
            _ => {
                let why = format!(
                    "the workload ended during the swap ({})",
                    exit.map_or_else(|| "its shim vanished".to_string(), |e| e.reason)
                );
                self.swap_failed(&p.cmd, codes::SWAP_START_FAILED, why);
                false
            }
        }
    }

    /// Rewrites the shim dir for the new generation and starts its shim.
    fn relaunch(&mut self, id: &str, cmd: &SwapCommand, model_path: &Path) {
        let run = self.next_run;
        self.next_run += 1;
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        let dir = w.shim_dir.clone();
        let spawned = super::launch::model_path(&self.data_dir, model_path, &cmd.model, w.uid)
            .map_err(|e| e.to_string())
            .and_then(|path| {
                rewrite_spec(&dir, cmd, &path, w.epoch, self.lease).map_err(|e| e.to_string())
            })
            .and_then(|()| shim_link::spawn(&self.shim_command, &dir).map_err(|e| e.to_string()));
        w.run = run;
        w.pid = None;
        w.shim = None;
        w.model_sha256 = Some(cmd.model.sha256.clone());
        match spawned {
            Ok(child) => {
                w.shim = child.id().and_then(PidRecord::of);
                w.shim_is_child = true;
                w.swap = Some(PendingSwap {
                    cmd: cmd.clone(),
                    stage: SwapStage::Starting,
                    container: None,
                });
                watch_shim(child, dir, self.notes.clone(), id.to_string(), run);
            }
            Err(e) => {
                shim_link::record_exit(&dir, &agent_exit(None, reason::SPAWN_FAILED));
                let why = format!("the new process could not be started: {e}");
                self.swap_failed(cmd, codes::SWAP_START_FAILED, why);
                self.finish(id);
            }
        }
    }

    /// The new shim said how its start went: true when this completed a
    /// swap (`Swapped`, readiness watched again; or `SwapFailed`, the exit
    /// following from the shim's end).
    pub(super) fn swap_started(
        &mut self,
        id: &str,
        pid: Result<Option<u32>, &crate::error::StartError>,
    ) -> bool {
        let Some(w) = self.workloads.get_mut(id) else {
            return false;
        };
        let Some(p) = w.swap.take_if(|p| p.stage == SwapStage::Starting) else {
            return false;
        };
        let pid = match pid {
            Ok(pid) => pid,
            Err(e) => {
                let why = format!("the new process could not be started: {e}");
                self.swap_failed(&p.cmd, codes::SWAP_START_FAILED, why);
                return true;
            }
        };
        let model = model_label(&p.cmd.model);
        w.pid = pid;
        w.generation = p.cmd.generation;
        w.model = Some(model.clone());
        let (task, epoch, generation, port) = (w.task_id.clone(), w.epoch, w.generation, w.port);
        tracing::info!(
            "allocation {id} swapped to generation {generation} ({model}): pid {pid:?} port {port:?}"
        );
        let ready_now = w.watch_readiness(&self.notes);
        let swapped = WorkloadEventKind::Swapped {
            generation,
            model,
            pid,
            port: None,
            image: None,
            image_digest: None,
        };
        self.event(id, &task, epoch, swapped);
        if let Some(ready) = ready_now {
            self.event(id, &task, epoch, ready);
        }
        true
    }
}

/// A shim dir that could not be made ready for a new generation; the words
/// end up in the swap's failure reason, naming the file.
#[derive(Debug, thiserror::Error)]
enum SpecRewrite {
    #[error("reading {}: {source}", .path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("removing {}: {source}", .path.display())]
    Remove {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing its lease: {0}")]
    Lease(#[source] std::io::Error),
    #[error("writing {}: {source}", .path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The shim dir made ready for the new generation: the old shim's files go
/// (its exit is not the task's), the spec is the old one with the new
/// model's env, sha, generation and name, the lease is renewed.
fn rewrite_spec(
    dir: &Path,
    cmd: &SwapCommand,
    model_path: &Path,
    epoch: u64,
    lease: Option<u64>,
) -> Result<(), SpecRewrite> {
    let spec_path = dir.join(files::SPEC);
    let old: ShimSpec = files::read_json(&spec_path).map_err(|source| SpecRewrite::Read {
        path: spec_path.clone(),
        source,
    })?;
    let spec = ShimSpec {
        env: swapped_env(&old.env, &cmd.model, model_path),
        model_sha256: Some(cmd.model.sha256.clone()),
        generation: cmd.generation,
        model: Some(model_label(&cmd.model)),
        epoch,
        ..old
    };
    for name in [
        files::EXIT,
        files::STOP,
        files::WORKLOAD_PID,
        files::SHIM_PID,
    ] {
        match std::fs::remove_file(dir.join(name)) {
            Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                return Err(SpecRewrite::Remove {
                    path: dir.join(name),
                    source,
                })
            }
            _ => {}
        }
    }
    shim_link::write_lease(dir, lease).map_err(SpecRewrite::Lease)?;
    files::write_json(&spec_path, &spec).map_err(|source| SpecRewrite::Write {
        path: spec_path,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::SpecRewrite;

    #[test]
    fn a_spec_that_cannot_be_rewritten_names_the_file_and_keeps_the_io_error() {
        let e = SpecRewrite::Read {
            path: "/data/shims/a-1/spec.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert_eq!(
            e.to_string(),
            format!(
                "reading /data/shims/a-1/spec.json: {}",
                std::io::Error::from(std::io::ErrorKind::NotFound)
            )
        );
        assert!(std::error::Error::source(&e).is_some());
        let lease = SpecRewrite::Lease(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert!(
            lease.to_string().starts_with("writing its lease: "),
            "{lease}"
        );
    }
}
