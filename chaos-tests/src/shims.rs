//! The shims an agent's workloads run under, read from its data dir
//! (`<data-dir>/shims/<allocation>/{shim,workload}.pid`), so tests can measure
//! them and clean up: shims outlive their agent by design, a test's must not
//! outlive the test.
use std::path::{Path, PathBuf};

/// One shim dir's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimProcs {
    pub dir: PathBuf,
    pub shim: Option<u32>,
    pub workload: Option<u32>,
}

/// The pid of a `{"pid":..,"start_ticks":..}` record, if that process still
/// runs with the recorded start time (pids are reused).
fn recorded_pid(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(v["pid"].as_u64()?).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let started = fields.get(19)?.parse::<u64>().ok()?;
    (pid > 1 && Some(started) == v["start_ticks"].as_u64() && fields.first() != Some(&"Z"))
        .then_some(pid)
}

/// Every shim dir of the agent with `data_dir` and its live processes.
pub fn shims(data_dir: &Path) -> Vec<ShimProcs> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("shims")) else {
        return Vec::new();
    };
    let mut out: Vec<ShimProcs> = entries
        .flatten()
        .map(|e| e.path())
        .map(|dir| ShimProcs {
            shim: recorded_pid(&dir.join("shim.pid")),
            workload: recorded_pid(&dir.join("workload.pid")),
            dir,
        })
        .collect();
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    out
}

/// SIGKILLs every shim of the agent with `data_dir` and everything in its
/// session (a shim leads a session of its own; its workload is in it, also
/// one that has not recorded its pid yet), and removes the containers its
/// shims ran (conmon keeps a container running without its shim).
pub fn kill_shims(data_dir: &Path) {
    remove_containers(data_dir);
    let leaders: Vec<u32> = shims(data_dir).iter().filter_map(|s| s.shim).collect();
    if leaders.is_empty() {
        return;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        // Fields after the name: state, ppid, pgrp, session.
        let session = rest
            .split_whitespace()
            .nth(3)
            .and_then(|s| s.parse::<u32>().ok());
        if session.is_some_and(|s| leaders.contains(&s)) {
            // SAFETY: kill(2) on a process of a shim's session; no memory is touched.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
    }
}

/// Removes (`podman rm -f -t 0`) the container each shim dir's spec names.
fn remove_containers(data_dir: &Path) {
    for s in shims(data_dir) {
        let Ok(text) = std::fs::read_to_string(s.dir.join("spec.json")) else {
            continue;
        };
        let Ok(spec) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let (Some(name), Some(podman)) = (
            spec["container"]["name"].as_str(),
            spec["container"]["podman"].as_str(),
        ) else {
            continue;
        };
        let _ = std::process::Command::new(podman)
            .args(["rm", "--force", "--ignore", "--time", "0", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// A line of `/proc/<pid>/status`, in kB (`VmRSS`, `RssAnon`, ...).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Sends `sig` to every shim of the agent with `data_dir` or, with
/// `workloads`, to every workload's process group instead: for freezing and
/// thawing a whole node (agent, shims and workloads) the way a paused VM or
/// a suspended host is, one part at a time.
pub fn signal_each(data_dir: &Path, sig: i32, workloads: bool) {
    for s in shims(data_dir) {
        let target = if workloads {
            s.workload.map(|p| -(p as i32))
        } else {
            s.shim.map(|p| p as i32)
        };
        if let Some(t) = target.filter(|t| t.unsigned_abs() > 1) {
            // SAFETY: kill(2) on a shim or a workload group it leads; no memory is touched.
            unsafe {
                libc::kill(t, sig);
            }
        }
    }
}
