//! The shim's wait loop: every tick it reaps the workload if it ended, takes
//! a stop request (the `stop` file, or SIGTERM/SIGINT to the shim), and
//! checks the lease; a stop or a lapsed lease is SIGTERM to the group, the
//! grace, then SIGKILL. Polling (not signals) keeps it simple and the same for
//! an agent that started the shim and one that adopted it.
use super::files::{self, reason, ExitRecord, ShimSpec, StopRequest};
use super::signal_group;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the loop looks (a stop is acted on within this).
const TICK: Duration = Duration::from_millis(50);
/// The lease file is read every this many ticks.
const LEASE_EVERY: u32 = 4;

static TERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERM_RECEIVED.store(true, Ordering::Relaxed);
}

/// A stop under way: why, and when SIGKILL follows.
struct Stopping {
    reason: &'static str,
    kill_at: Instant,
    killed: bool,
}

/// Waits for the workload, stopping it on request or lease expiry; returns how it ended.
pub fn run(dir: &Path, spec: &ShimSpec, mut child: Child) -> ExitRecord {
    // SAFETY: the handler only stores to an atomic (async-signal-safe). The
    // child already runs, so it keeps the default dispositions.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
    let pgid = child.id();
    let default_grace = Duration::from_millis(spec.stop_grace_ms);
    let mut lease = files::read_lease(&dir.join(files::LEASE)).unwrap_or(None);
    let mut stopping: Option<Stopping> = None;
    let mut tick = 0u32;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // The leader is gone; nothing of its group may outlive it unowned.
                kill_all(spec, pgid);
                let why = stopping.as_ref().map_or(reason::EXITED, |s| s.reason);
                return ExitRecord {
                    code: status.code(),
                    signal: status.signal(),
                    reason: why.to_string(),
                    detail: String::new(),
                    at_ms: crate::runtime::now_ms(),
                };
            }
            Ok(None) => {}
            Err(e) => {
                kill_all(spec, pgid);
                return ExitRecord {
                    code: None,
                    signal: None,
                    reason: reason::EXITED.to_string(),
                    detail: format!("waiting for the workload failed: {e}"),
                    at_ms: crate::runtime::now_ms(),
                };
            }
        }
        if tick.is_multiple_of(LEASE_EVERY) {
            // An unreadable lease file keeps the last deadline read.
            if let Ok(l) = files::read_lease(&dir.join(files::LEASE)) {
                lease = l;
            }
        }
        tick = tick.wrapping_add(1);
        if stopping.is_none() {
            stopping = stop_wanted(dir, default_grace, lease).map(|(why, grace)| {
                eprintln!("caldera shim: stopping the workload ({why}, grace {grace:?})");
                // No grace means kill now (a fenced workload): no SIGTERM first.
                if !grace.is_zero() {
                    signal_group(pgid, libc::SIGTERM);
                }
                Stopping {
                    reason: why,
                    kill_at: Instant::now() + grace,
                    killed: false,
                }
            });
        }
        if let Some(s) = stopping.as_mut() {
            if !s.killed && Instant::now() >= s.kill_at {
                kill_all(spec, pgid);
                s.killed = true;
            }
        }
        std::thread::sleep(TICK);
    }
}

/// Whether to stop now, why, and with which grace.
fn stop_wanted(
    dir: &Path,
    default_grace: Duration,
    lease: Option<u64>,
) -> Option<(&'static str, Duration)> {
    if let Ok(req) = files::read_json::<StopRequest>(&dir.join(files::STOP)) {
        return Some((reason::STOPPED, Duration::from_millis(req.grace_ms)));
    }
    if TERM_RECEIVED.load(Ordering::Relaxed) {
        return Some((reason::STOPPED, default_grace));
    }
    match lease {
        Some(deadline) if files::boottime_ms() >= deadline => {
            Some((reason::LEASE_EXPIRED, default_grace))
        }
        _ => None,
    }
}

/// SIGKILL to the group and, where there is one, the whole cgroup (which also
/// holds processes that left the group).
fn kill_all(spec: &ShimSpec, pgid: u32) {
    signal_group(pgid, libc::SIGKILL);
    if let Some(kill) = &spec.cgroup_kill {
        let _ = std::fs::write(kill, b"1");
    }
}
