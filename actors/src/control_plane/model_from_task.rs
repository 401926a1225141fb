//! Registering a training run's output as a model version: the loop the
//! seed describes, training produces a version and inference swaps to it.
//! The version's weights are the task's checkpoint file, `file://<path>`;
//! that path must be on storage every node (and the control plane, which
//! hashes it here) reads at the same path. The file is the tenant's: it is
//! read only inside the task's tree and as the tenant could read it, here
//! and by every agent that copies it (the record keeps the rule).
use super::{blocking, ControlPlane};
use crate::errors::{ActorError, Result};
use crate::model::view::VersionView;
use caldera_spec::confined_file;
use caldera_spec::weights::ConfinedRead;
use caldera_spec::{ModelVersionSpec, WeightsSpec};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

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
        let rel = rec.spec.checkpoint_dir.clone();
        let (file, confined, size_bytes, sha256) = blocking(move || {
            Ok(checkpoint_file(
                &checkpoint,
                rel.as_deref(),
                path.as_deref(),
            ))
        })
        .await??;
        let spec = ModelVersionSpec {
            name: f.name,
            version: f.version,
            weights: WeightsSpec {
                uri: format!("file://{}", file.display()),
                size_bytes,
                sha256,
            },
        };
        caldera_spec::model::validate_model_version_spec(&spec)?;
        self.register_checked(owner, spec, Some(confined)).await
    }
}

/// The task's own tree, `<data-dir>/checkpoints/<task>`, from its reported
/// `checkpoint` (`<tree>/<checkpoint_dir>/<entry>`): the agent made it and
/// gave it to the tenant's uid, and nothing below it is trusted.
fn task_tree(checkpoint: &Path, rel: Option<&str>) -> Option<PathBuf> {
    let depth = rel.map_or(0, |r| {
        Path::new(r)
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .count()
    });
    checkpoint
        .parent()?
        .ancestors()
        .nth(depth)
        .map(Path::to_path_buf)
}

/// The file to register, how it must be read, its size and SHA-256:
/// `path` (which must lie in the task's checkpoint directory), else the
/// reported `checkpoint`. It is read as its tenant could read it: inside the
/// task's tree, never through a symbolic link, only if the tenant owns it
/// or every user may read it (`confined_file`).
fn checkpoint_file(
    checkpoint: &str,
    rel: Option<&str>,
    path: Option<&str>,
) -> Result<(PathBuf, ConfinedRead, u64, String)> {
    let bad = |why: String| ActorError::CheckpointUnreadable(why);
    let reported = Path::new(checkpoint);
    let tree = task_tree(reported, rel)
        .and_then(|t| t.canonicalize().ok())
        .ok_or_else(|| bad(format!("the task's tree of {checkpoint} cannot be read")))?;
    let dir = reported
        .parent()
        .and_then(|d| d.strip_prefix(task_tree(reported, rel)?).ok())
        .map(|d| tree.join(d))
        .ok_or_else(|| {
            bad(format!(
                "the checkpoint directory of {checkpoint} cannot be read"
            ))
        })?;
    let wanted = Path::new(path.unwrap_or(checkpoint));
    let beside = wanted
        .strip_prefix(reported.parent().unwrap_or(reported))
        .or_else(|_| wanted.strip_prefix(&dir));
    let file = match beside {
        Ok(name) => dir.join(name),
        Err(_) => {
            return Err(bad(format!(
                "{} is not in the task's checkpoint directory {}",
                wanted.display(),
                dir.display()
            )))
        }
    };
    let confined = ConfinedRead {
        root: tree.display().to_string(),
        owner_reads: true,
    };
    let opened = confined_file::open(&file, &confined).map_err(bad)?;
    let (size, sha) = digest_of(opened).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    Ok((file, confined, size, sha))
}

/// Size and lowercase hex SHA-256 of the file at `path` (also what
/// `caldera model register --file` computes on the client).
pub fn file_digest(path: &Path) -> std::io::Result<(u64, String)> {
    digest_of(std::fs::File::open(path)?)
}

/// Size and lowercase hex SHA-256 of what `f` reads.
fn digest_of(mut f: std::fs::File) -> std::io::Result<(u64, String)> {
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
    use std::os::unix::fs::symlink;

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
        let (file, confined, size, sha) = checkpoint_file(r, None, None).unwrap();
        // sha256("test")
        assert_eq!(size, 4);
        assert_eq!(
            sha,
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
        assert_eq!(file, ck.canonicalize().unwrap().join("step-2"));
        assert_eq!(
            confined.root,
            ck.canonicalize().unwrap().display().to_string()
        );
        assert!(confined.owner_reads);
        let other = ck.join("final.bin");
        assert_eq!(checkpoint_file(r, None, other.to_str()).unwrap().2, 7);
        let outside = ck.join("../secret");
        let e = checkpoint_file(r, None, outside.to_str()).unwrap_err();
        assert_eq!(e.field(), Some("path"));
        assert!(checkpoint_file(r, None, Some("/nonexistent/x")).is_err());
    }

    /// The task owns its tree, so it can put links in it: a checkpoint that
    /// is a link, or a checkpoint dir swapped for a link to the node's data
    /// dir, is refused and nothing outside the tree is read.
    #[test]
    fn links_in_the_tasks_tree_never_reach_outside_it() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join("node-secret"), b"s3cret").unwrap();
        let tree = data.path().join("checkpoints/train");
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/step-1"), b"w").unwrap();
        let reported = tree.join("sub/step-1");
        let r = reported.to_str().unwrap();
        assert!(checkpoint_file(r, Some("sub"), None).is_ok());
        symlink(data.path().join("node-secret"), tree.join("sub/step-2")).unwrap();
        let e = checkpoint_file(r, Some("sub"), tree.join("sub/step-2").to_str()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // The checkpoint dir itself becomes a link to the data dir.
        std::fs::remove_dir_all(tree.join("sub")).unwrap();
        symlink(data.path(), tree.join("sub")).unwrap();
        let secret = tree.join("sub/node-secret");
        let e = checkpoint_file(r, Some("sub"), secret.to_str()).unwrap_err();
        assert_eq!(e.field(), Some("path"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
