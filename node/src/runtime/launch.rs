//! Preparing a workload's environment before its process starts: checkpoint
//! dir, log file, cgroup and environment variables; and the waiter that turns
//! the process's end into a [`Note`].
use super::{logs, safe_file_name, Note};
use crate::cgroup::{Isolation, WorkloadCgroup};
use crate::error::StartError;
use caldera_spec::wire::StartCommand;
use std::fs::File;
use std::path::{Path, PathBuf};
use tokio::process::Child;
use tokio::sync::mpsc::UnboundedSender;

/// What preparing produced.
pub struct Prepared {
    pub checkpoint_dir: PathBuf,
    pub log_path: PathBuf,
    /// The task's log, opened for appending (both output streams go here).
    pub log: File,
}

/// Creates the checkpoint dir (the command's, relative to the data dir, or
/// `<data-dir>/checkpoints/<task>`) and opens the task's log.
pub fn prepare(data_dir: &Path, cmd: &StartCommand) -> Result<Prepared, StartError> {
    let checkpoint_dir = match &cmd.checkpoint_dir {
        // An absolute dir replaces data_dir in the join.
        Some(dir) => data_dir.join(dir),
        None => data_dir
            .join("checkpoints")
            .join(safe_file_name(&cmd.task_id)),
    };
    std::fs::create_dir_all(&checkpoint_dir).map_err(|source| StartError::Prepare {
        path: checkpoint_dir.clone(),
        source,
    })?;
    let log_path = logs::log_path(data_dir, &cmd.task_id);
    let log = logs::open_for_append(&log_path).map_err(|source| StartError::Prepare {
        path: log_path.clone(),
        source,
    })?;
    Ok(Prepared {
        checkpoint_dir,
        log_path,
        log,
    })
}

/// The workload's cgroup and the isolation label its `Ready` event carries. A
/// cgroup that cannot be set up degrades to no limits, and the label says so.
pub fn isolate(isolation: &Isolation, cmd: &StartCommand) -> (Option<WorkloadCgroup>, String) {
    match isolation.create(&cmd.allocation_id, cmd.cpu_milli, cmd.memory_mb) {
        Ok(cg) => (cg, isolation.label()),
        Err(e) => {
            tracing::warn!(
                "allocation {}: cgroup setup failed, running without limits: {e}",
                cmd.allocation_id
            );
            (None, format!("none (cgroup setup failed: {e})"))
        }
    }
}

/// The command's env plus what every workload is told about its allocation.
pub fn workload_env(cmd: &StartCommand, checkpoint_dir: &Path) -> Vec<(String, String)> {
    let gpus: Vec<String> = cmd.gpu_indices.iter().map(u32::to_string).collect();
    let mut env: Vec<(String, String)> = cmd
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.push(("CUDA_VISIBLE_DEVICES".into(), gpus.join(",")));
    // The control plane keys tasks `tenant/id`; the workload sees its
    // tenant's own ids, as the API shows them, and the tenant beside them.
    let own = |k: &str| caldera_spec::local_id(k).to_string();
    env.push(("CALDERA_TASK_ID".into(), own(&cmd.task_id)));
    env.push(("CALDERA_ALLOCATION_ID".into(), own(&cmd.allocation_id)));
    if let Some(tenant) = caldera_spec::tenant_of(&cmd.task_id) {
        env.push(("CALDERA_TENANT".into(), tenant.to_string()));
    }
    env.push((
        "CALDERA_GPU_MEMORY_MB".into(),
        cmd.gpu_memory_mb.to_string(),
    ));
    env.push((
        "CALDERA_CHECKPOINT_DIR".into(),
        checkpoint_dir.to_string_lossy().into_owned(),
    ));
    if let Some(resume) = &cmd.resume_from {
        env.push(("CALDERA_RESUME_FROM".into(), resume.clone()));
    }
    env
}

/// Waits for the process in the background and reports its end as a note.
pub fn watch_exit(mut child: Child, notes: UnboundedSender<Note>, allocation_id: String, run: u64) {
    tokio::spawn(async move {
        let status = child.wait().await.map_err(|e| e.to_string());
        let _ = notes.send(Note::Exited {
            allocation_id,
            run,
            status,
        });
    });
}
