//! A swap of a workload that runs in a container: make-before-break on the
//! same slice. A process swap stops the old process before the new one
//! starts (they share a port and a shim dir); a container swap does not
//! need to, so it keeps the old container serving until the new one is
//! ready:
//!
//! 1. the new image is pulled (the swap's own pull, under its prepare
//!    timeout) while the new version's copy is warmed; the old container
//!    serves meanwhile, and a failed pull or copy fails the swap with the
//!    old one untouched;
//! 2. the new container starts beside it under a shim dir of its own
//!    (`<allocation>~g<generation>`), with the old one's command line but
//!    its own name, image, model mount, env file and a newly claimed port
//!    ([`crate::container::swap_args`]) — the same cgroup parent, limits,
//!    GPUs and uid, so the same slice;
//! 3. it is probed ready (its readiness probe, within `ready_timeout_s`);
//!    a probe that never passes, or a container that ends first, fails the
//!    swap: the new container is stopped and the old one serves on;
//! 4. only then is the old container stopped; once its shim has ended the
//!    new container becomes the workload (`Swapped`, with its port when
//!    that moved and the image and digest it runs, then `Readiness`).
//!
//! A swap to what the container already runs (the same weights and image:
//! a rollback after a failed pull) changes nothing but the generation.
use super::launch::{model_label, swapped_env};
use super::swap_state::{Candidate, ContainerSwap, PendingSwap, SwapStage};
use super::{shim_link, watch_shim, Note, Runtime, Workload};
use crate::container::run_args::{self, MODEL_PATH};
use crate::container::swap_args::{self, SwapRun};
use crate::shim::files::{self, ContainerShim, PidRecord, ShimSpec};
use caldera_spec::codes;
use caldera_spec::wire::{SwapCommand, WorkloadEventKind};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a new container without a readiness probe may take to run.
const START_ALLOWANCE: Duration = Duration::from_secs(70);

/// The shim dir of generation `generation`'s new container.
pub fn candidate_dir(data_dir: &Path, allocation_id: &str, generation: u32) -> PathBuf {
    shim_link::root(data_dir).join(format!(
        "{}~g{generation}",
        super::safe_file_name(allocation_id)
    ))
}

impl Workload {
    /// Ports its swap's new container holds (or ones still being stopped).
    pub fn swap_ports(&self) -> impl Iterator<Item = u16> + '_ {
        let live = self
            .swap
            .as_ref()
            .and_then(|p| p.container.as_ref())
            .and_then(|c| c.candidate.as_ref())
            .and_then(|c| c.port);
        live.into_iter()
            .chain(self.swap_leftovers.iter().filter_map(|c| c.port))
    }

    /// The shim dir of its swap's new container, while one runs.
    pub fn candidate_dir(&self) -> Option<&Path> {
        let c = self.swap.as_ref()?.container.as_ref()?.candidate.as_ref()?;
        Some(&c.dir)
    }
}

impl Runtime {
    /// A swap of a workload in a container: answered at once when it would
    /// change nothing, refused without a container part or engine, else its
    /// pull starts (the copy is warmed by the caller). True when it goes on.
    pub(super) fn begin_container_swap(&mut self, cmd: &SwapCommand) -> bool {
        let id = cmd.allocation_id.clone();
        let Some(w) = self.workloads.get(&id) else {
            return false;
        };
        let (Some(host), Some(c)) = (&self.containers, &cmd.container) else {
            let why = "the workload runs in a container, and the swap names no image or this \
                       node's container runtime is down; the old container keeps serving"
                .to_string();
            self.swap_failed(cmd, codes::SWAP_REFUSED, why);
            return false;
        };
        let running = running_image(&w.shim_dir);
        if w.model_sha256.as_deref() == Some(cmd.model.sha256.as_str())
            && running.as_deref() == Some(c.image.as_str())
        {
            self.swap_changes_nothing(&id, cmd);
            return false;
        }
        let pull_run = self.next_run;
        self.next_run += 1;
        let (puller, start, notes) = (host.puller.clone(), c.clone(), self.notes.clone());
        let key = format!("{id}~g{}", cmd.generation);
        let allocation_id = id.clone();
        tokio::spawn(async move {
            let outcome = crate::container::pull::ensure(&puller, &key, &start, |_| {})
                .await
                .map(|p| p.digest)
                .map_err(crate::error::StartError::from);
            let _ = notes.send(Note::Pulled {
                allocation_id,
                run: pull_run,
                outcome,
            });
        });
        let Some(w) = self.workloads.get_mut(&id) else {
            return false;
        };
        tracing::info!(
            "allocation {id}: pulling {} for generation {} while the old container serves",
            c.image,
            cmd.generation
        );
        w.swap = Some(PendingSwap {
            cmd: cmd.clone(),
            stage: SwapStage::Warming,
            container: Some(Box::new(ContainerSwap {
                image: c.image.clone(),
                pull_run,
                digest: None,
                copy: None,
                candidate: None,
            })),
        });
        true
    }

    /// Same weights, same image: only the generation moves (and is
    /// recorded in the shim dir for an agent that adopts it later).
    fn swap_changes_nothing(&mut self, id: &str, cmd: &SwapCommand) {
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        tracing::info!(
            "allocation {id}: generation {} runs what generation {} asks for; nothing restarts",
            w.generation,
            cmd.generation
        );
        w.generation = cmd.generation;
        if let Err(e) = set_generation(&w.shim_dir, cmd.generation) {
            tracing::warn!("allocation {id}: {e}");
        }
        let (task, epoch, pid) = (w.task_id.clone(), w.epoch, w.pid);
        let image = running_image(&w.shim_dir);
        let image_digest = w.container.as_ref().and_then(|c| c.image_digest.clone());
        let ready = w.watch_readiness(&self.notes);
        let swapped = WorkloadEventKind::Swapped {
            generation: cmd.generation,
            model: model_label(&cmd.model),
            pid,
            port: None,
            image,
            image_digest,
        };
        self.event(id, &task, epoch, swapped);
        if let Some(ready) = ready {
            self.event(id, &task, epoch, ready);
        }
    }

    /// The verified copy for a container swap is at `path`.
    pub(super) fn container_copy_ready(&mut self, id: &str, path: &Path) {
        let Some(c) = self.container_swap_mut(id) else {
            return;
        };
        c.copy = Some(path.to_path_buf());
        self.launch_candidate(id);
    }

    fn container_swap_mut(&mut self, id: &str) -> Option<&mut ContainerSwap> {
        let w = self.workloads.get_mut(id)?;
        w.swap.as_mut()?.container.as_deref_mut()
    }

    /// Takes the notes of container swaps (their pull, their new
    /// container's shim and probe, their deadline); answers the others.
    pub(super) fn swap_note(&mut self, note: Note) -> Option<Note> {
        let (id, run) = match &note {
            Note::Pulled {
                allocation_id, run, ..
            }
            | Note::Pulling {
                allocation_id, run, ..
            }
            | Note::ShimStarted {
                allocation_id, run, ..
            }
            | Note::ShimExited {
                allocation_id, run, ..
            }
            | Note::Readiness {
                allocation_id, run, ..
            }
            | Note::SwapDeadline { allocation_id, run } => (allocation_id.clone(), *run),
            // Notes about no one workload's run (a sweep's list of orphans).
            #[allow(unreachable_patterns)]
            _ => return Some(note),
        };
        let Some(w) = self.workloads.get_mut(&id) else {
            return Some(note);
        };
        if let Some(i) = w.swap_leftovers.iter().position(|c| c.run == run) {
            if let Note::ShimExited { .. } = note {
                let gone = w.swap_leftovers.remove(i);
                shim_link::remove(&gone.dir);
                self.hold_ports();
            }
            return None;
        }
        let c = w.swap.as_ref().and_then(|p| p.container.as_deref());
        let pull = c.is_some_and(|c| c.pull_run == run);
        let candidate = c
            .and_then(|c| c.candidate.as_ref())
            .is_some_and(|c| c.run == run);
        match note {
            Note::Pulled { outcome, .. } if pull => self.swap_pulled(&id, outcome),
            Note::Pulling { .. } if pull => {}
            Note::ShimStarted { outcome, .. } if candidate => self.candidate_started(&id, outcome),
            Note::ShimExited { .. } if candidate => {
                let why = "the new container ended before it was ready".to_string();
                self.candidate_failed(&id, codes::SWAP_START_FAILED, why);
            }
            Note::Readiness { ready: true, .. } if candidate => self.candidate_ready(&id),
            Note::Readiness { .. } if candidate => {}
            Note::SwapDeadline { .. } => {
                if candidate {
                    self.candidate_late(&id);
                }
            }
            other => return Some(other),
        }
        None
    }

    fn swap_pulled(&mut self, id: &str, outcome: Result<String, crate::error::StartError>) {
        match outcome {
            Ok(digest) => {
                if let Some(c) = self.container_swap_mut(id) {
                    c.digest = Some(digest);
                }
                self.launch_candidate(id);
            }
            Err(e) => {
                let Some(cmd) = self.swap_cmd(id) else {
                    return;
                };
                let why = format!(
                    "the new image could not be pulled ({}: {e}); the old container keeps serving",
                    e.error_code().name
                );
                self.swap_failed(&cmd, codes::SWAP_START_FAILED, why);
            }
        }
    }

    fn swap_cmd(&self, id: &str) -> Option<SwapCommand> {
        Some(self.workloads.get(id)?.swap.as_ref()?.cmd.clone())
    }

    /// Starts the new container once both its image and its copy are here.
    fn launch_candidate(&mut self, id: &str) {
        let Some(w) = self.workloads.get(id) else {
            return;
        };
        let Some(p) = w.swap.as_ref() else {
            return;
        };
        let Some(c) = p.container.as_deref() else {
            return;
        };
        let (Some(digest), Some(copy)) = (c.digest.clone(), c.copy.clone()) else {
            return;
        };
        if c.candidate.is_some() || p.stage != SwapStage::Warming {
            return;
        }
        let cmd = p.cmd.clone();
        let image = c.image.clone();
        let old_port = w.port;
        let run = self.next_run;
        self.next_run += 1;
        let port = match old_port {
            Some(_) => match self.pick_port() {
                Ok(port) => Some(port),
                Err(e) => {
                    let why = format!("no port for the new container ({e}); the old one serves");
                    self.swap_failed(&cmd, codes::SWAP_START_FAILED, why);
                    return;
                }
            },
            None => None,
        };
        match self.spawn_candidate(id, &cmd, &copy, &image, digest, port, run) {
            Ok(candidate) => {
                let deadline = self.candidate_deadline(id);
                let Some(w) = self.workloads.get_mut(id) else {
                    return;
                };
                tracing::info!(
                    "allocation {id}: new container {} ({image}) started beside the old one, port {port:?}",
                    candidate.container.name
                );
                if let Some(p) = w.swap.as_mut() {
                    p.stage = SwapStage::Candidate;
                    if let Some(c) = p.container.as_deref_mut() {
                        c.candidate = Some(candidate);
                    }
                }
                let (notes, allocation_id) = (self.notes.clone(), id.to_string());
                tokio::spawn(async move {
                    tokio::time::sleep(deadline).await;
                    let _ = notes.send(Note::SwapDeadline { allocation_id, run });
                });
            }
            Err(e) => {
                let why =
                    format!("the new container could not be started: {e}; the old one serves");
                self.swap_failed(&cmd, codes::SWAP_START_FAILED, why);
            }
        }
    }

    /// The new container's ready wait: its probe's `ready_timeout_s`, or
    /// the start allowance without a probe.
    fn candidate_deadline(&self, id: &str) -> Duration {
        self.workloads
            .get(id)
            .and_then(|w| w.readiness.as_ref())
            .map_or(START_ALLOWANCE, |p| {
                Duration::from_secs(u64::from(p.ready_timeout_s))
            })
    }

    /// Writes the new container's shim dir and starts its shim.
    #[allow(clippy::too_many_arguments)]
    fn spawn_candidate(
        &mut self,
        id: &str,
        cmd: &SwapCommand,
        copy: &Path,
        image: &str,
        digest: String,
        port: Option<u16>,
        run: u64,
    ) -> Result<Candidate, CandidateError> {
        let w = self.workloads.get(id).ok_or(CandidateError::Gone)?;
        let host = self.containers.as_ref().ok_or(CandidateError::NoRuntime)?;
        let model_path = super::launch::model_path(&self.data_dir, copy, &cmd.model, w.uid)?;
        let old_spec = w.shim_dir.join(files::SPEC);
        let old: ShimSpec =
            files::read_json(&old_spec).map_err(|source| CandidateError::ShimFile {
                verb: "reading",
                path: old_spec.clone(),
                source,
            })?;
        let old_container = old
            .container
            .clone()
            .ok_or(CandidateError::NoOldContainer)?;
        let dir = candidate_dir(&self.data_dir, id, cmd.generation);
        if dir.exists() {
            // Left by an earlier agent's try of the same generation.
            shim_link::remove(&dir);
        }
        let name = format!(
            "{}-g{}",
            run_args::container_name(&host.node, id),
            cmd.generation
        );
        let env_file = dir.join(run_args::ENV_FILE);
        let argv = swap_args::swapped_argv(
            &old.argv,
            &SwapRun {
                name: name.clone(),
                port,
                model_host_path: Some(model_path.to_string_lossy().into_owned()),
                env_file: env_file.to_string_lossy().into_owned(),
                image: image.to_string(),
            },
        )?;
        let mut env = swapped_env(&old.env, &cmd.model, Path::new(MODEL_PATH));
        if let Some(p) = port {
            for (k, v) in env.iter_mut() {
                if k == "CALDERA_PORT" {
                    *v = p.to_string();
                }
            }
        }
        let container = ContainerShim {
            name,
            env_file,
            image_digest: Some(digest),
            ..old_container
        };
        let spec = ShimSpec {
            argv,
            env,
            port,
            generation: cmd.generation,
            model: Some(model_label(&cmd.model)),
            model_sha256: Some(cmd.model.sha256.clone()),
            epoch: w.epoch,
            container: Some(container.clone()),
            ..old
        };
        shim_link::create(&dir, &spec, self.lease).map_err(|source| CandidateError::ShimFile {
            verb: "writing",
            path: dir.clone(),
            source,
        })?;
        let child = match shim_link::spawn(&self.shim_command, &dir) {
            Ok(child) => child,
            Err(e) => {
                shim_link::remove(&dir);
                return Err(e.into());
            }
        };
        let shim = child.id().and_then(PidRecord::of);
        watch_shim(child, dir.clone(), self.notes.clone(), id.to_string(), run);
        Ok(Candidate {
            run,
            dir,
            port,
            container,
            image: image.to_string(),
            shim,
            pid: None,
            probe: None,
        })
    }

    /// The new container's shim said how its start went.
    fn candidate_started(
        &mut self,
        id: &str,
        outcome: Result<Option<PidRecord>, crate::error::StartError>,
    ) {
        let pid = match outcome {
            Ok(pid) => pid.map(|r| r.pid),
            Err(e) => {
                let why = format!("the new container could not be started: {e}");
                self.candidate_failed(id, codes::SWAP_START_FAILED, why);
                return;
            }
        };
        let notes = self.notes.clone();
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        let (uid, probe) = (w.uid, w.readiness.clone());
        let Some(p) = w.swap.as_mut() else {
            return;
        };
        let generation = p.cmd.generation;
        let Some(c) = p
            .container
            .as_deref_mut()
            .and_then(|c| c.candidate.as_mut())
        else {
            return;
        };
        c.pid = pid;
        match probe {
            Some(probe) => {
                let target = super::readiness::Target {
                    allocation_id: id.to_string(),
                    run: c.run,
                    generation,
                    port: c.port,
                    uid,
                };
                // A command probe runs inside the new container, as the
                // workload's own does inside its container.
                let inside = super::readiness::InContainer {
                    podman: c.container.podman.clone(),
                    name: c.container.name.clone(),
                };
                c.probe = super::readiness::watch_in(probe, target, Some(inside), notes);
            }
            None => self.candidate_ready(id),
        }
    }

    /// The new container's probe passed: the old one is asked to stop; its
    /// shim's end hands the workload over ([`Runtime::swap_takes_exit`]).
    fn candidate_ready(&mut self, id: &str) {
        let Some(w) = self.workloads.get_mut(id) else {
            return;
        };
        let Some(p) = w.swap.as_mut().filter(|p| p.stage == SwapStage::Candidate) else {
            return;
        };
        p.stage = SwapStage::Retiring;
        let grace = Duration::from_millis(p.cmd.grace_ms);
        tracing::info!(
            "allocation {id}: the new container is ready; stopping generation {}",
            w.generation
        );
        w.stop_probe();
        w.ready = Some(false);
        if let Err(e) = shim_link::request_stop(&w.shim_dir, grace) {
            tracing::error!(
                "allocation {id}: cannot ask the old shim to stop ({e}); removing its container"
            );
            if let Some(c) = &w.container {
                if let Err(e) = crate::container::podman::remove(&c.podman, &c.name) {
                    tracing::error!("allocation {id}: {e}");
                }
            }
        }
    }

    /// Past the ready wait with the new container not ready.
    fn candidate_late(&mut self, id: &str) {
        let waiting = self
            .workloads
            .get(id)
            .and_then(|w| w.swap.as_ref())
            .is_some_and(|p| p.stage == SwapStage::Candidate);
        if waiting {
            let secs = self.candidate_deadline(id).as_secs();
            let why = format!("the new container was not ready within {secs} s");
            self.candidate_failed(id, codes::SWAP_START_FAILED, why);
        }
    }

    /// The new container will not take over: it is stopped, the old one
    /// serves on, and the swap fails saying so.
    fn candidate_failed(&mut self, id: &str, code: codes::ErrorCode, why: String) {
        let Some(cmd) = self.swap_cmd(id) else {
            return;
        };
        let serving = self.workloads.get(id).map_or(0, |w| w.generation);
        let why = format!("{why}; the old container (generation {serving}) keeps serving");
        self.swap_failed(&cmd, code, why);
    }

    /// A swap that ends without its new container taking over: the new
    /// container (if one started) is stopped and kept track of until its
    /// shim ends (its dir is removed then, its port freed).
    pub(super) fn drop_candidate(w: &mut Workload, p: &mut PendingSwap) {
        let Some(c) = p.container.as_deref_mut().and_then(|c| c.candidate.take()) else {
            return;
        };
        if let Some(probe) = &c.probe {
            probe.abort();
        }
        tracing::info!(
            "allocation {}: stopping the new container {} (its swap ended without it)",
            w.allocation_id,
            c.container.name
        );
        if let Err(e) = shim_link::request_stop(&c.dir, Duration::ZERO) {
            tracing::error!(
                "allocation {}: {e}; removing its container",
                w.allocation_id
            );
            if let Err(e) = crate::container::podman::remove(&c.container.podman, &c.container.name)
            {
                tracing::error!("allocation {}: {e}", w.allocation_id);
            }
        }
        w.swap_leftovers.push(c);
    }

    /// The old container's shim ended while its swap's new container was
    /// ready: the new one becomes the workload. False when it was not (the
    /// old one's end is the workload's; the new one is stopped).
    pub(super) fn container_swap_takes_exit(&mut self, id: &str, mut p: PendingSwap) -> bool {
        let Some(w) = self.workloads.get_mut(id) else {
            return false;
        };
        let candidate = p
            .container
            .as_deref_mut()
            .and_then(|c| c.candidate.take_if(|_| p.stage == SwapStage::Retiring));
        let Some(c) = candidate else {
            Runtime::drop_candidate(w, &mut p);
            let why = "the old container ended during the swap".to_string();
            self.swap_failed(&p.cmd, codes::SWAP_START_FAILED, why);
            return false;
        };
        let old_dir = std::mem::replace(&mut w.shim_dir, c.dir.clone());
        let old_port = w.port;
        w.run = c.run;
        w.shim = c.shim.clone();
        w.shim_is_child = true;
        w.pid = c.pid;
        w.port = c.port;
        w.container = Some(c.container.clone());
        w.generation = p.cmd.generation;
        w.model = Some(model_label(&p.cmd.model));
        w.model_sha256 = Some(p.cmd.model.sha256.clone());
        w.probe = c.probe.clone();
        w.ready = Some(true);
        w.starting = false;
        let (task, epoch, generation, pid) = (w.task_id.clone(), w.epoch, w.generation, w.pid);
        shim_link::remove(&old_dir);
        self.hold_ports();
        tracing::info!(
            "allocation {id} swapped to generation {generation} ({}) in container {} ({}), port {:?}",
            model_label(&p.cmd.model),
            c.container.name,
            c.image,
            c.port
        );
        let swapped = WorkloadEventKind::Swapped {
            generation,
            model: model_label(&p.cmd.model),
            pid,
            port: c.port.filter(|port| Some(*port) != old_port),
            image: Some(c.image.clone()),
            image_digest: c.container.image_digest.clone(),
        };
        self.event(id, &task, epoch, swapped);
        let ready = WorkloadEventKind::Readiness {
            ready: true,
            generation,
            detail: "the new container passed its readiness probe before the old one stopped"
                .into(),
        };
        self.event(id, &task, epoch, ready);
        true
    }
}

/// The shim dirs an earlier agent left, one per allocation: where a swap's
/// new container ran beside the old one when that agent died, the old one
/// (the lowest generation: the one the control plane knows runs) is kept and
/// the newer one is stopped, its container removed and its dir forgotten;
/// the control plane sends the swap again.
pub(super) fn one_per_allocation(mut found: Vec<shim_link::Found>) -> Vec<shim_link::Found> {
    found.sort_by(|a, b| {
        let key = |f: &shim_link::Found| (f.spec.allocation_id.clone(), f.spec.generation);
        key(a).cmp(&key(b))
    });
    let mut kept: Vec<shim_link::Found> = Vec::new();
    for f in found {
        let same = kept
            .last()
            .is_some_and(|k| k.spec.allocation_id == f.spec.allocation_id);
        if !same {
            kept.push(f);
            continue;
        }
        tracing::warn!(
            "allocation {}: an unfinished swap's container (generation {}) is stopped;              the one it was to replace is kept",
            f.spec.allocation_id,
            f.spec.generation
        );
        if let Err(e) = shim_link::request_stop(&f.dir, Duration::ZERO) {
            tracing::warn!("{}: {e}", f.dir.display());
        }
        if let Some(c) = &f.spec.container {
            if let Err(e) = crate::container::podman::remove(&c.podman, &c.name) {
                tracing::warn!("allocation {}: {e}", f.spec.allocation_id);
            }
        }
        shim_link::remove(&f.dir);
    }
    kept
}

/// The image the container of shim dir `dir` runs, from its command line.
fn running_image(dir: &Path) -> Option<String> {
    let spec: ShimSpec = files::read_json(&dir.join(files::SPEC)).ok()?;
    swap_args::image_of(&spec.argv).map(str::to_string)
}

/// Records `generation` in the shim dir's spec (an agent adopting it
/// reports the generation that runs).
fn set_generation(dir: &Path, generation: u32) -> Result<(), CandidateError> {
    let path = dir.join(files::SPEC);
    let mut spec: ShimSpec =
        files::read_json(&path).map_err(|source| CandidateError::ShimFile {
            verb: "reading",
            path: path.clone(),
            source,
        })?;
    spec.generation = generation;
    files::write_json(&path, &spec).map_err(|source| CandidateError::ShimFile {
        verb: "writing",
        path,
        source,
    })
}

/// Why a swap's new container could not be set up beside the old one (the
/// old one keeps serving), or its generation not recorded.
#[derive(Debug, thiserror::Error)]
enum CandidateError {
    #[error("the workload is gone")]
    Gone,
    #[error("no container runtime")]
    NoRuntime,
    #[error("the old shim runs no container")]
    NoOldContainer,
    #[error("{verb} {}: {source}", path.display())]
    ShimFile {
        verb: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    OldLine(#[from] swap_args::OldLine),
    #[error(transparent)]
    Start(#[from] crate::error::StartError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(root: &Path, allocation: &str, generation: u32) -> shim_link::Found {
        let dir = root.join(format!("{allocation}~g{generation}"));
        std::fs::create_dir_all(&dir).unwrap();
        let spec: ShimSpec = serde_json::from_value(serde_json::json!({
            "allocation_id": allocation, "task_id": "t", "epoch": 1, "argv": ["x"],
            "env": [], "cwd": "/", "cgroup_procs": [], "log": "/l", "stop_grace_ms": 1,
            "gpu_indices": [], "gpu_memory_mb": 0, "checkpoint_dir": "/c",
            "generation": generation,
        }))
        .unwrap();
        shim_link::Found {
            dir,
            spec,
            shim: None,
            workload: None,
            exit: None,
        }
    }

    #[test]
    fn an_unfinished_swaps_new_container_is_dropped_and_the_old_one_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        let scanned = vec![
            found(tmp.path(), "a", 2),
            found(tmp.path(), "b", 0),
            found(tmp.path(), "a", 0),
        ];
        let newer = scanned[0].dir.clone();
        let kept = one_per_allocation(scanned);
        let ids: Vec<(&str, u32)> = kept
            .iter()
            .map(|f| (f.spec.allocation_id.as_str(), f.spec.generation))
            .collect();
        assert_eq!(ids, vec![("a", 0), ("b", 0)]);
        assert!(!newer.exists(), "the newer one's dir is forgotten");
        assert!(kept.iter().all(|f| f.dir.exists()));
    }
}
