//! Timestamped output of workload copies, for measuring overlap: every copy
//! appends `<allocation id> <unix seconds.nanos>` lines to one shared file
//! (see [`ticker`]), so the two copies of a task that was moved can be
//! compared on one clock, the host's, from their own output rather than
//! from what the control plane believes.
use std::collections::BTreeMap;
use std::path::Path;

/// A `sh -c` script appending a tick every 50 ms to `file`. With
/// `ignore_term` it ignores SIGTERM, as a workload slow to checkpoint
/// would: only SIGKILL at the end of its grace stops it (the worst case a
/// fence has to cover).
pub fn ticker(file: &Path, ignore_term: bool) -> Vec<String> {
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "{trap}while :; do echo $CALDERA_ALLOCATION_ID $(date +%s.%N) >> {}; sleep 0.05; done",
            file.display()
        ),
    ]
}

/// First and last tick (unix seconds) of one allocation, and how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub first: f64,
    pub last: f64,
    pub count: usize,
}

/// Every allocation's span in `file`, by allocation id.
pub fn spans(file: &Path) -> BTreeMap<String, Span> {
    let mut out: BTreeMap<String, Span> = BTreeMap::new();
    let text = std::fs::read_to_string(file).unwrap_or_default();
    for line in text.lines() {
        let Some((id, t)) = line.split_once(' ') else {
            continue;
        };
        let Ok(t) = t.trim().parse::<f64>() else {
            continue;
        };
        let s = out.entry(id.to_string()).or_insert(Span {
            first: t,
            last: t,
            count: 0,
        });
        s.first = s.first.min(t);
        s.last = s.last.max(t);
        s.count += 1;
    }
    out
}

/// Seconds two copies ran at once: the old one's last tick minus the new
/// one's first (negative: a gap between them, the goal for a fenced task).
pub fn overlap(old: &Span, new: &Span) -> f64 {
    old.last - new.first
}

/// Now, unix seconds (the clock `date +%s.%N` prints).
pub fn now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Milliseconds on `CLOCK_BOOTTIME`, the clock of the shims' lease files,
/// as `/proc/uptime` gives it (to 10 ms, rounded up so a deadline compared
/// with it is never judged too early); 0 where it cannot be read.
pub fn boottime_ms() -> u64 {
    let text = std::fs::read_to_string("/proc/uptime").unwrap_or_default();
    let secs: f64 = text
        .split_whitespace()
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.0);
    (secs * 1000.0).ceil() as u64 + 10
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_overlap_come_from_the_lines() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ticks");
        std::fs::write(&f, "a.1 10.0\na.1 11.5\nb.2 11.0\ngarbage\nb.2 12.0\n").unwrap();
        let s = spans(&f);
        assert_eq!(s["a.1"].count, 2);
        assert!((overlap(&s["a.1"], &s["b.2"]) - 0.5).abs() < 1e-9);
        assert!(
            overlap(&s["b.2"], &s["a.1"]) > 0.0,
            "b ran on after a began"
        );
    }
}
