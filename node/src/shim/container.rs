//! The shim's side of a container workload. The shim runs the podman
//! client (`podman run`, attached, as root) in the workload's place until
//! the container runs (a failed `podman run` says why in the log and exits
//! with podman's code). Then it lets the client go ([`detach`]): the
//! container's output goes straight to the log file (`passthrough`) and
//! podman's monitor, conmon, lives exactly as long as the container, so the
//! shim waits on conmon and reads the container's exit code from podman
//! once conmon is gone; that saves the client's ~37 MB per workload.
//! Killing the client does not stop a container (conmon keeps it), so a
//! stop goes to the container by name: SIGTERM into it, then, after the
//! grace, `podman rm -f -t 0`. The container is gone before the shim
//! records the exit, whatever ended it.
use super::files::{ContainerShim, PidRecord, ShimSpec};
use crate::container::{cgroups, podman, run_args};
use std::process::Child;
use std::time::{Duration, Instant};

/// Before the client starts: the workload's environment into its env file.
pub fn prepare(spec: &ShimSpec, c: &ContainerShim) -> std::io::Result<()> {
    run_args::write_env_file(&c.env_file, &spec.env)
}

/// The podman client's own environment: nothing of the workload's (a
/// tenant's variables must not configure a root podman), a fixed PATH, and
/// the agent's podman configuration ([`podman::CONFIG_ENV`]), so the
/// container runs from the store its image was pulled into.
pub fn client_env() -> Vec<(String, String)> {
    let mut env = vec![("PATH".into(), podman::PODMAN_PATH.into())];
    env.extend(podman::config_env());
    env
}

/// Longest the shim waits for the container to run before it records the
/// workload as started anyway (its supervision then takes over).
const RUNNING_WAIT: Duration = Duration::from_secs(60);

/// Waits until the container runs (its processes are in its cgroup, or,
/// without one, podman says so) or the client ended (a failed `podman
/// run`): the start is reported once the workload really runs.
pub fn await_running(spec: &ShimSpec, c: &ContainerShim, client: &mut Child) {
    let deadline = Instant::now() + RUNNING_WAIT;
    while Instant::now() < deadline {
        if !matches!(client.try_wait(), Ok(None)) {
            return;
        }
        let running = match &spec.memory_cgroup {
            Some(dir) => !cgroups::container_pids(dir).is_empty(),
            None => podman::run(
                &c.podman,
                &[
                    "container",
                    "inspect",
                    "--format",
                    "{{.State.Running}}",
                    &c.name,
                ],
                Duration::from_secs(10),
            )
            .is_ok_and(|o| o.stdout.trim() == "true"),
        };
        if running {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running container the shim waits on through podman's monitor.
#[derive(Debug, Clone)]
pub struct Detached {
    /// conmon: it ends when the container has ended.
    pub conmon: PidRecord,
    /// The container's pid 1 on the host (the workload's pid as reported).
    pub init: u32,
}

/// Longest a `podman inspect` may take here.
const INSPECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Lets the podman client go once the container runs: reads conmon's and
/// the container's pids, then kills and reaps the client (the container
/// does not notice). None (the client kept) when the container is not
/// running any more or podman cannot say.
pub fn detach(c: &ContainerShim, client: &mut Child) -> Option<Detached> {
    let out = podman::run(
        &c.podman,
        &[
            "container",
            "inspect",
            "--format",
            "{{.State.Running}} {{.State.ConmonPid}} {{.State.Pid}}",
            &c.name,
        ],
        INSPECT_TIMEOUT,
    )
    .ok()
    .filter(|o| o.success)?;
    let mut fields = out.stdout.split_whitespace();
    let running = fields.next() == Some("true");
    let conmon = fields.next().and_then(|p| p.parse::<u32>().ok())?;
    let init = fields.next().and_then(|p| p.parse::<u32>().ok())?;
    let conmon = PidRecord::of(conmon).filter(|_| running && init > 1)?;
    if !matches!(client.try_wait(), Ok(None)) {
        return None;
    }
    let _ = client.kill();
    let _ = client.wait();
    Some(Detached { conmon, init })
}

/// The container's exit (code, signal) once conmon is gone: podman's
/// record of it; a container already removed reads as killed (SIGKILL).
pub fn exit_of(c: &ContainerShim) -> (Option<i32>, Option<i32>) {
    let out = podman::run(
        &c.podman,
        &[
            "container",
            "inspect",
            "--format",
            "{{.State.ExitCode}}",
            &c.name,
        ],
        INSPECT_TIMEOUT,
    );
    match out
        .ok()
        .filter(|o| o.success)
        .and_then(|o| o.stdout.trim().parse::<i32>().ok())
    {
        Some(code) => (Some(code), None),
        None => (None, Some(libc::SIGKILL)),
    }
}

/// SIGTERM into the container (the start of a stop's grace).
pub fn terminate(c: &ContainerShim) {
    if let Err(e) = podman::signal(&c.podman, &c.name, "TERM") {
        eprintln!("caldera shim: {e}");
    }
}

/// Kills and removes the container now; the client then exits by itself.
pub fn kill(c: &ContainerShim) {
    if let Err(e) = podman::remove(&c.podman, &c.name) {
        eprintln!("caldera shim: {e}");
    }
}

/// Once the container is gone (see [`kill`]; it outlives a client that
/// died): the cgroup dirs podman left under its parent.
pub fn clean_up(c: &ContainerShim) {
    if let Some(parent) = &c.cgroup_parent {
        cgroups::remove_tree(parent);
    }
}
