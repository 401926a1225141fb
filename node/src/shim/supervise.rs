//! The shim's wait loop: every tick it reaps the workload if it ended, takes
//! a stop request (the `stop` file, or SIGTERM/SIGINT to the shim), and
//! checks the lease; a stop or a lapsed lease is SIGTERM to the group, the
//! grace, then SIGKILL. Polling (not signals) keeps it simple and the same for
//! an agent that started the shim and one that adopted it.
//!
//! Times are on `CLOCK_BOOTTIME`, which counts a suspended or frozen host,
//! and a lapsed lease's SIGKILL is due at the lease deadline + grace, not at
//! "when the shim noticed" + grace: the control plane starts the task
//! elsewhere lease + its stop grace after the last renewal, however long this
//! shim was stopped, so a shim that wakes past that point kills at once
//! rather than give the old copy a fresh grace beside the new one.
use super::files::{self, reason, ExitRecord, ShimSpec, StopRequest};
use super::signal_group;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the loop looks (a stop is acted on within this).
const TICK: Duration = Duration::from_millis(50);
/// The lease file is read every this many ticks.
const LEASE_EVERY: u32 = 4;

static TERM_RECEIVED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    TERM_RECEIVED.store(true, Ordering::Relaxed);
}

/// A stop under way: why, and when SIGKILL follows (ms on `CLOCK_BOOTTIME`).
struct Stopping {
    reason: &'static str,
    kill_at_ms: u64,
    killed: bool,
}

/// Waits for the workload, stopping it on request or lease expiry; returns how it ended.
/// `detached`: a container whose client the shim let go (see
/// [`super::container::detach`]); it is waited on through conmon.
pub fn run(
    dir: &Path,
    spec: &ShimSpec,
    mut child: Child,
    detached: Option<super::container::Detached>,
) -> ExitRecord {
    // SAFETY: the handler only stores to an atomic (async-signal-safe). The
    // child already runs, so it keeps the default dispositions.
    unsafe {
        libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_term as *const () as libc::sighandler_t);
    }
    // A detached client is gone (its pid may be reused): no group to signal.
    let pgid = match detached {
        Some(_) => 0,
        None => child.id(),
    };
    let mut default_grace = Duration::from_millis(spec.stop_grace_ms);
    let mut lease = files::read_lease(&dir.join(files::LEASE)).unwrap_or(None);
    let mut stopping: Option<Stopping> = None;
    let mut tick = 0u32;
    loop {
        let ended = match (&detached, &spec.container) {
            (Some(d), Some(c)) => Ok((!d.conmon.alive()).then(|| super::container::exit_of(c))),
            _ => child
                .try_wait()
                .map(|s| s.map(|status| (status.code(), status.signal()))),
        };
        match ended {
            Ok(Some((code, signal))) => {
                // The leader is gone; nothing of its group may outlive it unowned.
                kill_all(spec, pgid);
                let why = match stopping.as_ref() {
                    Some(s) => s.reason,
                    None if out_of_memory(spec, code, signal) => reason::OOM_KILLED,
                    None => reason::EXITED,
                };
                if let Some(c) = &spec.container {
                    super::container::clean_up(c);
                }
                return ExitRecord {
                    code,
                    signal,
                    reason: why.to_string(),
                    detail: String::new(),
                    at_ms: crate::clock::now_ms(),
                };
            }
            Ok(None) => {}
            Err(e) => {
                kill_all(spec, pgid);
                if let Some(c) = &spec.container {
                    super::container::clean_up(c);
                }
                return ExitRecord {
                    code: None,
                    signal: None,
                    reason: reason::EXITED.to_string(),
                    detail: format!("waiting for the workload failed: {e}"),
                    at_ms: crate::clock::now_ms(),
                };
            }
        }
        if tick.is_multiple_of(LEASE_EVERY) {
            // An unreadable lease file keeps the last deadline read.
            if let Ok(l) = files::read_lease(&dir.join(files::LEASE)) {
                lease = l;
            }
            if let Ok(g) = files::read_grace(&dir.join(files::GRACE)) {
                default_grace = g;
            }
        }
        tick = tick.wrapping_add(1);
        if stopping.is_none() {
            let now = files::boottime_ms();
            stopping = stop_wanted(dir, default_grace, lease, now).map(|(why, kill_at_ms)| {
                let grace = Duration::from_millis(kill_at_ms.saturating_sub(now));
                eprintln!("caldera shim: stopping the workload ({why}, grace {grace:?})");
                // No grace left means kill now (a fenced workload, or a
                // lease that lapsed while the shim was stopped): no SIGTERM first.
                if !grace.is_zero() {
                    match &spec.container {
                        Some(c) => super::container::terminate(c),
                        None => signal_group(pgid, libc::SIGTERM),
                    }
                }
                Stopping {
                    reason: why,
                    kill_at_ms,
                    killed: false,
                }
            });
        }
        if let Some(s) = stopping.as_mut() {
            if !s.killed && files::boottime_ms() >= s.kill_at_ms {
                kill_all(spec, pgid);
                s.killed = true;
            }
        }
        std::thread::sleep(TICK);
    }
}

/// Whether to stop at `now_ms`, why, and when SIGKILL is due (ms on
/// `CLOCK_BOOTTIME`): a stop's grace counts from now, a lapsed lease's from
/// its deadline (see the module doc).
fn stop_wanted(
    dir: &Path,
    default_grace: Duration,
    lease: Option<u64>,
    now_ms: u64,
) -> Option<(&'static str, u64)> {
    if let Ok(req) = files::read_json::<StopRequest>(&dir.join(files::STOP)) {
        return Some((reason::STOPPED, now_ms + req.grace_ms));
    }
    let grace_ms = default_grace.as_millis() as u64;
    if TERM_RECEIVED.load(Ordering::Relaxed) {
        return Some((reason::STOPPED, now_ms + grace_ms));
    }
    lapsed(lease, grace_ms, now_ms).map(|kill_at| (reason::LEASE_EXPIRED, kill_at))
}

/// When a lease that has run out by `now_ms` wants its workload SIGKILLed:
/// its deadline + the grace (already past for a shim that was stopped long).
fn lapsed(lease: Option<u64>, grace_ms: u64, now_ms: u64) -> Option<u64> {
    lease
        .filter(|deadline| now_ms >= *deadline)
        .map(|deadline| deadline + grace_ms)
}

/// Whether the workload's memory cgroup says the kernel killed it at its
/// limit (only a SIGKILL the shim did not send can be that).
fn out_of_memory(spec: &ShimSpec, code: Option<i32>, signal: Option<i32>) -> bool {
    spec.memory_cgroup
        .as_deref()
        .is_some_and(|dir| crate::container::oom::oom_killed(dir, code, signal))
}

/// SIGKILL to the group and, where there is one, the whole cgroup (which also
/// holds processes that left the group); a container is removed (killing
/// its client alone would leave it running under conmon).
fn kill_all(spec: &ShimSpec, pgid: u32) {
    if let Some(c) = &spec.container {
        super::container::kill(c);
    }
    signal_group(pgid, libc::SIGKILL);
    if let Some(kill) = &spec.cgroup_kill {
        let _ = std::fs::write(kill, b"1");
    }
}

#[cfg(test)]
mod tests {
    use super::lapsed;

    #[test]
    fn a_lapsed_leases_kill_is_due_at_its_deadline_plus_grace_however_late_it_is_seen() {
        assert_eq!(lapsed(Some(10_000), 2_000, 9_999), None, "still held");
        assert_eq!(lapsed(None, 2_000, 99_999), None, "no lease");
        assert_eq!(lapsed(Some(10_000), 2_000, 10_050), Some(12_000));
        // Woken 30 s late (frozen, suspended): the kill is already due.
        assert_eq!(lapsed(Some(10_000), 2_000, 40_000), Some(12_000));
    }
}
