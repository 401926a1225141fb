//! Starts that run in a container. Between the Preparing event and the
//! shim, the start waits in `pulling` while its image is made present
//! ([`crate::container::pull::ensure`], off the agent's loop; progress comes
//! back as [`Note::Pulling`], the outcome as [`Note::Pulled`]); then it is
//! launched as any start, except that its shim runs `podman run` (see
//! [`crate::container::run_args`]) with the workload's mounts, environment
//! and limits. A stop while pulling ends it at once (nothing runs yet).
use super::launch::{self, Prepared, Seen};
use super::{Note, Runtime, Workload};
use crate::cgroup::WorkloadCgroup;
use crate::container::engine::Engine;
use crate::container::pull::{self, Puller};
use crate::container::run_args::{self, RunPlan, CHECKPOINTS, MODEL_PATH, SCRATCH};
use crate::error::StartError;
use crate::shim::files::ContainerShim;
use caldera_spec::container::{ContainerStart, Mount, PullProgress, RuntimeInfo};
use caldera_spec::wire::{StartCommand, WorkloadEventKind};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How this node runs containers, once its engine was found working.
#[derive(Debug, Clone)]
pub struct ContainerHost {
    pub engine: Engine,
    /// The agent's identity ([`run_args::agent_identity`]): its containers' label.
    pub node: String,
    pub pids_limit: u32,
    pub puller: Puller,
}

/// A start waiting for its image.
#[derive(Debug)]
pub struct Pulling {
    pub cmd: StartCommand,
    pub model_path: Option<PathBuf>,
}

/// What a container launch adds to a start's shim spec.
pub struct ContainerParts {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub shim: ContainerShim,
}

impl Runtime {
    /// Runs starts with an image in containers through `host`; None (no
    /// engine) refuses them. `reported`: the runtimes the inventory lists.
    pub fn set_containers(&mut self, host: Option<ContainerHost>, reported: Vec<RuntimeInfo>) {
        self.containers = host;
        self.runtimes = reported;
    }

    /// The runtimes this node offers, for the inventory.
    pub fn runtimes(&self) -> Vec<RuntimeInfo> {
        match self.runtimes.is_empty() {
            true => vec![crate::container::engine::process_runtime()],
            false => self.runtimes.clone(),
        }
    }

    /// The engine, when containers run here.
    pub fn container_host(&self) -> Option<&ContainerHost> {
        self.containers.as_ref()
    }

    /// Holds `cmd` in pulling and pulls its image off the loop; false when
    /// it was refused at once (no container runtime here).
    pub(super) fn pull(&mut self, cmd: &StartCommand, model_path: Option<PathBuf>) -> bool {
        let (Some(host), Some(c)) = (&self.containers, &cmd.container) else {
            let e = StartError::Container(
                "the task runs in a container and this node's container runtime is down".into(),
            );
            self.start_failed(&cmd.allocation_id, &cmd.task_id, cmd.epoch, &e);
            return false;
        };
        let run = self.next_run;
        self.next_run += 1;
        let log = super::logs::log_path(&self.data_dir, &cmd.task_id);
        let mut w = Workload::new(cmd, run, Path::new(""), log);
        w.shim_dir = super::shim_link::dir_of(&self.data_dir, &cmd.allocation_id);
        w.pulling = Some(Box::new(Pulling {
            cmd: cmd.clone(),
            model_path,
        }));
        self.workloads.insert(cmd.allocation_id.clone(), w);
        let (puller, start, notes) = (host.puller.clone(), c.clone(), self.notes.clone());
        let id = cmd.allocation_id.clone();
        tokio::spawn(async move {
            let progress_notes = notes.clone();
            let progress_id = id.clone();
            let report = move |progress: PullProgress| {
                let _ = progress_notes.send(Note::Pulling {
                    allocation_id: progress_id.clone(),
                    run,
                    progress,
                });
            };
            let outcome = pull::ensure(&puller, &id, &start, report)
                .await
                .map(|p| p.digest)
                .map_err(StartError::from);
            let _ = notes.send(Note::Pulled {
                allocation_id: id,
                run,
                outcome,
            });
        });
        true
    }

    /// The pull of run `run` made progress.
    pub(super) fn pulling(&mut self, id: &str, run: u64, progress: PullProgress) {
        let Some(w) = self.workloads.get(id) else {
            return;
        };
        if w.run != run || w.pulling.is_none() {
            return;
        }
        let (task, epoch) = (w.task_id.clone(), w.epoch);
        self.event(id, &task, epoch, WorkloadEventKind::Pulling(progress));
    }

    /// The pull of run `run` ended: launch with the digest, or fail.
    pub(super) fn pulled(&mut self, id: &str, run: u64, outcome: Result<String, StartError>) {
        let still_waiting = self
            .workloads
            .get(id)
            .is_some_and(|w| w.run == run && w.pulling.is_some());
        if !still_waiting {
            return;
        }
        let Some(w) = self.workloads.remove(id) else {
            return;
        };
        let Some(p) = w.pulling else {
            return;
        };
        let mut cmd = p.cmd;
        // Under the epoch a welcome may have moved it to.
        cmd.epoch = w.epoch;
        match outcome {
            Ok(digest) => self.launch_with(&cmd, p.model_path, Some(digest)),
            Err(e) => self.start_failed(id, &cmd.task_id, cmd.epoch, &e),
        }
    }

    /// Looks for this agent's containers whose allocation it no longer
    /// holds, off the agent's loop (a podman waiting on its lock must not
    /// hold up heartbeats): the listing comes back as [`Note::Orphans`].
    pub fn sweep_orphans(&self) {
        let Some(host) = &self.containers else {
            return;
        };
        let (podman, node, notes) = (
            host.engine.podman.clone(),
            host.node.clone(),
            self.notes.clone(),
        );
        tokio::task::spawn_blocking(move || {
            match crate::container::orphans::list(&podman, &node) {
                Ok(found) => {
                    let _ = notes.send(Note::Orphans(found));
                }
                Err(e) => tracing::warn!("cannot look for orphaned containers: {e}"),
            }
        });
    }

    /// A sweep's listing: those whose allocation this runtime does not hold
    /// now (a start made after the listing is held, so never among them)
    /// are removed, off the loop.
    pub(super) fn orphans_found(&mut self, found: Vec<crate::container::orphans::Labelled>) {
        let Some(host) = &self.containers else {
            return;
        };
        // A filesystem outlives its container only by a lost finish.
        self.release_orphaned_scratch();
        let doomed: Vec<_> = found
            .into_iter()
            .filter(|c| {
                !self
                    .workloads
                    .get(&c.allocation_id)
                    .is_some_and(|w| w.is_alive())
            })
            .collect();
        if doomed.is_empty() {
            return;
        }
        let podman = host.engine.podman.clone();
        tokio::task::spawn_blocking(move || {
            crate::container::orphans::remove_listed(&podman, &doomed);
        });
    }

    /// Gives a container start its scratch filesystem of `disk_mb` (see
    /// [`crate::scratch_volume`]); the words its Ready event adds about it.
    pub(super) fn size_scratch(
        &self,
        cmd: &StartCommand,
        uid: Option<u32>,
    ) -> Result<String, StartError> {
        if cmd.disk_mb == 0 {
            return Ok(String::new());
        }
        match self.scratch.size(&cmd.allocation_id, cmd.disk_mb, uid) {
            Ok(true) => Ok(format!("; scratch {} MiB", cmd.disk_mb)),
            Ok(false) => Ok(format!("; {}", self.scratch.label())),
            Err(e) => Err(StartError::Prepare {
                path: self.scratch.image_of(&cmd.allocation_id),
                source: std::io::Error::other(e.to_string()),
            }),
        }
    }

    /// Unmounts the scratch filesystems of allocations this runtime does
    /// not hold alive, and deletes their images (blocking: at agent start,
    /// after adoption, and on a sweep); returns how many.
    pub fn release_orphaned_scratch(&self) -> usize {
        let held: BTreeSet<String> = self
            .workloads
            .values()
            .filter(|w| w.is_alive())
            .map(|w| w.allocation_id.clone())
            .collect();
        self.scratch.release_all_but(&held)
    }

    /// Removes this agent's containers whose allocation it no longer holds
    /// (blocking: at agent start, before the session); returns how many.
    pub fn remove_orphaned_containers(&self) -> usize {
        let Some(host) = &self.containers else {
            return 0;
        };
        let held: BTreeSet<String> = self
            .workloads
            .values()
            .filter(|w| w.is_alive())
            .map(|w| w.allocation_id.clone())
            .collect();
        crate::container::orphans::remove(&host.engine.podman, &host.node, &held).len()
    }
}

/// The container's command line, environment and shim part for `cmd`,
/// whose dirs `prepared` made; Err names what cannot be handed to podman.
#[allow(clippy::too_many_arguments)]
pub fn parts(
    host: &ContainerHost,
    cmd: &StartCommand,
    c: &ContainerStart,
    prepared: &Prepared,
    tree: &Path,
    uid: Option<u32>,
    cgroup: Option<&WorkloadCgroup>,
    shim_dir: &Path,
    image_digest: Option<String>,
) -> Result<ContainerParts, StartError> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let inside_tree = |p: &Path| {
        p.strip_prefix(tree)
            .ok()
            .map(|rel| match rel.as_os_str().is_empty() {
                true => PathBuf::from(CHECKPOINTS),
                false => Path::new(CHECKPOINTS).join(rel),
            })
    };
    let checkpoint_dir =
        inside_tree(&prepared.checkpoint_dir).unwrap_or_else(|| PathBuf::from(CHECKPOINTS));
    let resume_from = cmd
        .resume_from
        .as_ref()
        .map(|r| inside_tree(Path::new(r)).map_or_else(|| r.clone(), |p| path(&p)));
    let n = cmd.gpu_indices.len() as u32;
    let seen = Seen {
        checkpoint_dir: path(&checkpoint_dir),
        scratch_dir: SCRATCH.into(),
        model_path: prepared.model_path.as_ref().map(|_| MODEL_PATH.to_string()),
        resume_from,
        // The container sees only its GPUs, numbered from 0.
        cuda_visible_devices: (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(","),
        inherit: false,
    };
    let env = launch::env_as_seen(cmd, &seen, prepared.port);
    for (k, v) in &env {
        run_args::check_env_var(k, v).map_err(|e| StartError::Container(e.to_string()))?;
    }
    let mut mounts = vec![
        mount(tree, CHECKPOINTS, false),
        mount(&prepared.scratch_dir, SCRATCH, false),
    ];
    if let Some(model) = &prepared.model_path {
        mounts.push(mount(model, MODEL_PATH, true));
    }
    mounts.extend(c.volumes.iter().cloned());
    for m in &mounts {
        run_args::check_mount(m).map_err(|e| StartError::Container(e.to_string()))?;
    }
    let memory_dir = cgroup.and_then(WorkloadCgroup::memory_dir);
    let cgroup_parent = memory_dir
        .as_deref()
        .and_then(crate::container::cgroups::parent_of);
    let name = run_args::container_name(&host.node, &cmd.allocation_id);
    let env_file = shim_dir.join(run_args::ENV_FILE);
    let plan = RunPlan {
        name: name.clone(),
        allocation_id: cmd.allocation_id.clone(),
        node: host.node.clone(),
        cgroup_parent: cgroup_parent.clone(),
        cpu_milli: cmd.cpu_milli,
        memory_mb: cmd.memory_mb,
        pids_limit: host.pids_limit,
        user: uid.map(|u| (u, u)),
        gpu_indices: cmd.gpu_indices.clone(),
        mounts,
        env_file: env_file.clone(),
        port: prepared.port,
        image: c.image.clone(),
        command: cmd.command.clone(),
    };
    let mut argv = vec![path(&host.engine.podman)];
    argv.extend(plan.argv());
    Ok(ContainerParts {
        argv,
        env,
        shim: ContainerShim {
            name,
            podman: host.engine.podman.clone(),
            env_file,
            cgroup_parent,
            image_digest,
        },
    })
}

fn mount(host: &Path, inside: &str, read_only: bool) -> Mount {
    Mount {
        host_path: host.to_string_lossy().into_owned(),
        container_path: inside.to_string(),
        read_only,
    }
}
