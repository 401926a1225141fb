//! `<data-dir>/workloads.json`: the process groups this agent has running. It is
//! rewritten on every start and exit, so that an agent restarted after a crash
//! (kill -9) can find and kill what its previous life left behind — the control
//! plane has requeued those tasks elsewhere, and a task must never run twice.
use super::procfs;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// One live workload process group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub allocation_id: String,
    pub task_id: String,
    pub epoch: u64,
    /// Process group id (= the leader's pid).
    pub pgid: u32,
    /// Leader's start time after boot, clock ticks: a member of the group older
    /// than this is not ours (pids are reused).
    pub start_ticks: u64,
    /// The boot these pids belong to.
    pub boot_id: String,
}

/// Path of the ledger in a data dir.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("workloads.json")
}

/// Reads the ledger; a missing file is empty, a corrupt one is logged and treated as empty.
pub fn read(path: &Path) -> Vec<LedgerEntry> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!("{} is corrupt ({e}); ignoring it", path.display());
            Vec::new()
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", path.display());
            Vec::new()
        }
    }
}

/// Replaces the ledger atomically (write a temporary file, then rename).
pub fn write(path: &Path, entries: &[LedgerEntry]) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec_pretty(entries).map_err(io::Error::other)?;
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

/// SIGKILLs every process still alive from the entries (same boot, same group,
/// started no earlier than the leader). Returns how many processes were killed.
pub fn kill_leftovers(entries: &[LedgerEntry]) -> usize {
    let boot = procfs::boot_id();
    let procs = procfs::all();
    let mut killed = 0;
    for e in entries {
        if e.boot_id != boot || e.pgid <= 1 {
            continue;
        }
        for p in procs
            .iter()
            .filter(|p| p.pgrp == e.pgid && p.start_ticks >= e.start_ticks)
        {
            // SAFETY: kill(2) on a pid just read from /proc; no memory is touched.
            if unsafe { libc::kill(p.pid as i32, libc::SIGKILL) } == 0 {
                killed += 1;
            }
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        assert!(read(&p).is_empty());
        let e = LedgerEntry {
            allocation_id: "a".into(),
            task_id: "t".into(),
            epoch: 2,
            pgid: 123,
            start_ticks: 9,
            boot_id: "b".into(),
        };
        write(&p, std::slice::from_ref(&e)).unwrap();
        assert_eq!(read(&p), vec![e]);
        fs::write(&p, b"{not json").unwrap();
        assert!(read(&p).is_empty());
    }
}
