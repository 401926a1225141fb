//! The store's files are the control plane's alone: they hold every task's
//! spec (its environment, secrets included) and the token digests. The
//! sled dir is made mode 0700 and every file in it 0600, on every open, so
//! a dir made wider (by an older build, or by sled under a loose umask) is
//! narrowed; a file sled adds later lies in the closed dir.
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Creates `dir` if missing and makes it mode 0700.
pub fn narrow_dir(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    set_mode(dir, 0o700)
}

/// `dir` 0700, and under it every dir 0700 and every file 0600 (links are
/// left alone: sled makes none).
pub fn narrow_tree(dir: &Path) -> io::Result<()> {
    set_mode(dir, 0o700)?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            narrow_tree(&entry.path())?;
        } else if kind.is_file() {
            set_mode(&entry.path(), 0o600)?;
        }
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    if fs::metadata(path)?.permissions().mode() & 0o7777 != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreConfig};
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn modes(dir: &Path, out: &mut Vec<(String, u32)>) {
        for e in fs::read_dir(dir).unwrap().flatten() {
            let m = e.metadata().unwrap();
            out.push((
                e.path().display().to_string(),
                m.permissions().mode() & 0o7777,
            ));
            if m.is_dir() {
                modes(&e.path(), out);
            }
        }
    }

    #[test]
    fn a_store_opened_on_a_wide_dir_is_the_servers_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("sled");
        {
            let s = Store::open(&dir, &StoreConfig::default()).unwrap();
            s.flush().unwrap();
        }
        // As an older build left it: dirs 0755, files 0644.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let mut before = Vec::new();
        modes(&dir, &mut before);
        for (p, _) in &before {
            let wide = if Path::new(p).is_dir() { 0o755 } else { 0o644 };
            fs::set_permissions(p, fs::Permissions::from_mode(wide)).unwrap();
        }
        let s = Store::open(&dir, &StoreConfig::default()).unwrap();
        s.flush().unwrap();
        let top = fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        assert_eq!(top, 0o700);
        let mut after = Vec::new();
        modes(&dir, &mut after);
        assert!(!after.is_empty());
        for (p, mode) in after {
            let want = if Path::new(&p).is_dir() { 0o700 } else { 0o600 };
            assert_eq!(mode, want, "{p}");
        }
    }
}
