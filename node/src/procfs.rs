//! Just enough of /proc: per-process CPU ticks, RSS, parent and process group.
//! Read directly instead of through sysinfo's process table so the agent only
//! pays for a /proc scan while it has workloads to measure.
use std::fs;

/// One line of /proc/<pid>/stat, the fields the agent uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    pub ppid: u32,
    pub pgrp: u32,
    /// Session id (a shim leads one; its workload is in it).
    pub session: u32,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Start time after boot, clock ticks (tells a reused pid from the original).
    pub start_ticks: u64,
    pub rss_pages: u64,
    /// State `Z` or `X`: ended, not yet reaped by its parent.
    pub zombie: bool,
}

/// Parses /proc/<pid>/stat. The command name may hold spaces and parentheses,
/// so fields are counted from the last ')'.
pub fn parse_stat(pid: u32, text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    let num = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(ProcStat {
        pid,
        ppid: num(4)? as u32,
        pgrp: num(5)? as u32,
        session: num(6)? as u32,
        cpu_ticks: num(14)? + num(15)?,
        start_ticks: num(22)?,
        rss_pages: num(24)?,
        zombie: matches!(f.first(), Some(&"Z") | Some(&"X")),
    })
}

/// The stat of one process, None when it is gone.
pub fn stat(pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(pid, &text)
}

/// Every process visible in /proc.
pub fn all() -> Vec<ProcStat> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// Clock ticks per second (USER_HZ).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Memory page size, bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// Identifies this boot; pids recorded in shim dirs mean nothing after a reboot.
pub fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The processes of a workload: its process group, plus descendants of its
/// leader that moved to another group.
pub fn tree(procs: &[ProcStat], leader: u32) -> Vec<&ProcStat> {
    let mut members: Vec<&ProcStat> = procs.iter().filter(|p| p.pgrp == leader).collect();
    let mut frontier: Vec<u32> = members.iter().map(|p| p.pid).collect();
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent) {
            if !members.iter().any(|m| m.pid == p.pid) {
                members.push(p);
                frontier.push(p.pid);
            }
        }
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_name_with_spaces_and_parens() {
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194560 1 0 0 0 10 5 0 0 20 0 1 0 900 1000 33 18446744073709551615";
        let s = parse_stat(42, line).unwrap();
        assert_eq!(
            (s.ppid, s.pgrp, s.cpu_ticks, s.start_ticks, s.rss_pages),
            (7, 42, 15, 900, 33)
        );
    }

    #[test]
    fn reads_this_process() {
        let me = stat(std::process::id()).unwrap();
        assert!(me.rss_pages > 0);
        assert!(all().iter().any(|p| p.pid == me.pid));
    }
}
