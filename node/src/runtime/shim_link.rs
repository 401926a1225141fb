//! The agent's side of its shims: write a shim's dir and start it, ask it to
//! stop, renew its lease, read how its workload ended, and find the shims an
//! earlier life of the agent left (`<data-dir>/shims/`), which it adopts.
use crate::error::StartError;
use crate::shim::files::{self, ExitRecord, PidRecord, ShimSpec, StopRequest};
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long a start waits for the shim to report the workload's pid.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// The same for a container: its shim reports it once the container runs,
/// which podman may take a while to set up on a loaded host.
const CONTAINER_START_TIMEOUT: Duration = Duration::from_secs(70);

/// How shims are started: `caldera shim <dir>` by default (this very binary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl ShimCommand {
    /// The running binary with `shim` (the agent is `caldera node`).
    pub fn this_binary() -> ShimCommand {
        ShimCommand {
            program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("caldera")),
            args: vec!["shim".to_string()],
        }
    }
}

/// Where the shim dirs live.
pub fn root(data_dir: &Path) -> PathBuf {
    data_dir.join("shims")
}

/// The dir of one allocation's shim.
pub fn dir_of(data_dir: &Path, allocation_id: &str) -> PathBuf {
    root(data_dir).join(super::safe_file_name(allocation_id))
}

/// Creates the dir (mode 0700: the spec holds the workload's env) and writes the spec.
pub fn create(dir: &Path, spec: &ShimSpec, lease: Option<u64>) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::DirBuilder::new().mode(0o700).create(dir)?;
    write_lease(dir, lease)?;
    files::write_json(&dir.join(files::SPEC), spec)
}

/// Starts the shim in a session of its own. It reports the workload's start
/// through its dir: see [`started`].
pub fn spawn(cmd: &ShimCommand, dir: &Path) -> Result<Child, StartError> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(files::SHIM_LOG))
        .map_err(|e| StartError::Shim(format!("opening its log: {e}")))?;
    let mut command = Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(false);
    // SAFETY: setsid is async-signal-safe and touches no memory. Its own
    // session: the shim outlives the agent and no signal to the agent's
    // group reaches it.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
        .spawn()
        .map_err(|e| StartError::Shim(format!("starting {}: {e}", cmd.program.display())))
}

/// Waits (bounded, without blocking the agent's loop) until the shim says
/// the workload runs (its pid; None when it already ended), or why it could
/// not start it.
pub async fn started(dir: &Path, child: &mut Child) -> Result<Option<PidRecord>, StartError> {
    let timeout = match files::read_json::<ShimSpec>(&dir.join(files::SPEC)) {
        Ok(spec) if spec.container.is_some() => CONTAINER_START_TIMEOUT,
        _ => START_TIMEOUT,
    };
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(exit) = read_exit(dir) {
            if exit.reason == files::reason::SPAWN_FAILED {
                return Err(spawn_error(&exit.detail));
            }
            // It ran and ended before we looked: the exit is collected as usual.
            return Ok(None);
        }
        if let Ok(rec) = files::read_json::<PidRecord>(&dir.join(files::WORKLOAD_PID)) {
            return Ok(Some(rec));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(StartError::Shim(format!(
                "it exited ({status}) before starting the workload; see {}",
                dir.join(files::SHIM_LOG).display()
            )));
        }
        if Instant::now() > deadline {
            let _ = child.start_kill();
            return Err(StartError::Shim(format!(
                "no workload pid within {timeout:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The shim's `not found:` detail is a missing program; anything else a spawn failure.
fn spawn_error(detail: &str) -> StartError {
    let (program, rest) = detail.split_once(": ").unwrap_or(("", detail));
    match detail.strip_prefix("not found: ") {
        Some(tail) => {
            let (program, why) = tail.split_once(": ").unwrap_or((tail, ""));
            StartError::ProgramNotFound {
                program: program.to_string(),
                source: io::Error::new(io::ErrorKind::NotFound, why.to_string()),
            }
        }
        None => StartError::Spawn {
            program: program.to_string(),
            source: io::Error::other(rest.to_string()),
        },
    }
}

/// Asks the shim to stop its workload (SIGTERM, `grace`, SIGKILL).
pub fn request_stop(dir: &Path, grace: Duration) -> io::Result<()> {
    let req = StopRequest {
        grace_ms: grace.as_millis() as u64,
    };
    files::write_json(&dir.join(files::STOP), &req)
}

/// Renews (or, with None, lifts) the shim's lease.
pub fn write_lease(dir: &Path, deadline_ms: Option<u64>) -> io::Result<()> {
    files::replace(
        &dir.join(files::LEASE),
        files::lease_text(deadline_ms).as_bytes(),
    )
}

/// Sets the grace the shim gives a lapsed lease (and a SIGTERM without a
/// stop request) from now on.
pub fn write_grace(dir: &Path, grace: Duration) -> io::Result<()> {
    files::replace(
        &dir.join(files::GRACE),
        format!("{}\n", grace.as_millis()).as_bytes(),
    )
}

/// How the workload ended, once the shim (or the agent) recorded it.
pub fn read_exit(dir: &Path) -> Option<ExitRecord> {
    files::read_json(&dir.join(files::EXIT)).ok()
}

/// Records an exit the agent decided (a released reservation, a lost shim).
pub fn record_exit(dir: &Path, exit: &ExitRecord) {
    if let Err(e) = files::write_json(&dir.join(files::EXIT), exit) {
        tracing::error!("cannot record exit in {}: {e}", dir.display());
    }
}

/// The shim's own pid record.
pub fn shim_pid(dir: &Path) -> Option<PidRecord> {
    files::read_json(&dir.join(files::SHIM_PID)).ok()
}

/// Polls (blocking, bounded by `wait`) for the shim's pid record.
pub fn await_shim_pid(dir: &Path, wait: Duration) -> Option<PidRecord> {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(rec) = shim_pid(dir) {
            return Some(rec);
        }
        if Instant::now() > deadline || read_exit(dir).is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Forgets a shim dir (its exit is with the control plane).
pub fn remove(dir: &Path) {
    if let Err(e) = fs::remove_dir_all(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", dir.display());
        }
    }
}

/// One shim dir an earlier agent left.
#[derive(Debug)]
pub struct Found {
    pub dir: PathBuf,
    pub spec: ShimSpec,
    pub shim: Option<PidRecord>,
    pub workload: Option<PidRecord>,
    pub exit: Option<ExitRecord>,
}

/// Every shim dir with a readable spec; unreadable ones are logged and removed
/// (a spec is written before the shim starts, so none of them ran).
pub fn scan(data_dir: &Path) -> Vec<Found> {
    let Ok(entries) = fs::read_dir(root(data_dir)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for dir in entries.flatten().map(|e| e.path()) {
        match files::read_json::<ShimSpec>(&dir.join(files::SPEC)) {
            Ok(spec) => found.push(Found {
                shim: shim_pid(&dir),
                workload: files::read_json(&dir.join(files::WORKLOAD_PID)).ok(),
                exit: read_exit(&dir),
                spec,
                dir,
            }),
            Err(e) => {
                tracing::warn!(
                    "shim dir {} has no usable spec ({e}); removing it",
                    dir.display()
                );
                remove(&dir);
            }
        }
    }
    found.sort_by(|a, b| a.spec.allocation_id.cmp(&b.spec.allocation_id));
    found
}
