//! Starting one workload process. Everything that must hold from the child's
//! first instruction is done in `pre_exec`, between fork and exec, with
//! async-signal-safe calls only (no allocation):
//! - join the workload's cgroup(s) (write "0" to pre-opened `cgroup.procs`);
//! - `setpgid(0, 0)`: its own process group, so a stop reaches grandchildren;
//! - `PR_SET_PDEATHSIG = SIGKILL`: if the agent dies, the workload dies with it
//!   instead of running unowned while the control plane requeues it. The signal
//!   fires when the *thread* that forked exits, so spawns happen only on the
//!   agent's long-lived runtime thread.
use crate::error::StartError;
use std::fs::File;
use std::io;
use std::os::fd::RawFd;
use std::process::Stdio;
use tokio::process::{Child, Command};

/// What to run and where its output goes.
pub struct SpawnSpec<'a> {
    pub argv: &'a [String],
    pub env: Vec<(String, String)>,
    pub log: File,
    pub cgroup_fds: Vec<RawFd>,
}

/// Spawns the process; a missing program is [`StartError::ProgramNotFound`].
pub fn spawn(spec: SpawnSpec<'_>) -> Result<Child, StartError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(StartError::Spawn {
            program: String::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "empty command"),
        });
    };
    let stderr = spec.log.try_clone().map_err(|source| StartError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::from(spec.log))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(false);
    // SAFETY: getpid has no memory effects.
    let agent_pid = unsafe { libc::getpid() };
    let fds = spec.cgroup_fds;
    // SAFETY: the closure only makes async-signal-safe syscalls on values
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
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The agent may have died between fork and prctl: then nobody owns us.
            if libc::getppid() != agent_pid {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|source| match source.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => StartError::ProgramNotFound {
            program: program.clone(),
            source,
        },
        _ => StartError::Spawn {
            program: program.clone(),
            source,
        },
    })
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
