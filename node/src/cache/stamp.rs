//! What a copy looked like on disk when its SHA-256 was last checked: its
//! length, inode, mtime and ctime. Hashing a copy before every start costs
//! about 1 s per GB (`docs/benchmarks/models.md`): a minute for a 70 GB
//! model on every replica start. A start whose copy still has the stamp of
//! its last full check skips the hash; any write to the file (a truncation,
//! a flipped byte, a copy put in its place) changes its ctime, which no
//! unprivileged process can set back, so the next start hashes it whole and
//! finds the damage. Stamps live in memory only: the first start after an
//! agent (re)start always hashes in full, which also catches what a stamp
//! cannot see (bits rotting under an unchanged inode while the agent was away).
use std::os::unix::fs::MetadataExt;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// The stamp of `path` now; None when it cannot be read.
pub fn of(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some(Stamp {
        len: m.len(),
        ino: m.ino(),
        mtime_ns: ns(m.mtime(), m.mtime_nsec()),
        ctime_ns: ns(m.ctime(), m.ctime_nsec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, SeekFrom, Write};

    #[test]
    fn any_write_changes_the_stamp_and_a_read_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("copy");
        std::fs::write(&p, b"weights").unwrap();
        let first = of(&p).unwrap();
        let _ = std::fs::read(&p).unwrap();
        assert_eq!(of(&p), Some(first), "reading leaves it");
        // Flip one byte in place, then put the mtime back: the ctime moved.
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        let mut f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.seek(SeekFrom::Start(2)).unwrap();
        f.write_all(b"X").unwrap();
        f.set_modified(mtime).unwrap();
        drop(f);
        assert_ne!(of(&p), Some(first), "a write shows in the ctime");
        assert_eq!(of(&dir.path().join("missing")), None);
    }
}
