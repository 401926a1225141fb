//! The `podman run` command line of a swap's new container, made from the
//! one the old container runs: everything that places it on its slice
//! (cgroup parent, cpus, memory, pids limit, uid, GPUs, the checkpoint tree
//! and scratch mounts, data volumes, labels) stays as it was, so the new
//! container lands on the same slice; only its name, its port, the model
//! copy it mounts, its env file and its image change. The old line is read
//! as [`super::run_args::RunPlan::argv`] writes it: `podman run`, flags
//! without a value (`--rm`, `--x=y`), flags with one, then the image and
//! the command.
use super::run_args::MODEL_PATH;

/// What a swap's new container changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapRun {
    pub name: String,
    /// Its port on the host and inside (None: it publishes none).
    pub port: Option<u16>,
    /// The host path of the new version's copy, mounted read-only at
    /// [`MODEL_PATH`] (None: the old line mounts no model).
    pub model_host_path: Option<String>,
    pub env_file: String,
    pub image: String,
}

/// Flags [`super::run_args::RunPlan::argv`] writes without a separate value.
fn standalone(arg: &str) -> bool {
    arg == "--rm" || arg == "--init" || arg.contains('=')
}

/// What in the old container's command line is not as the agent wrote it,
/// so the new one cannot be made from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OldLine {
    #[error("the old container's command line is empty")]
    Empty,
    #[error("the old container was not started by 'podman run' ({0})")]
    NotRun(String),
    #[error("the old container's {0} has no value")]
    NoValue(String),
    #[error("the old container's command line names no image")]
    NoImage,
}

/// The new container's argv from the old one's (`podman` first, as the
/// shim runs it); Err says what in the old line is not as expected.
pub fn swapped_argv(old: &[String], new: &SwapRun) -> Result<Vec<String>, OldLine> {
    let (Some(podman), Some(run)) = (old.first(), old.get(1)) else {
        return Err(OldLine::Empty);
    };
    if run != "run" {
        return Err(OldLine::NotRun(run.clone()));
    }
    let mut out = vec![podman.clone(), run.clone()];
    let mut i = 2;
    let mut published = false;
    while let Some(arg) = old.get(i) {
        if !arg.starts_with("--") {
            break;
        }
        if standalone(arg) {
            out.push(arg.clone());
            i += 1;
            continue;
        }
        let Some(value) = old.get(i + 1) else {
            return Err(OldLine::NoValue(arg.clone()));
        };
        let value = match arg.as_str() {
            "--name" => new.name.clone(),
            "--env-file" => new.env_file.clone(),
            "--publish" => {
                published = true;
                match new.port {
                    Some(p) => format!("{p}:{p}"),
                    None => {
                        i += 2;
                        continue;
                    }
                }
            }
            "--volume" if is_model_mount(value) => match &new.model_host_path {
                Some(host) => format!("{host}:{MODEL_PATH}:ro"),
                None => value.clone(),
            },
            _ => value.clone(),
        };
        out.push(arg.clone());
        out.push(value);
        i += 2;
    }
    let Some(_old_image) = old.get(i) else {
        return Err(OldLine::NoImage);
    };
    if let (Some(p), false) = (new.port, published) {
        // The old one published none (it had no port): the new one's goes
        // before the image like every other flag.
        out.push("--publish".into());
        out.push(format!("{p}:{p}"));
    }
    out.push(new.image.clone());
    out.extend(old[i + 1..].iter().cloned());
    Ok(out)
}

/// The image a `podman run` line runs (as [`swapped_argv`] reads the line).
pub fn image_of(argv: &[String]) -> Option<&str> {
    if argv.get(1).map(String::as_str) != Some("run") {
        return None;
    }
    let mut i = 2;
    while let Some(arg) = argv.get(i) {
        if !arg.starts_with("--") {
            return Some(arg);
        }
        i += if standalone(arg) { 1 } else { 2 };
    }
    None
}

/// `HOST:/caldera/model:ro`: the model copy's mount.
fn is_model_mount(value: &str) -> bool {
    value.ends_with(&format!(":{MODEL_PATH}:ro"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::run_args::RunPlan;
    use caldera_spec::container::Mount;
    use std::path::PathBuf;

    fn plan() -> RunPlan {
        let mount = |h: &str, c: &str, ro| Mount {
            host_path: h.into(),
            container_path: c.into(),
            read_only: ro,
        };
        RunPlan {
            name: "caldera-a1-0000beef".into(),
            allocation_id: "team/svc.r0.1".into(),
            node: "n1-12345678".into(),
            cgroup_parent: Some("caldera/a1".into()),
            cpu_milli: 1500,
            memory_mb: 512,
            pids_limit: 4096,
            user: Some((20001, 20001)),
            gpu_indices: vec![1, 3],
            mounts: vec![
                mount("/d/checkpoints/t", "/caldera/checkpoints", false),
                mount("/d/scratch/a1", "/caldera/scratch", false),
                mount("/d/cache/v3", MODEL_PATH, true),
                mount("/srv/datasets", "/data", true),
            ],
            env_file: PathBuf::from("/d/shims/a1/container.env"),
            port: Some(20001),
            image: "registry.internal/app:1".into(),
            command: vec!["sh".into(), "-c".into(), "httpd -f".into()],
        }
    }

    #[test]
    fn the_new_line_is_the_old_slice_with_a_new_name_port_model_env_file_and_image() {
        let old = plan();
        let mut argv = vec!["/usr/bin/podman".to_string()];
        argv.extend(old.argv());
        let new = SwapRun {
            name: "caldera-a1-0000beef-g2".into(),
            port: Some(20007),
            model_host_path: Some("/d/cache/v4".into()),
            env_file: "/d/shims/a1~g2/container.env".into(),
            image: "registry.internal/app:2".into(),
        };
        assert_eq!(image_of(&argv), Some("registry.internal/app:1"));
        let got = swapped_argv(&argv, &new).unwrap();
        assert_eq!(image_of(&got), Some("registry.internal/app:2"));
        let mut expected_plan = old.clone();
        expected_plan.name = new.name.clone();
        expected_plan.port = new.port;
        expected_plan.mounts[2].host_path = "/d/cache/v4".into();
        expected_plan.env_file = PathBuf::from(&new.env_file);
        expected_plan.image = new.image.clone();
        let mut expected = vec!["/usr/bin/podman".to_string()];
        expected.extend(expected_plan.argv());
        assert_eq!(got, expected);
    }

    #[test]
    fn a_container_without_a_command_or_a_port_keeps_them_absent() {
        let mut old = plan();
        old.command = Vec::new();
        old.port = None;
        let mut argv = vec!["podman".to_string()];
        argv.extend(old.argv());
        let new = SwapRun {
            name: "n2".into(),
            port: None,
            model_host_path: None,
            env_file: "/e".into(),
            image: "registry.internal/app:2".into(),
        };
        let got = swapped_argv(&argv, &new).unwrap();
        assert_eq!(
            got.last().map(String::as_str),
            Some("registry.internal/app:2")
        );
        assert!(!got.iter().any(|a| a == "--publish"), "{got:?}");
        // The model mount is kept when the swap names no new copy.
        assert!(
            got.iter().any(|a| a == "/d/cache/v3:/caldera/model:ro"),
            "{got:?}"
        );
    }

    #[test]
    fn a_line_not_written_by_podman_run_is_refused() {
        let new = SwapRun {
            name: "n".into(),
            port: None,
            model_host_path: None,
            env_file: "/e".into(),
            image: "i".into(),
        };
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert!(swapped_argv(&s(&[]), &new).is_err());
        assert!(swapped_argv(&s(&["podman", "start", "x"]), &new).is_err());
        assert!(swapped_argv(&s(&["podman", "run", "--name"]), &new).is_err());
        assert!(swapped_argv(&s(&["podman", "run", "--name", "x"]), &new).is_err());
    }
}
