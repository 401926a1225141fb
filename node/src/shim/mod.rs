//! `caldera shim <dir>`: the small supervisor of one workload, in the spirit of
//! containerd's runtime shims. The agent writes `<dir>/spec.json` and starts
//! the shim in a session of its own (not tied to the agent's life: no
//! `PR_SET_PDEATHSIG`); the shim starts the workload in its own process group
//! and cgroup as the tenant's uid, with stdout and stderr on the log file
//! itself (an agent restart leaves no gap in the output), records the
//! workload's pid, waits for it, writes its exit status, and exits.
//!
//! It stops the workload (SIGTERM to the group, the grace, SIGKILL) when the
//! agent asks (the `stop` file, or SIGTERM to the shim) or when its lease runs
//! out: the agent renews the `lease` file only while the control plane
//! confirms the node's lease, so a frozen, dead or cut-off agent cannot leave
//! a workload running that the control plane has requeued elsewhere.
//!
//! The binary dispatches here before anything else (no async runtime, no
//! logging setup, no argument parser), so a shim costs little memory; it
//! writes the few things it has to say to its own stderr (`shim.log`).
mod container;
pub mod files;
mod supervise;

use files::{reason, ExitRecord, PidRecord, ShimSpec};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The `caldera shim <dir>` command (and the `caldera-shim <dir>` test
/// binary): `dir` is the first argument after the command's name.
pub fn command(dir: Option<std::ffi::OsString>) -> std::process::ExitCode {
    match dir {
        Some(dir) => std::process::ExitCode::from(main(Path::new(&dir)).clamp(0, 255) as u8),
        None => {
            eprintln!("usage: caldera shim <dir> (started by the node agent)");
            std::process::ExitCode::from(2)
        }
    }
}

/// Runs the shim for the workload described in `dir`; returns its exit code
/// (0 once the workload's exit is recorded, whatever that exit was).
pub fn main(dir: &Path) -> i32 {
    let spec: ShimSpec = match files::read_json(&dir.join(files::SPEC)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "caldera shim: cannot read {}: {e}",
                dir.join(files::SPEC).display()
            );
            return 2;
        }
    };
    if let Some(me) = PidRecord::of(std::process::id()) {
        if let Err(e) = files::write_json(&dir.join(files::SHIM_PID), &me) {
            eprintln!("caldera shim: cannot record its pid: {e}");
        }
    }
    let exit = match start(&spec) {
        Ok(mut child) => {
            let detached = spec.container.as_ref().and_then(|c| {
                container::await_running(&spec, c, &mut child);
                container::detach(c, &mut child)
            });
            let pid = detached.as_ref().map_or(child.id(), |d| d.init);
            match PidRecord::of(pid) {
                Some(rec) => {
                    if let Err(e) = files::write_json(&dir.join(files::WORKLOAD_PID), &rec) {
                        eprintln!("caldera shim: cannot record the workload's pid: {e}");
                    }
                }
                // Gone already: its exit is collected below all the same.
                None => eprintln!("caldera shim: workload {pid} ended before it was recorded"),
            }
            release_code_pages();
            supervise::run(dir, &spec, child, detached)
        }
        Err(detail) => ExitRecord {
            code: None,
            signal: None,
            reason: reason::SPAWN_FAILED.to_string(),
            detail: detail.to_string(),
            at_ms: crate::clock::now_ms(),
        },
    };
    match files::write_json(&dir.join(files::EXIT), &exit) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("caldera shim: cannot record the exit {exit:?}: {e}");
            1
        }
    }
}

/// Gives the shim (and so the workload it forks) a `/proc` of its own when
/// the spec asks, then starts the workload; Err is the detail of why not.
/// The shim is single-threaded and root here, so it can enter a mount
/// namespace of its own; it still sees every process (root is not hidden
/// from), the workload only its own uid's.
fn start(spec: &ShimSpec) -> Result<Child, StartFailure> {
    if let Some(c) = &spec.container {
        container::prepare(spec, c).map_err(StartFailure::EnvFile)?;
    }
    if spec.hide_processes {
        crate::proc_hiding::ProcMount::new()
            .hide_other_processes()
            .map_err(StartFailure::OwnProc)?;
    }
    spawn(spec).map_err(|e| spawn_failure(spec, e))
}

/// Why the shim could not start its workload; its Display is the exit
/// record's detail, which the agent reads (`not found:` becomes
/// `program_not_found`).
#[derive(Debug, thiserror::Error)]
enum StartFailure {
    #[error("cannot write the container's environment: {0}")]
    EnvFile(#[source] io::Error),
    #[error("cannot give the workload a /proc of its own: {0}")]
    OwnProc(#[source] io::Error),
    #[error("not found: {program}: {source}")]
    NotFound {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("{program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
}

/// `not found:` for a missing or unexecutable program, else the error.
fn spawn_failure(spec: &ShimSpec, source: io::Error) -> StartFailure {
    let program = spec.argv.first().cloned().unwrap_or_default();
    match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
            StartFailure::NotFound { program, source }
        }
        _ => StartFailure::Spawn { program, source },
    }
}

/// Starts the workload. Everything that must hold from its first instruction
/// happens between fork and exec, with async-signal-safe calls only on values
/// prepared before the fork: join the cgroup(s), its own process group, then
/// the tenant's gid and uid (supplementary groups dropped), last.
fn spawn(spec: &ShimSpec) -> io::Result<Child> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    };
    let log = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&spec.log)?;
    let stderr = log.try_clone()?;
    let procs: Vec<File> = spec
        .cgroup_procs
        .iter()
        .map(|p| OpenOptions::new().write(true).open(p))
        .collect::<io::Result<_>>()?;
    let fds: Vec<i32> = procs.iter().map(|f| f.as_raw_fd()).collect();
    let identity = spec.uid.map(|uid| (uid, spec.gid.unwrap_or(uid)));
    let env = match &spec.container {
        Some(_) => container::client_env(),
        None => spec.env.clone(),
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(stderr));
    // SAFETY: the closure makes async-signal-safe syscalls only, on values
    // captured before the fork, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some((uid, gid)) = identity {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(procs);
    child
}

/// Drops the shim's read-only file mappings from its page tables: code and
/// read-only data (the loader read the whole relocation table, and the kernel
/// maps file pages in 64 KiB batches around each fault; the wait loop needs
/// few of them). They are clean pages, still in the page cache and shared
/// with every other caldera process; what the loop uses faults back in. A
/// mapping holding any private (anonymous) page — the relocated RELRO data —
/// is left alone: dropping it would undo the relocations.
fn release_code_pages() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_range(line) {
            current = range;
            continue;
        }
        let Some(anon) = line.strip_prefix("Anonymous:") else {
            continue;
        };
        let Some((start, end)) = current.take() else {
            continue;
        };
        if anon.trim() == "0 kB" {
            // SAFETY: a clean, read-only, file-backed private mapping with no
            // private page: MADV_DONTNEED only unmaps; the next access reads
            // the same bytes from the file again.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

/// For a mapping's header line in smaps: Some(range) when it is a read-only
/// (`r--p` or `r-xp`) mapping of a file, Some(None) for any other mapping,
/// None for a field line.
fn mapping_range(line: &str) -> Option<Option<(usize, usize)>> {
    let mut fields = line.split_whitespace();
    let range = fields.next()?;
    let (start, end) = range.split_once('-')?;
    let (Ok(start), Ok(end)) = (
        usize::from_str_radix(start, 16),
        usize::from_str_radix(end, 16),
    ) else {
        return None;
    };
    let perms = fields.next().unwrap_or("");
    let inode = fields.nth(2).unwrap_or("0");
    let read_only_file = (perms == "r--p" || perms == "r-xp") && inode != "0";
    Some(read_only_file.then_some((start, end)))
}

/// Sends `signal` to a whole process group. Refuses pgid 0 and 1 (which would
/// mean "our own group" or "everyone").
pub fn signal_group(pgid: u32, signal: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals the group; no memory is touched.
    unsafe {
        libc::kill(-(pgid as i32), signal);
    }
}
