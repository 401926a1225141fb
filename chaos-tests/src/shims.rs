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

/// SIGKILLs every shim of the agent with `data_dir` and its workload's group.
pub fn kill_shims(data_dir: &Path) {
    for s in shims(data_dir) {
        for (pid, group) in [(s.workload, true), (s.shim, false)] {
            if let Some(pid) = pid {
                let target = if group { -(pid as i32) } else { pid as i32 };
                // SAFETY: kill(2) on a pid just checked against its record.
                unsafe {
                    libc::kill(target, libc::SIGKILL);
                }
            }
        }
    }
}

/// A line of `/proc/<pid>/status`, in kB (`VmRSS`, `RssAnon`, ...).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
