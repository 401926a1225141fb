//! Preparing a workload's environment before its shim starts it: the task's
//! checkpoint tree, a scratch dir, the tenant's log dir and file (all owned by
//! the tenant's uid, mode 0700), the cgroup, and the environment variables.
use super::{logs, safe_file_name};
use crate::cgroup::{Isolation, WorkloadCgroup};
use crate::error::StartError;
use crate::shim::files::ShimSpec;
use crate::tenancy::{own_dir, own_file};
use caldera_spec::wire::StartCommand;
use std::path::{Component, Path, PathBuf};

/// Variables of the agent's own environment a workload also gets; nothing
/// else of it (the agent's may hold its join token).
const INHERITED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ"];

/// What preparing produced.
pub struct Prepared {
    pub checkpoint_dir: PathBuf,
    pub scratch_dir: PathBuf,
    pub log_path: PathBuf,
    /// The verified cached copy of the task's model, if it names one.
    pub model_path: Option<PathBuf>,
    /// The workload's port on the node (CALDERA_PORT); None for a reservation.
    pub port: Option<u16>,
}

/// The task's own checkpoint tree, `<data-dir>/checkpoints/<task>`, and in it
/// the command's relative dir, if any. A dir that could climb out (absolute,
/// or with `..`; refused at submission too) is refused here as well.
pub fn checkpoint_dir(data_dir: &Path, cmd: &StartCommand) -> Result<PathBuf, StartError> {
    let tree = data_dir
        .join("checkpoints")
        .join(safe_file_name(&cmd.task_id));
    let Some(dir) = &cmd.checkpoint_dir else {
        return Ok(tree);
    };
    let inside = Path::new(dir)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !inside {
        return Err(StartError::Prepare {
            path: PathBuf::from(dir),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "checkpoint_dir must stay inside the task's own tree (relative, no '..')",
            ),
        });
    }
    Ok(tree.join(dir))
}

/// The task's whole checkpoint tree, `<data-dir>/checkpoints/<task>` (a
/// container gets it mounted).
pub fn checkpoint_tree(data_dir: &Path, cmd: &StartCommand) -> PathBuf {
    data_dir
        .join("checkpoints")
        .join(safe_file_name(&cmd.task_id))
}

/// Creates the dirs and the log file, owned by `uid` where there is one.
pub fn prepare(
    data_dir: &Path,
    cmd: &StartCommand,
    uid: Option<u32>,
) -> Result<Prepared, StartError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StartError::Prepare { path, source }
    };
    let checkpoint_dir = checkpoint_dir(data_dir, cmd)?;
    let tree = data_dir
        .join("checkpoints")
        .join(safe_file_name(&cmd.task_id));
    own_dir(&tree, uid).map_err(err(&tree))?;
    own_dir(&checkpoint_dir, uid).map_err(err(&checkpoint_dir))?;
    let scratch_dir = data_dir
        .join("scratch")
        .join(safe_file_name(&cmd.allocation_id));
    own_dir(&scratch_dir, uid).map_err(err(&scratch_dir))?;
    let log_path = logs::log_path(data_dir, &cmd.task_id);
    if let Some(log_dir) = log_path.parent() {
        own_dir(log_dir, uid).map_err(err(log_dir))?;
    }
    own_file(&log_path, uid).map_err(err(&log_path))?;
    Ok(Prepared {
        checkpoint_dir,
        scratch_dir,
        log_path,
        model_path: None,
        port: None,
    })
}

/// Where the workload opens its model: `copy` (the verified copy) itself
/// for a workload running as the agent, else a link to it that only the
/// uids allowed to use the version can open (see [`crate::cache::exposure`]).
pub fn model_path(
    data_dir: &Path,
    copy: &Path,
    model: &caldera_spec::wire::ModelMount,
    uid: Option<u32>,
) -> Result<PathBuf, StartError> {
    use crate::cache::exposure::{expose, Audience};
    match Audience::of(uid, model.private) {
        Audience::Agent => Ok(copy.to_path_buf()),
        audience => {
            let layout = crate::cache::layout::Layout::under(data_dir);
            expose(&layout, &model.sha256, audience).map_err(|source| StartError::Prepare {
                path: copy.to_path_buf(),
                source,
            })
        }
    }
}

/// A workload's cgroup could not be set up: it runs without limits, and
/// these words are its isolation label.
#[derive(Debug, thiserror::Error)]
#[error("none (cgroup setup failed: {0})")]
pub struct NoCgroup(#[source] pub std::io::Error);

/// The workload's cgroup, or why not when it cannot be set up (it then
/// runs without limits, and its label says so).
pub fn isolate(
    isolation: &Isolation,
    cmd: &StartCommand,
    deny_devices: &[(u32, u32)],
) -> Result<Option<WorkloadCgroup>, NoCgroup> {
    isolation
        .create(
            &cmd.allocation_id,
            cmd.cpu_milli,
            cmd.memory_mb,
            deny_devices,
        )
        .map_err(|e| {
            tracing::warn!(
                "allocation {}: cgroup setup failed, running without limits: {e}",
                cmd.allocation_id
            );
            NoCgroup(e)
        })
}

/// The paths and devices a workload is told about, as it sees them: the
/// host's for a process, the mount points for a container.
pub struct Seen {
    pub checkpoint_dir: String,
    pub scratch_dir: String,
    pub model_path: Option<String>,
    pub resume_from: Option<String>,
    pub cuda_visible_devices: String,
    /// Inherit a few of the agent's variables ([`INHERITED_ENV`]); a
    /// container keeps its image's instead.
    pub inherit: bool,
}

impl Seen {
    /// A host process sees the host's paths and GPU indices.
    pub fn host(cmd: &StartCommand, prepared: &Prepared) -> Seen {
        let gpus: Vec<String> = cmd.gpu_indices.iter().map(u32::to_string).collect();
        let path = |p: &Path| p.to_string_lossy().into_owned();
        Seen {
            checkpoint_dir: path(&prepared.checkpoint_dir),
            scratch_dir: path(&prepared.scratch_dir),
            model_path: prepared.model_path.as_deref().map(path),
            resume_from: cmd.resume_from.clone(),
            cuda_visible_devices: gpus.join(","),
            inherit: true,
        }
    }
}

/// A few variables of the agent's, the command's env, then what every
/// workload is told about its allocation (these win).
pub fn workload_env(cmd: &StartCommand, prepared: &Prepared) -> Vec<(String, String)> {
    env_as_seen(cmd, &Seen::host(cmd, prepared), prepared.port)
}

/// [`workload_env`] with the paths as `seen` says them.
pub fn env_as_seen(cmd: &StartCommand, seen: &Seen, port: Option<u16>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = match seen.inherit {
        true => INHERITED_ENV
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect(),
        false => Vec::new(),
    };
    let scratch = seen.scratch_dir.clone();
    env.push(("HOME".into(), scratch.clone()));
    env.push(("TMPDIR".into(), scratch.clone()));
    env.extend(cmd.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.push((
        "CUDA_VISIBLE_DEVICES".into(),
        seen.cuda_visible_devices.clone(),
    ));
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
    env.push(("CALDERA_CHECKPOINT_DIR".into(), seen.checkpoint_dir.clone()));
    env.push(("CALDERA_SCRATCH_DIR".into(), scratch));
    if let Some(port) = port {
        env.push(("CALDERA_PORT".into(), port.to_string()));
    }
    if let Some(resume) = &seen.resume_from {
        env.push(("CALDERA_RESUME_FROM".into(), resume.clone()));
    }
    if let (Some(model), Some(path)) = (&cmd.model, &seen.model_path) {
        env.extend(model_env(model, Path::new(path)));
    }
    env
}

/// The variables naming the workload's model copy: CALDERA_MODEL_PATH,
/// _NAME and _VERSION, in that order.
const MODEL_VARS: [&str; 3] = [
    "CALDERA_MODEL_PATH",
    "CALDERA_MODEL_NAME",
    "CALDERA_MODEL_VERSION",
];

/// [`MODEL_VARS`] for `model`'s copy at `path`.
fn model_env(model: &caldera_spec::wire::ModelMount, path: &Path) -> [(String, String); 3] {
    [
        (MODEL_VARS[0].into(), path.to_string_lossy().into_owned()),
        (MODEL_VARS[1].into(), model.name.clone()),
        (MODEL_VARS[2].into(), model.version.clone()),
    ]
}

/// What the shim is told: the command, its environment, identity, cgroup,
/// log, and the grace it gives the workload when the lease runs out.
pub fn shim_spec(
    cmd: &StartCommand,
    prepared: Prepared,
    uid: Option<u32>,
    cgroup: Option<&WorkloadCgroup>,
    lease_grace: std::time::Duration,
) -> ShimSpec {
    let port = prepared.port;
    ShimSpec {
        allocation_id: cmd.allocation_id.clone(),
        task_id: cmd.task_id.clone(),
        epoch: cmd.epoch,
        argv: cmd.command.clone(),
        env: workload_env(cmd, &prepared),
        cwd: prepared.scratch_dir,
        uid,
        gid: uid,
        cgroup_procs: cgroup.map(|c| c.procs_paths()).unwrap_or_default(),
        cgroup_kill: cgroup.and_then(|c| c.kill_path()),
        log: prepared.log_path,
        stop_grace_ms: lease_grace.as_millis() as u64,
        gpu_indices: cmd.gpu_indices.clone(),
        gpu_memory_mb: cmd.gpu_memory_mb,
        checkpoint_dir: prepared.checkpoint_dir,
        model_sha256: cmd.model.as_ref().map(|m| m.sha256.clone()),
        port,
        readiness: cmd.readiness.clone(),
        generation: 0,
        model: cmd.model.as_ref().map(model_label),
        hide_processes: uid.is_some() && crate::proc_hiding::check().is_ok(),
        container: None,
        memory_cgroup: cgroup.and_then(|c| c.memory_dir()),
    }
}

/// `name:version` of a model mount, as events and records name it.
pub fn model_label(m: &caldera_spec::wire::ModelMount) -> String {
    format!("{}:{}", m.name, m.version)
}

/// The workload's environment for another model: the same variables, with
/// CALDERA_MODEL_PATH / _NAME / _VERSION (and nothing else) set to `model`'s.
pub fn swapped_env(
    env: &[(String, String)],
    model: &caldera_spec::wire::ModelMount,
    path: &Path,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| !MODEL_VARS.contains(&k.as_str()))
        .cloned()
        .collect();
    env.extend(model_env(model, path));
    env
}

#[cfg(test)]
mod tests {
    use super::swapped_env;
    use caldera_spec::wire::ModelMount;
    use std::path::Path;

    #[test]
    fn a_swapped_env_changes_the_model_variables_and_nothing_else() {
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let before = vec![
            pair("CALDERA_PORT", "20001"),
            pair("CALDERA_MODEL_PATH", "/cache/v3"),
            pair("CUDA_VISIBLE_DEVICES", "1"),
            pair("CALDERA_MODEL_NAME", "m"),
            pair("CALDERA_MODEL_VERSION", "v3"),
            pair("TOKEN", "x"),
        ];
        let model = ModelMount {
            name: "m".into(),
            version: "v4".into(),
            sha256: "ab".repeat(32),
            size_bytes: 1,
            private: false,
            owner: None,
        };
        let after = swapped_env(&before, &model, Path::new("/cache/v4"));
        assert_eq!(
            after,
            vec![
                pair("CALDERA_PORT", "20001"),
                pair("CUDA_VISIBLE_DEVICES", "1"),
                pair("TOKEN", "x"),
                pair("CALDERA_MODEL_PATH", "/cache/v4"),
                pair("CALDERA_MODEL_NAME", "m"),
                pair("CALDERA_MODEL_VERSION", "v4"),
            ]
        );
    }

    #[test]
    fn a_workload_without_a_cgroup_is_labelled_with_the_io_error_kept_as_source() {
        let no = super::NoCgroup(std::io::Error::from_raw_os_error(libc::EACCES));
        assert_eq!(
            no.to_string(),
            format!(
                "none (cgroup setup failed: {})",
                std::io::Error::from_raw_os_error(libc::EACCES)
            )
        );
        let source = std::error::Error::source(&no).map(|s| s.to_string());
        assert_eq!(source, Some(no.0.to_string()));
    }
}
