//! Per-task log files: `<data-dir>/logs/<tenant>/<tenant>+<task_id>.log` (the
//! task key `tenant/id` through `safe_file_name`), appended by every run of
//! the task so a requeued run continues the same file. Each tenant's dir
//! belongs to its workload uid, mode 0700, so no other tenant can read it.
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Most bytes one `Logs` answer carries, whatever was asked: a WebSocket frame
/// must stay well under the control plane's frame limit (4 MiB).
pub const MAX_TAIL_BYTES: u64 = 1024 * 1024;

/// Where the task's log lives.
pub fn log_path(data_dir: &Path, task_id: &str) -> PathBuf {
    let tenant = caldera_spec::tenant_of(task_id).unwrap_or("_");
    data_dir
        .join("logs")
        .join(super::safe_file_name(tenant))
        .join(format!("{}.log", super::safe_file_name(task_id)))
}

/// The last `tail_bytes` (capped at [`MAX_TAIL_BYTES`]) of the file, and whether
/// anything before them was left out. A missing file is an empty log.
pub fn tail(path: &Path, tail_bytes: u64) -> io::Result<(String, bool)> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((String::new(), false)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let want = tail_bytes.min(MAX_TAIL_BYTES);
    let start = len.saturating_sub(want);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    f.take(want).read_to_end(&mut buf)?;
    Ok((String::from_utf8_lossy(&buf).into_owned(), start > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn tail_returns_the_end_and_says_when_cut() {
        let dir = tempfile::tempdir().unwrap();
        // A task key `tenant/id` is one file; `a_b/c` and `a/b_c` are two.
        let path = log_path(dir.path(), "t/1");
        assert!(path.ends_with("logs/t/t+1.log"));
        assert_ne!(log_path(dir.path(), "a_b/c"), log_path(dir.path(), "a/b_c"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"0123456789").unwrap();
        assert_eq!(tail(&path, 4).unwrap(), ("6789".to_string(), true));
        assert_eq!(tail(&path, 100).unwrap(), ("0123456789".to_string(), false));
        assert_eq!(
            tail(&dir.path().join("none"), 4).unwrap(),
            (String::new(), false)
        );
    }
}
