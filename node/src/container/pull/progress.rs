//! How far a running `podman pull` got, read from what podman itself
//! shows: its stderr (at debug level) and the download files it writes.
//!
//! - Layers: podman prints `Copying blob sha256:...` as it begins each layer
//!   (all of them at once up to its six parallel copies, so the total grows
//!   past six as the pull goes on), `Applying tar in ...` as a downloaded
//!   layer is stored, and `Copying config ...` once every layer is done.
//!   The layer counts are exact.
//! - Bytes: podman downloads each blob into a file under its `TMPDIR`, which
//!   the agent points at a directory of this pull's own, and keeps the files
//!   until the copy ends. The sum of their sizes is the bytes downloaded so
//!   far: measured every 200 ms and whenever a layer is stored (its file is
//!   whole then), so the bytes of finished layers are exact and a layer
//!   still downloading counts what arrived by the last measurement.
use caldera_spec::container::PullProgress;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often progress is sent at most (as weight warming does).
pub const REPORT_EVERY: Duration = Duration::from_millis(500);

/// What one pull has done so far.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    blobs_started: u32,
    layers_stored: u32,
    config_started: bool,
    /// Largest size seen of each download file (a file that is gone keeps
    /// its last size: those bytes were downloaded).
    files: BTreeMap<PathBuf, u64>,
}

impl Tally {
    /// Reads one stderr line; true when it changed the layer counts.
    pub fn on_line(&mut self, line: &str) -> bool {
        if line.starts_with("Copying blob ") {
            self.blobs_started += 1;
        } else if line.contains("Applying tar in ") {
            self.layers_stored += 1;
        } else if line.starts_with("Copying config ") {
            self.config_started = true;
        } else {
            return false;
        }
        true
    }

    /// Samples the download files under `dir`; true when the bytes grew.
    pub fn sample(&mut self, dir: &Path) -> bool {
        let before = self.bytes_done();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                if meta.is_dir() {
                    stack.push(entry.path());
                } else if meta.is_file() {
                    let seen = self.files.entry(entry.path()).or_default();
                    *seen = (*seen).max(meta.len());
                }
            }
        }
        self.bytes_done() > before
    }

    pub fn bytes_done(&self) -> u64 {
        self.files.values().sum()
    }

    /// The progress as events carry it.
    pub fn progress(&self, image: &str) -> PullProgress {
        let layers_done = if self.config_started {
            self.blobs_started
        } else {
            self.layers_stored.min(self.blobs_started)
        };
        PullProgress {
            image: image.to_string(),
            layers_done,
            layers_total: self.blobs_started,
            bytes_done: self.bytes_done(),
        }
    }

    /// Marks the pull complete (podman exited 0): every layer is done.
    pub fn finish(&mut self) {
        self.config_started = true;
    }
}

/// Sends progress at most every [`REPORT_EVERY`], and only when it moved.
pub struct Throttle {
    last: Option<(Instant, PullProgress)>,
}

impl Throttle {
    pub fn new() -> Throttle {
        Throttle { last: None }
    }

    /// `p` when it is due to be sent (the first one at once), else None.
    pub fn due(&mut self, p: PullProgress, now: Instant) -> Option<PullProgress> {
        match &self.last {
            Some((_, last)) if *last == p => None,
            Some((at, _)) if now.duration_since(*at) < REPORT_EVERY => None,
            _ => {
                self.last = Some((now, p.clone()));
                Some(p)
            }
        }
    }

    /// `p` unless it was the last one sent (the closing report).
    pub fn last(&mut self, p: PullProgress) -> Option<PullProgress> {
        if matches!(&self.last, Some((_, last)) if *last == p) {
            return None;
        }
        self.last = Some((Instant::now(), p.clone()));
        Some(p)
    }
}

impl Default for Throttle {
    fn default() -> Self {
        Throttle::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Podman 4.3.1's stderr at debug level pulling a 3-layer image from the
    /// test registry (debug lines trimmed to the ones that count).
    const PULL: &str = r#"Trying to pull 127.0.0.1:5555/caldera-test/h2-big:1...
Getting image source signatures
Copying blob sha256:3d3f79decbc56048ab93da2065d74b7ee8b50c04a3a73341e5ae86eff4c5ef31
Copying blob sha256:5e2492bda1c4c981fcc129160e3bd97c3a7f54f69fef1a57c2e335915a8a3c72
Copying blob sha256:25970845e9f5e6332cd4c574ff442842af4a3bcd24de4b9684c4b838346f0204
time="2026-12-03T14:55:55Z" level=debug msg="Detected compression format gzip"
time="2026-12-03T14:55:56Z" level=debug msg="Applying tar in /tmp/h2cap/root/overlay/5bfbca3d01120d5824dfc1c93e3b9134d6e761bf0a90741085f43200f9a7b8a1/diff"
time="2026-12-03T14:55:56Z" level=debug msg="Applying tar in /tmp/h2cap/root/overlay/d3d1e36d3b85aef624104e3b8927c3329b8034ab4f2328907d2dbadb4ac3a2b9/diff"
Copying config sha256:9406a1b981a68800b74c8ed58bfecfeb82ff3c1d6e24fe6dc4240bd21c34ed59
Writing manifest to image destination"#;

    #[test]
    fn layers_count_from_podmans_lines() {
        let mut t = Tally::default();
        let lines: Vec<&str> = PULL.lines().collect();
        for l in &lines[..5] {
            t.on_line(l);
        }
        let p = t.progress("x");
        assert_eq!((p.layers_done, p.layers_total), (0, 3));
        t.on_line(lines[6]);
        t.on_line(lines[7]);
        assert_eq!(t.progress("x").layers_done, 2);
        t.on_line(lines[8]);
        assert_eq!(
            t.progress("x").layers_done,
            3,
            "the config comes after every layer"
        );
    }

    #[test]
    fn bytes_are_the_download_files_and_survive_their_removal() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = dir.path().join("storage123");
        std::fs::create_dir(&blobs).unwrap();
        std::fs::write(blobs.join("1"), vec![0u8; 1000]).unwrap();
        let mut t = Tally::default();
        assert!(t.sample(dir.path()));
        std::fs::write(blobs.join("2"), vec![0u8; 500]).unwrap();
        assert!(t.sample(dir.path()));
        assert_eq!(t.bytes_done(), 1500);
        std::fs::remove_dir_all(&blobs).unwrap();
        assert!(!t.sample(dir.path()));
        assert_eq!(t.bytes_done(), 1500);
    }

    #[test]
    fn the_throttle_sends_the_first_then_at_most_every_interval() {
        let mut th = Throttle::new();
        let t0 = Instant::now();
        let p = |n| PullProgress {
            bytes_done: n,
            ..Default::default()
        };
        assert!(th.due(p(1), t0).is_some());
        assert!(th.due(p(2), t0 + Duration::from_millis(100)).is_none());
        assert!(th.due(p(2), t0 + REPORT_EVERY).is_some());
        assert!(th.due(p(2), t0 + REPORT_EVERY * 3).is_none(), "unchanged");
        assert!(th.last(p(2)).is_none());
        assert!(th.last(p(3)).is_some());
    }
}
