//! Notices checkpoints: the newest entry of a workload's checkpoint dir that is
//! newer than anything seen before. Polled (about once a second and once more
//! at exit, to catch the checkpoint a stopped job writes on SIGTERM).
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What has been seen in one checkpoint dir.
#[derive(Debug, Clone)]
pub struct CheckpointWatch {
    pub dir: PathBuf,
    seen: Option<SystemTime>,
}

impl CheckpointWatch {
    /// Starts watching; entries already there (an earlier run's) are not news.
    pub fn new(dir: PathBuf) -> Self {
        let seen = newest(&dir).map(|(t, _)| t);
        CheckpointWatch { dir, seen }
    }

    /// The newest entry written since the last call, if any.
    pub fn poll(&mut self) -> Option<PathBuf> {
        let (mtime, path) = newest(&self.dir)?;
        if self.seen.is_some_and(|seen| mtime <= seen) {
            return None;
        }
        self.seen = Some(mtime);
        Some(path)
    }
}

/// The most recently modified entry (file or directory) directly in `dir`.
fn newest(dir: &Path) -> Option<(SystemTime, PathBuf)> {
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            // Editors' and writers' temporary files are not checkpoints yet.
            let n = name.to_string_lossy();
            if n.starts_with('.') || n.ends_with(".tmp") || n.ends_with(".partial") {
                return None;
            }
            Some((e.metadata().ok()?.modified().ok()?, e.path()))
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_only_new_entries() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("old"), b"x").unwrap();
        let mut w = CheckpointWatch::new(dir.path().to_path_buf());
        assert_eq!(w.poll(), None);
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(dir.path().join("step-1"), b"x").unwrap();
        fs::write(dir.path().join(".step-2.tmp"), b"x").unwrap();
        assert_eq!(w.poll(), Some(dir.path().join("step-1")));
        assert_eq!(w.poll(), None);
    }
}
