//! Telling an out-of-memory kill from any other SIGKILL. Podman 4.3 on
//! cgroup v1 reports `OOMKilled: false` for a container the kernel killed
//! at its memory limit, and a process killed by the OOM killer looks like
//! any `kill -9`; the workload's memory cgroup remembers what happened:
//! cgroup v2 counts `oom_kill` in `memory.events` (its own and its
//! children's), cgroup v1 counts each charge refused at the limit in
//! `memory.failcnt` and keeps the high-water mark in
//! `memory.max_usage_in_bytes`. The shim asks before its workload's cgroup
//! is removed. Shared by the container and the process runtime.
use std::fs;
use std::path::Path;

/// How close to the limit v1's high-water mark must be (the kernel charges
/// in pages and batches): 64 KiB.
const AT_LIMIT_SLACK: u64 = 64 << 10;

/// Whether a workload that ended with `code`/`signal` was killed for
/// using more memory than its cgroup at `memory_dir` allows.
pub fn oom_killed(memory_dir: &Path, code: Option<i32>, signal: Option<i32>) -> bool {
    // SIGKILL, seen directly or through a container's 128 + 9.
    let sigkill = signal == Some(libc::SIGKILL) || code == Some(128 + libc::SIGKILL);
    sigkill && memory_says_oom(memory_dir)
}

/// What the memory cgroup at `dir` says (false where it says nothing).
pub fn memory_says_oom(dir: &Path) -> bool {
    if let Ok(events) = fs::read_to_string(dir.join("memory.events")) {
        return field(&events, "oom_kill").is_some_and(|n| n > 0);
    }
    let read = |f: &str| {
        fs::read_to_string(dir.join(f))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let oom_control = fs::read_to_string(dir.join("memory.oom_control")).unwrap_or_default();
    if field(&oom_control, "oom_kill").is_some_and(|n| n > 0) {
        return true;
    }
    match (
        read("memory.failcnt"),
        read("memory.max_usage_in_bytes"),
        read("memory.limit_in_bytes"),
    ) {
        (Some(fails), Some(max), Some(limit)) => {
            fails > 0 && max.saturating_add(AT_LIMIT_SLACK) >= limit
        }
        _ => false,
    }
}

/// The number after `name` on its line of a `key value` file.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, body) in files {
            fs::write(d.path().join(name), body).unwrap();
        }
        d
    }

    #[test]
    fn v2_counts_oom_kills_in_memory_events() {
        let hit = dir_with(&[(
            "memory.events",
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n",
        )]);
        assert!(oom_killed(hit.path(), None, Some(9)));
        assert!(oom_killed(hit.path(), Some(137), None), "a container's 137");
        assert!(!oom_killed(hit.path(), Some(1), None), "not a SIGKILL");
        let none = dir_with(&[("memory.events", "max 3\noom 0\noom_kill 0\n")]);
        assert!(!oom_killed(none.path(), None, Some(9)), "a plain kill -9");
    }

    #[test]
    fn v1_needs_refused_charges_and_a_high_water_mark_at_the_limit() {
        let limit = (64u64 << 20).to_string();
        let hit = dir_with(&[
            ("memory.failcnt", "268"),
            ("memory.max_usage_in_bytes", &limit),
            ("memory.limit_in_bytes", &limit),
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            ),
        ]);
        assert!(oom_killed(hit.path(), Some(137), None));
        // Page cache reclaimed at the limit, but usage never stayed there.
        let reclaimed = dir_with(&[
            ("memory.failcnt", "5"),
            ("memory.max_usage_in_bytes", "1048576"),
            ("memory.limit_in_bytes", &limit),
        ]);
        assert!(!oom_killed(reclaimed.path(), None, Some(9)));
        let counted = dir_with(&[("memory.oom_control", "oom_kill_disable 0\noom_kill 2\n")]);
        assert!(oom_killed(counted.path(), None, Some(9)));
        let gone = tempfile::tempdir().unwrap();
        assert!(!oom_killed(&gone.path().join("nope"), None, Some(9)));
    }
}
