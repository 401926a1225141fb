//! The node secret: issued by the control plane when this name first joined,
//! presented on every later hello. It lives in the data dir (so it survives
//! agent restarts and `caldera up` restarts), readable by the agent's user
//! only, and is written whole or not at all (a temp file renamed over it).
use crate::error::AgentError;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// File name inside the data dir.
pub const FILE: &str = "node-secret";

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// The stored secret, if this node was registered before.
pub fn load(data_dir: &Path) -> Result<Option<String>, AgentError> {
    let p = path(data_dir);
    match std::fs::read_to_string(&p) {
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AgentError::NodeSecret { path: p, source }),
    }
}

/// Stores `secret` with mode 0600.
pub fn store(data_dir: &Path, secret: &str) -> Result<(), AgentError> {
    let p = path(data_dir);
    write_private(&p, secret.as_bytes())
        .map_err(|source| AgentError::NodeSecret { path: p, source })
}

/// Writes `body` to `file` whole or not at all (a temp file beside it, fsync,
/// rename), readable by the owner only (also `caldera up`'s token file).
pub fn write_private(file: &Path, body: &[u8]) -> std::io::Result<()> {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let temp = file.with_file_name(name);
    // A stale temp file may have another mode; `mode` only applies on creation.
    let _ = std::fs::remove_file(&temp);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)?;
    out.write_all(body)?;
    out.sync_all()?;
    std::fs::rename(&temp, file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_secret_survives_in_the_data_dir_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), None);
        store(dir.path(), "abc").unwrap();
        store(dir.path(), "def").unwrap();
        assert_eq!(load(dir.path()).unwrap().as_deref(), Some("def"));
        let mode = std::fs::metadata(dir.path().join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
