//! The node secret: issued by the control plane when this name first joined
//! (and again when an operator rotates it), presented on every later hello.
//! It lives in `<data-dir>/secrets/node-secret`, so it survives agent
//! restarts and `caldera up` restarts. The data dir must stay traversable for
//! workloads (their logs, checkpoints and model copies are inside it), so the
//! secret gets a dir of its own, mode 0700, and the file is mode 0600, both
//! owned by the agent's user: no workload uid can open it. The file is
//! written whole or not at all (a temp file renamed over it).
use crate::error::AgentError;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The dir inside the data dir that holds what only the agent may read.
pub const DIR: &str = "secrets";
/// File name inside [`DIR`].
pub const FILE: &str = "node-secret";

/// Where the secret lives.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(DIR).join(FILE)
}

/// The stored secret, if this node was registered before. Creates the
/// secrets dir, moves a secret kept at the data dir's top (where agents
/// kept it before it had a dir of its own) into it, and narrows the modes
/// and owner of both to the agent's user if they were wider.
pub fn load(data_dir: &Path) -> Result<Option<String>, AgentError> {
    let p = path(data_dir);
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AgentError::NodeSecret { path, source }
    };
    private_dir(&data_dir.join(DIR)).map_err(err(&data_dir.join(DIR)))?;
    let legacy = data_dir.join(FILE);
    if legacy.exists() && !p.exists() {
        fs::rename(&legacy, &p).map_err(err(&legacy))?;
    }
    match private_file(&p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(AgentError::NodeSecret { path: p, source }),
    }
    let s = fs::read_to_string(&p).map_err(err(&p))?;
    Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty()))
}

/// Stores `secret` with mode 0600 in the 0700 secrets dir.
pub fn store(data_dir: &Path, secret: &str) -> Result<(), AgentError> {
    let p = path(data_dir);
    private_dir(&data_dir.join(DIR))
        .and_then(|()| write_private(&p, secret.as_bytes()))
        .map_err(|source| AgentError::NodeSecret { path: p, source })
}

/// Creates `dir` if missing; makes it the agent's own, mode 0700.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    own_with_mode(dir, 0o700)
}

/// Makes the existing file `file` the agent's own, mode 0600.
pub fn private_file(file: &Path) -> std::io::Result<()> {
    own_with_mode(file, 0o600)
}

fn own_with_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "is a symbolic link; the agent keeps its secrets in real files only",
        ));
    }
    // SAFETY: geteuid and getegid have no memory effects.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if meta.uid() != uid || meta.gid() != gid {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    }
    if meta.mode() & 0o7777 != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Writes `body` to `file` whole or not at all (a temp file beside it, fsync,
/// rename), readable by the owner only (also `caldera up`'s token file).
pub fn write_private(file: &Path, body: &[u8]) -> std::io::Result<()> {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temp = file.with_file_name(name);
    // A stale temp file may have another mode; `mode` only applies on creation.
    let _ = fs::remove_file(&temp);
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    out.write_all(body)?;
    out.sync_all()?;
    fs::rename(&temp, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_secret_survives_in_its_own_dir_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        store(dir.path(), "abc").unwrap();
        store(dir.path(), "def").unwrap();
        assert_eq!(load(dir.path()).unwrap().as_deref(), Some("def"));
        assert_eq!(mode(&path(dir.path())), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
    }

    #[test]
    fn a_secret_at_the_top_of_the_data_dir_moves_in_and_loses_wide_modes() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = dir.path().join(FILE);
        fs::write(&legacy, "old-secret\n").unwrap();
        fs::set_permissions(&legacy, fs::Permissions::from_mode(0o644)).unwrap();
        fs::create_dir(dir.path().join(DIR)).unwrap();
        fs::set_permissions(dir.path().join(DIR), fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(load(dir.path()).unwrap().as_deref(), Some("old-secret"));
        assert!(!legacy.exists());
        assert_eq!(mode(&path(dir.path())), 0o600);
        assert_eq!(mode(&dir.path().join(DIR)), 0o700);
    }

    #[test]
    fn a_secret_file_that_is_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(DIR)).unwrap();
        fs::write(dir.path().join("elsewhere"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), path(dir.path())).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
