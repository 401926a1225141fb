//! The files of one shim dir, `<data-dir>/shims/<allocation>/`: the one place
//! the agent and a workload's shim share state. Each is written whole and
//! atomically (temporary file, fsync, rename; the lease without the fsync), so
//! a reader sees the old or the new content, never half; the agent can die at
//! any moment and a later agent reads the same files to adopt the shim.
//!
//! | file | written by | holds |
//! |---|---|---|
//! | `spec.json` | agent, once | what to run and how ([`ShimSpec`]); mode 0600 (the env may hold secrets) |
//! | `shim.pid` | shim, first thing | the shim's pid and start time ([`PidRecord`]) |
//! | `workload.pid` | shim, after the fork | the workload's pid (= its process group) and start time |
//! | `lease` | agent, on each renewal | the lease deadline, ms on `CLOCK_BOOTTIME`, or `none` |
//! | `grace` | agent, at each welcome | the SIGTERM -> SIGKILL grace for a lapsed lease, ms: the control plane's cap, which a restarted agent may have been told anew (an adopted shim must not keep the old one); absent: the spec's |
//! | `stop` | agent | a stop request ([`StopRequest`]) |
//! | `exit.json` | shim, last thing | how the workload ended ([`ExitRecord`]) |
use caldera_spec::wire::ExitStatus;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const SPEC: &str = "spec.json";
pub const SHIM_PID: &str = "shim.pid";
pub const WORKLOAD_PID: &str = "workload.pid";
pub const LEASE: &str = "lease";
pub const GRACE: &str = "grace";
pub const STOP: &str = "stop";
pub const EXIT: &str = "exit.json";
/// The shim's own stderr (it says little: a bad spec, a failed exit write).
pub const SHIM_LOG: &str = "shim.log";

/// Why a workload ended, as [`ExitRecord::reason`] says it.
pub mod reason {
    /// It exited (or was killed by a signal) on its own.
    pub const EXITED: &str = "exited";
    /// The agent asked the shim to stop it.
    pub const STOPPED: &str = "stopped";
    /// The shim's lease ran out (the agent was frozen, dead or cut off).
    pub const LEASE_EXPIRED: &str = "lease_expired";
    /// The process could not be started; `detail` says why.
    pub const SPAWN_FAILED: &str = "spawn_failed";
    /// The shim died without recording the exit; the agent killed what was left.
    pub const SHIM_LOST: &str = "shim_lost";
    /// The kernel killed it for using more memory than its limit (its
    /// memory cgroup says so; see [`crate::container::oom`]).
    pub const OOM_KILLED: &str = "oom_killed";
}

/// How a shim runs a container workload: `argv` is the podman client's
/// `podman run`, run as root; the container is stopped and removed by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerShim {
    /// The container's fixed name (a restarted agent finds it by it).
    pub name: String,
    /// The podman binary.
    pub podman: PathBuf,
    /// The workload's environment is written here (mode 0600) for
    /// `--env-file`: never on a command line.
    pub env_file: PathBuf,
    /// `--cgroup-parent`: what podman creates under it is removed once the
    /// container is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_parent: Option<String>,
    /// The digest of the image it runs (`sha256:...`), as Started reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
}

/// Everything a shim needs to run one workload, written by the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShimSpec {
    pub allocation_id: String,
    pub task_id: String,
    /// Epoch it was started under (what a restarted agent reports in its hello).
    pub epoch: u64,
    /// Empty: a reservation (no process; no shim runs, the dir records the hold).
    pub argv: Vec<String>,
    /// The workload's whole environment (the agent's own is not inherited).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// The unprivileged identity to run as; None keeps the shim's (the agent's).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// `cgroup.procs` files the workload joins before its first instruction.
    pub cgroup_procs: Vec<PathBuf>,
    /// cgroup v2 `cgroup.kill` of the workload's cgroup (kills escaped processes too).
    pub cgroup_kill: Option<PathBuf>,
    /// Both output streams are appended here, by the workload itself.
    pub log: PathBuf,
    /// SIGTERM -> SIGKILL when the lease runs out or a stop names no grace.
    pub stop_grace_ms: u64,
    /// GPUs and slice of the allocation (an adopting agent reports usage with them).
    pub gpu_indices: Vec<u32>,
    pub gpu_memory_mb: u64,
    pub checkpoint_dir: PathBuf,
    /// The model version's sha256 the workload reads (its cached copy stays
    /// in use while it runs, also for an agent that adopts it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
    /// The port the workload was given as CALDERA_PORT: an adopting agent
    /// keeps it taken (absent from agents before replica ports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The workload's readiness probe: an adopting agent probes it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<caldera_spec::ReadinessProbe>,
    /// The generation of the process this shim runs: 0 for the first start,
    /// a swap's generation after an in-place swap (an adopting agent reports it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The `name:version` the workload serves (its start's model, or the
    /// swap's): an adopting agent answers a repeated swap with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Give the workload a `/proc` showing only its own uid's processes
    /// (see [`crate::proc_hiding`]); set where the agent checked it works.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hide_processes: bool,
    /// Run in a container (None: a host process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerShim>,
    /// The workload's memory cgroup dir: a SIGKILL it records as an
    /// out-of-memory kill is reported `oom_killed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cgroup: Option<PathBuf>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A process as a later reader can recognise it despite pid reuse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidRecord {
    pub pid: u32,
    /// Start time after boot, clock ticks.
    pub start_ticks: u64,
    /// The boot the pid belongs to.
    pub boot_id: String,
}

impl PidRecord {
    /// This record for a live process (None when it is already gone).
    pub fn of(pid: u32) -> Option<PidRecord> {
        let stat = crate::procfs::stat(pid)?;
        Some(PidRecord {
            pid,
            start_ticks: stat.start_ticks,
            boot_id: crate::procfs::boot_id(),
        })
    }

    /// Whether that very process still runs (not a zombie, not a reused pid).
    pub fn alive(&self) -> bool {
        if self.pid <= 1 || self.boot_id != crate::procfs::boot_id() {
            return false;
        }
        crate::procfs::stat(self.pid)
            .is_some_and(|s| s.start_ticks == self.start_ticks && !s.zombie)
    }
}

/// A stop request: SIGTERM to the workload's group, `grace_ms`, SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    pub grace_ms: u64,
}

/// How the workload ended, kept on disk until the control plane has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// One of [`reason`].
    pub reason: String,
    /// Free text (the spawn error, ...).
    #[serde(default)]
    pub detail: String,
    /// Wall clock, ms since the Unix epoch.
    pub at_ms: u64,
}

impl ExitRecord {
    /// The status the control plane is told: `stopped` only for a requested stop.
    pub fn status(&self) -> ExitStatus {
        ExitStatus {
            code: self.code,
            signal: self.signal,
            stopped: self.reason == reason::STOPPED,
            oom_killed: self.reason == reason::OOM_KILLED,
        }
    }
}

/// The lease file's content: `Some(deadline)` (ms on `CLOCK_BOOTTIME`) or
/// `None` (no lease: a control plane without leases).
pub fn lease_text(deadline_ms: Option<u64>) -> String {
    match deadline_ms {
        Some(d) => format!("{d}\n"),
        None => "none\n".to_string(),
    }
}

/// Reads a lease file: Ok(Some(deadline)), Ok(None) for `none`; an error for
/// a missing or unreadable one (the caller keeps what it knew).
pub fn read_lease(path: &Path) -> io::Result<Option<u64>> {
    let text = fs::read_to_string(path)?;
    let text = text.trim();
    if text == "none" {
        return Ok(None);
    }
    text.parse::<u64>()
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads a grace file (ms); an error for a missing or garbled one (the
/// caller keeps the grace it had).
pub fn read_grace(path: &Path) -> io::Result<std::time::Duration> {
    fs::read_to_string(path)?
        .trim()
        .parse::<u64>()
        .map(std::time::Duration::from_millis)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Milliseconds on `CLOCK_BOOTTIME`: monotonic, counts suspend, and is the same
/// clock for every process on the host (the agent writes deadlines on it, the
/// shims compare against it).
pub fn boottime_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec.max(0) as u64 * 1000 + ts.tv_nsec.max(0) as u64 / 1_000_000
}

/// Replaces `path` with `bytes` atomically and durably, mode 0600 (the
/// node secret's writer: a temp file beside it, fsync, rename).
pub use crate::secret::write_private as write_atomic;

/// Replaces `path` with `bytes` atomically but without fsync: for the lease,
/// rewritten for every shim on every renewal, and meaningless after a reboot
/// (the boot clock restarts and every workload with it).
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

/// Writes `value` as JSON, atomically.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_atomic(path, &bytes)
}

/// Reads a JSON file; unreadable content is `InvalidData`.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<T> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_files_round_trip_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(LEASE);
        assert!(read_lease(&p).is_err(), "missing");
        replace(&p, lease_text(Some(1234)).as_bytes()).unwrap();
        assert_eq!(read_lease(&p).unwrap(), Some(1234));
        replace(&p, lease_text(None).as_bytes()).unwrap();
        assert_eq!(read_lease(&p).unwrap(), None);
        fs::write(&p, b"soon").unwrap();
        assert!(read_lease(&p).is_err());
    }

    #[test]
    fn a_pid_record_tells_this_process_from_a_reused_pid() {
        let me = PidRecord::of(std::process::id()).unwrap();
        assert!(me.alive());
        let reused = PidRecord {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(!reused.alive());
        assert!(!PidRecord { pid: 1, ..me }.alive());
    }

    #[test]
    fn only_a_requested_stop_reports_stopped() {
        let rec = |r: &str| ExitRecord {
            code: None,
            signal: Some(15),
            reason: r.into(),
            detail: String::new(),
            at_ms: 0,
        };
        assert!(rec(reason::STOPPED).status().stopped);
        assert!(!rec(reason::LEASE_EXPIRED).status().stopped);
    }
}
