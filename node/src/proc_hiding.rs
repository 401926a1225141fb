//! Workloads do not see each other's processes. A workload of one tenant
//! could otherwise read another's command line (secrets given as arguments
//! included) in `/proc/<pid>/cmdline`, or list every process on the node.
//! Each workload (and each readiness probe) that runs as a tenant's uid gets
//! a mount namespace of its own with a procfs instance mounted
//! `hidepid=2` over `/proc`: it sees the processes of its own uid only. The
//! host's `/proc` is untouched (the agent, the shims and operators see
//! everything); mounts the host makes later still propagate into the
//! workload's namespace (`MS_SLAVE`), none of its own propagate out.
//!
//! This takes root (the same agents that give tenants uids of their own)
//! and Linux 5.8 or later: before 5.8 every procfs mount of one pid
//! namespace is the same superblock, so mounting it `hidepid=2` would hide
//! processes in the host's `/proc` too (the agent's and operators' view).
//! The agent checks once at start that it works here ([`check`]); where it
//! does not (an older kernel, a container without `CAP_SYS_ADMIN`),
//! workloads run with the host's `/proc` and the node's isolation label
//! says so.
use std::ffi::CString;
use std::io;
use std::sync::OnceLock;

/// The strings the mount calls need, made before a fork (no allocation
/// may happen between fork and exec).
pub struct ProcMount {
    root: CString,
    target: CString,
    fstype: CString,
    options: CString,
}

impl ProcMount {
    pub fn new() -> ProcMount {
        let c = |s: &str| CString::new(s).unwrap_or_default();
        ProcMount {
            root: c("/"),
            target: c("/proc"),
            fstype: c("proc"),
            options: c("hidepid=2"),
        }
    }

    /// Between fork and exec, before dropping root: a mount namespace of the
    /// calling process's own and a `/proc` showing only its uid's processes.
    /// Async-signal-safe: syscalls on the prepared strings only.
    pub fn hide_other_processes(&self) -> io::Result<()> {
        // SAFETY: unshare and mount touch no memory of ours but the
        // NUL-terminated strings, which live as long as `self`.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return Err(io::Error::last_os_error());
            }
            let slave = libc::MS_REC | libc::MS_SLAVE;
            let none = std::ptr::null();
            if libc::mount(none, self.root.as_ptr(), none, slave, std::ptr::null()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            let options = self.options.as_ptr().cast();
            if libc::mount(
                self.fstype.as_ptr(),
                self.target.as_ptr(),
                self.fstype.as_ptr(),
                flags,
                options,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Default for ProcMount {
    fn default() -> ProcMount {
        ProcMount::new()
    }
}

/// Whether this agent can give its workloads a `/proc` of their own: tried
/// once on a child (`true`) that does exactly what a shim does; the answer
/// is kept. Err says why not.
pub fn check() -> Result<(), NoOwnProc> {
    static ANSWER: OnceLock<Result<(), NoOwnProc>> = OnceLock::new();
    ANSWER.get_or_init(try_once).clone()
}

/// Why workloads on this node see the host's `/proc` (other uids' processes
/// included), in the words the node's isolation label shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoOwnProc {
    #[error("the agent is not root")]
    NotRoot,
    #[error("cannot read the kernel version: {0}")]
    KernelUnknown(String),
    #[error("kernel {major}.{minor} older than {}.{}: procfs mounts share one instance", OWN_PROCFS_SINCE.0, OWN_PROCFS_SINCE.1)]
    OldKernel { major: u32, minor: u32 },
    #[error("kernel version {0:?} unreadable: procfs mounts may share one instance")]
    UnreadableKernel(String),
    #[error("a test process ended with {0}")]
    TrialFailed(String),
    #[error("cannot mount a private /proc: {0}")]
    MountRefused(String),
}

fn try_once() -> Result<(), NoOwnProc> {
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no memory effects.
    if unsafe { libc::geteuid() } != 0 {
        return Err(NoOwnProc::NotRoot);
    }
    // Before the trial mount below: on an old kernel the trial itself
    // would change the host's /proc.
    kernel_gives_own_procfs(&kernel_release()?)?;
    let proc_mount = ProcMount::new();
    let mut cmd = std::process::Command::new("true");
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure makes async-signal-safe syscalls only, on strings
    // made before the fork.
    unsafe {
        cmd.pre_exec(move || proc_mount.hide_other_processes());
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(NoOwnProc::TrialFailed(s.to_string())),
        Err(e) => Err(NoOwnProc::MountRefused(e.to_string())),
    }
}

/// The first kernel whose procfs mounts are instances of their own
/// (`hidepid` of one mount leaves the others alone).
const OWN_PROCFS_SINCE: (u32, u32) = (5, 8);

/// The running kernel's release, as `uname -r` prints it (`6.1.0-18-amd64`).
fn kernel_release() -> Result<String, NoOwnProc> {
    // SAFETY: utsname is plain bytes; uname fills it or fails.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is a valid, writable utsname.
    if unsafe { libc::uname(&mut uts) } != 0 {
        return Err(NoOwnProc::KernelUnknown(
            io::Error::last_os_error().to_string(),
        ));
    }
    let bytes: Vec<u8> = uts
        .release
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `"5.4.0-150-generic"` -> (5, 4): the leading `MAJOR.MINOR`.
fn major_minor(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Ok when the kernel of `release` gives each procfs mount its own options;
/// Err says why not, in the words the isolation label shows.
fn kernel_gives_own_procfs(release: &str) -> Result<(), NoOwnProc> {
    match major_minor(release) {
        Some(v) if v >= OWN_PROCFS_SINCE => Ok(()),
        Some((major, minor)) => Err(NoOwnProc::OldKernel { major, minor }),
        None => Err(NoOwnProc::UnreadableKernel(release.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_before_5_8_gets_no_private_proc() {
        assert_eq!(major_minor("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(major_minor("6.18.44-fc-v1098"), Some((6, 18)));
        assert_eq!(major_minor("5.10"), Some((5, 10)));
        assert_eq!(major_minor("4.19.0+"), Some((4, 19)));
        assert_eq!(major_minor("5"), None);
        assert_eq!(major_minor(""), None);
        assert_eq!(major_minor("x.y"), None);
        assert_eq!(major_minor("99999999999.1"), None);
        for old in ["5.7.19", "4.19.0-25-amd64", "3.10.0-1160.el7.x86_64"] {
            let e = kernel_gives_own_procfs(old).unwrap_err().to_string();
            assert!(e.contains("older than 5.8"), "{old}: {e}");
            assert!(e.contains("share one instance"), "{old}: {e}");
        }
        assert_eq!(
            kernel_gives_own_procfs("5.7.0").unwrap_err().to_string(),
            "kernel 5.7 older than 5.8: procfs mounts share one instance"
        );
        for new in ["5.8.0", "5.10.0-28-amd64", "6.1.0", "6.18.44-fc-v1098"] {
            assert_eq!(kernel_gives_own_procfs(new), Ok(()), "{new}");
        }
        assert!(kernel_gives_own_procfs("garbage").is_err());
        // The running kernel's release reads (this machine's may be either).
        assert!(major_minor(&kernel_release().unwrap()).is_some());
    }

    #[test]
    fn a_hidden_proc_shows_only_its_own_uids_processes() {
        if check().is_err() {
            eprintln!("skipped: {}", check().unwrap_err());
            return;
        }
        use std::os::unix::process::CommandExt;
        // A process of uid 0 beside ours: listed in the host's /proc.
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = sleeper.id();
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
        let proc_mount = ProcMount::new();
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c").arg(format!(
            "test -e /proc/{pid} && echo visible; cat /proc/{pid}/cmdline; echo end"
        ));
        // SAFETY: async-signal-safe calls only, on values made before the fork.
        unsafe {
            cmd.pre_exec(move || {
                proc_mount.hide_other_processes()?;
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(61990) != 0
                    || libc::setuid(61990) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let out = cmd.output().unwrap();
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("end") && !text.contains("visible"), "{text}");
        assert!(!text.contains("sleep"), "{text}");
    }
}
