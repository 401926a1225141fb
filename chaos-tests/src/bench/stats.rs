//! Percentiles of a sample of durations, and the machine readings printed
//! beside every figure (load average, resident memory).
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A sorted sample of durations.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    sorted: Vec<Duration>,
}

impl Sample {
    pub fn new(mut values: Vec<Duration>) -> Sample {
        values.sort();
        Sample { sorted: values }
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Nearest-rank percentile, `p` in 0..=100: the smallest value with at
    /// least p% of the sample at or below it. With 200 values, p99 is the
    /// 198th smallest. Zero for an empty sample.
    pub fn pct(&self, p: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    pub fn min(&self) -> Duration {
        self.sorted.first().copied().unwrap_or_default()
    }

    /// "p50 1.23 ms, p95 …, p99 …, max …" for a report line.
    pub fn describe(&self) -> String {
        format!(
            "n {}, min {}, p50 {}, p95 {}, p99 {}, max {}",
            self.len(),
            ms(self.min()),
            ms(self.pct(50.0)),
            ms(self.pct(95.0)),
            ms(self.pct(99.0)),
            ms(self.max())
        )
    }
}

/// A duration in milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Wall-clock milliseconds since the epoch: the clock the server stamps
/// `at_ms` with (same machine), so the two can be subtracted.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The 1/5/15-minute load averages, as the kernel writes them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Resident and peak resident memory of `pid` in KiB (VmRSS, VmHWM).
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// "123.4 MiB (peak 130.0 MiB)" for `pid`, or "gone".
pub fn rss_line(pid: u32) -> String {
    match rss_kib(pid) {
        Some((rss, hwm)) => format!(
            "{:.1} MiB (peak {:.1} MiB)",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        ),
        None => "gone".into(),
    }
}

/// CPU time `pid` has used so far (user + system), from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant; no memory is touched.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Bytes under `dir`, recursively (the data directory's size on disk).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        // 1..=100 ms: p50 is the 50th value, p99 the 99th, p100 the largest.
        let s = Sample::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(s.pct(50.0), Duration::from_millis(50));
        assert_eq!(s.pct(99.0), Duration::from_millis(99));
        assert_eq!(s.pct(100.0), Duration::from_millis(100));
        assert_eq!(s.pct(0.0), Duration::from_millis(1));
        assert_eq!(Sample::default().pct(50.0), Duration::ZERO);
    }

    #[test]
    fn reads_its_own_rss() {
        let (rss, hwm) = rss_kib(std::process::id()).expect("/proc/self/status");
        assert!(rss > 0 && hwm >= rss);
        assert!(cpu_seconds(std::process::id()).is_some());
    }
}
