//! The modes of `caldera up`'s data dir. It holds the server's data dir
//! (0700, made so by the server), each agent's (0711, made so by the agent:
//! workloads of tenant uids reach their own files inside), the demo tokens
//! (0600) and the processes' logs. Others may pass through it to an agent's
//! dir but neither list it nor read the logs: it is narrowed to at most
//! 0711 and `logs/` to 0700, also when an older run made them wider.
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Creates `dir` and its `logs/` if missing and narrows their modes.
pub fn prepare(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir.join("logs"))?;
    let mode = fs::metadata(dir)?.permissions().mode() & 0o7777;
    if mode & 0o066 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & !0o066))?;
    }
    fs::set_permissions(dir.join("logs"), fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dir_is_passed_through_not_listed_and_its_logs_are_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("caldera-data");
        fs::create_dir_all(dir.join("logs")).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(dir.join("logs"), fs::Permissions::from_mode(0o755)).unwrap();
        prepare(&dir).unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&dir.join("logs"))), (0o711, 0o700));
    }
}
