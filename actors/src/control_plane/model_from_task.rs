//! Registering a training run's output as a model version (issue 12,
//! item 5): the loop the seed describes, training produces a version and
//! inference swaps to it. The version's weights are the task's checkpoint
//! file, `file://<path>`; like any version's origin, that path must be on
//! storage every node (and the control plane, which hashes it here) reads
//! at the same path.
use super::{blocking, ControlPlane};
use crate::errors::{ActorError, Result};
use crate::model::view::VersionView;
use caldera_spec::{ModelVersionSpec, WeightsSpec};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// `POST /v1/models` with `from_task`: what to register, from which task.
#[derive(Debug, Clone)]
pub struct FromTask {
    pub name: String,
    pub version: String,
    /// The task's tenant (the task id is the tenant's own).
    pub tenant: String,
    pub task_id: String,
    /// A file beside the task's reported checkpoint; default: that checkpoint.
    pub path: Option<String>,
}

impl ControlPlane {
    /// Registers `f` for `owner` (`None`: the operator): the file's size and
    /// SHA-256 are computed here, on the blocking pool.
    pub async fn register_from_task(
        &self,
        owner: Option<String>,
        f: FromTask,
    ) -> Result<(VersionView, bool)> {
        let key = caldera_spec::task_key(&f.tenant, &f.task_id);
        let rec = self
            .task(&key)
            .await?
            .ok_or_else(|| ActorError::not_found("task", &f.task_id))?;
        let Some(checkpoint) = rec.checkpoint.clone() else {
            return Err(ActorError::NoCheckpoint(format!(
                "task {} has reported no checkpoint yet; register once it has written one",
                f.task_id
            )));
        };
        let path = f.path.clone();
        let (file, size_bytes, sha256) =
            blocking(move || Ok(checkpoint_file(&checkpoint, path.as_deref()))).await??;
        let spec = ModelVersionSpec {
            name: f.name,
            version: f.version,
            weights: WeightsSpec {
                uri: format!("file://{}", file.display()),
                size_bytes,
                sha256,
            },
        };
        self.register_model(owner, spec).await
    }
}

/// The file to register, with its size and SHA-256: `path` (which must lie
/// in the directory of the task's reported `checkpoint`, so a registration
/// reads nothing else on the host), else `checkpoint` itself.
fn checkpoint_file(checkpoint: &str, path: Option<&str>) -> Result<(PathBuf, u64, String)> {
    let bad = |why: String| ActorError::CheckpointUnreadable(why);
    let reported = Path::new(checkpoint);
    let dir = reported
        .parent()
        .and_then(|d| d.canonicalize().ok())
        .ok_or_else(|| {
            bad(format!(
                "the checkpoint directory of {checkpoint} cannot be read"
            ))
        })?;
    let wanted = Path::new(path.unwrap_or(checkpoint));
    let file = wanted
        .canonicalize()
        .map_err(|e| bad(format!("{}: {e}", wanted.display())))?;
    if !file.starts_with(&dir) {
        return Err(bad(format!(
            "{} is not in the task's checkpoint directory {}",
            wanted.display(),
            dir.display()
        )));
    }
    if !file.is_file() {
        return Err(bad(format!("{} is not a file", file.display())));
    }
    let (size, sha) = file_digest(&file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    Ok((file, size, sha))
}

/// Size and lowercase hex SHA-256 of the file at `path` (also what
/// `caldera model register --file` computes on the client).
pub fn file_digest(path: &Path) -> std::io::Result<(u64, String)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        h.update(&buf[..n]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((size, hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_beside_the_reported_checkpoint_are_registered() {
        let dir = tempfile::tempdir().unwrap();
        let ck = dir.path().join("ckpt");
        std::fs::create_dir(&ck).unwrap();
        let reported = ck.join("step-2");
        std::fs::write(&reported, b"test").unwrap();
        std::fs::write(ck.join("final.bin"), b"weights").unwrap();
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        let r = reported.to_str().unwrap();
        let (_, size, sha) = checkpoint_file(r, None).unwrap();
        // sha256("test")
        assert_eq!(size, 4);
        assert_eq!(
            sha,
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        let other = ck.join("final.bin");
        assert_eq!(checkpoint_file(r, other.to_str()).unwrap().1, 7);
        let outside = ck.join("../secret");
        let e = checkpoint_file(r, outside.to_str()).unwrap_err();
        assert_eq!(e.field(), Some("path"));
        assert!(checkpoint_file(r, Some("/nonexistent/x")).is_err());
    }
}
