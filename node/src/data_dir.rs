//! What the agent's data dir shows to the workloads that run beside it.
//!
//! Workloads of other uids must reach their own things inside it (their
//! log dir, checkpoint tree, scratch dir and model copy), so the data dir
//! and the dirs that hold per-tenant dirs are traversable but not listable
//! (0711); each tenant's dir inside them is its own, 0700. What only the
//! agent reads is closed: the shims' dirs (they hold each workload's
//! environment) and the secrets dir are 0700, and the files at the top of
//! the data dir (the tenant -> uid map and the like) are 0600. Modes wider
//! than that, from an older agent or a hand-made dir, are narrowed at start.
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Dirs that hold one dir per tenant or task: reachable, not listable.
const TRAVERSED: &[&str] = &["logs", "checkpoints", "scratch"];
/// Dirs only the agent reads.
const CLOSED: &[&str] = &["shims"];

/// Narrows the modes of `dir` (the agent's data dir, which exists) and of
/// what the agent keeps at its top.
pub fn narrow(dir: &Path) -> io::Result<()> {
    strip_group_and_other_rw(dir)?;
    for name in TRAVERSED {
        let d = dir.join(name);
        fs::create_dir_all(&d)?;
        strip_group_and_other_rw(&d)?;
    }
    for name in CLOSED {
        let d = dir.join(name);
        fs::create_dir_all(&d)?;
        fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
    }
    for entry in fs::read_dir(dir)?.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_file() {
            let mode = entry.metadata()?.permissions().mode() & 0o7777;
            if mode & 0o077 != 0 {
                fs::set_permissions(entry.path(), fs::Permissions::from_mode(mode & 0o700))?;
            }
        }
    }
    Ok(())
}

/// Takes away read and write from group and others, keeping their
/// search (x) bit: a dir that was 0700 stays 0700.
fn strip_group_and_other_rw(dir: &Path) -> io::Result<()> {
    let mode = fs::metadata(dir)?.permissions().mode() & 0o7777;
    let narrowed = mode & !0o066;
    if narrowed != mode {
        fs::set_permissions(dir, fs::Permissions::from_mode(narrowed))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn wide_modes_are_narrowed_and_dirs_stay_traversable() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        fs::create_dir(d.join("logs")).unwrap();
        fs::set_permissions(d.join("logs"), fs::Permissions::from_mode(0o777)).unwrap();
        fs::create_dir(d.join("shims")).unwrap();
        fs::set_permissions(d.join("shims"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(d.join("tenant-uids.json"), "{}").unwrap();
        fs::set_permissions(
            d.join("tenant-uids.json"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        narrow(d).unwrap();
        assert_eq!(mode(d), 0o711);
        assert_eq!(mode(&d.join("logs")), 0o711);
        assert_eq!(mode(&d.join("checkpoints")), 0o711);
        assert_eq!(mode(&d.join("shims")), 0o700);
        assert_eq!(mode(&d.join("tenant-uids.json")), 0o600);
    }

    #[test]
    fn a_closed_data_dir_stays_closed() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        narrow(dir.path()).unwrap();
        assert_eq!(mode(dir.path()), 0o700);
    }
}
