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

/// Up to `max_bytes` (capped at [`MAX_TAIL_BYTES`]) of the file from byte
/// `from`, and the offset just past them: following a log. A character cut
/// at the end is left for the next read, so no read splits one. A missing
/// file is an empty log.
pub fn read_from(path: &Path, from: u64, max_bytes: u64) -> io::Result<(String, u64)> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((String::new(), 0)),
        Err(e) => return Err(e),
    };
    let start = from.min(f.metadata()?.len());
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.take(max_bytes.min(MAX_TAIL_BYTES))
        .read_to_end(&mut buf)?;
    if let Err(e) = std::str::from_utf8(&buf) {
        if e.error_len().is_none() {
            buf.truncate(e.valid_up_to());
        }
    }
    let end = start + buf.len() as u64;
    Ok((String::from_utf8_lossy(&buf).into_owned(), end))
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

    #[test]
    fn read_from_goes_on_where_the_last_read_ended_and_never_splits_a_character() {
        let dir = tempfile::tempdir().unwrap();
        let path = log_path(dir.path(), "t/1");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all("ab\u{e9}".as_bytes()).unwrap(); // 'é' is two bytes: 4 in all
        assert_eq!(read_from(&path, 0, 2).unwrap(), ("ab".to_string(), 2));
        // Three bytes from 1 would end inside 'é': it waits for the next read.
        assert_eq!(read_from(&path, 1, 2).unwrap(), ("b".to_string(), 2));
        assert_eq!(read_from(&path, 2, 100).unwrap(), ("\u{e9}".to_string(), 4));
        assert_eq!(read_from(&path, 4, 100).unwrap(), (String::new(), 4));
        // Past the end (the file was replaced): read from its end.
        assert_eq!(read_from(&path, 99, 100).unwrap(), (String::new(), 4));
        assert_eq!(
            read_from(&dir.path().join("none"), 7, 4).unwrap(),
            (String::new(), 0)
        );
    }
}
