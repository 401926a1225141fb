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
    let tmp = data_dir.join(format!("{FILE}.tmp"));
    let err = |source| AgentError::NodeSecret {
        path: p.clone(),
        source,
    };
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(secret.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, &p).map_err(err)
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
