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
            // SAFETY: geteuid has no memory effects.
            let my_uid = unsafe { libc::geteuid() };
            Ok(checkpoint_file(
                &key,
                &checkpoint,
                rel.as_deref(),
                path.as_deref(),
                my_uid,
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
            image: None,
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

/// Whether `tree` (a real path) can be trusted to be `task_key`'s own tree:
/// the checkpoint path is the node's word, so a node (or an impostor with
/// its secret) could name `/etc/x` and have the control plane, as root,
/// hash root's files as "the tenant's". The tree must be named as the agent
/// names it, `checkpoints/<task>`, and belong to the tenant's workload uid:
/// never to root or to this process's uid, whose files a tenant does not own.
fn trusted_tree(tree: &Path, task_key: &str, my_uid: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let untrusted = |why: String| {
        ActorError::CheckpointUntrusted(format!(
            "from_task: task {}'s checkpoint tree {} {why}",
            caldera_spec::local_id(task_key),
            tree.display()
        ))
    };
    let name = caldera_spec::node::safe_file_name(task_key);
    let laid_out = tree.file_name() == Some(std::ffi::OsStr::new(&name))
        && tree.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new("checkpoints"));
    if !laid_out {
        return Err(untrusted(format!(
            "is not the agent's checkpoints/{name} for this task"
        )));
    }
    let owner = std::fs::metadata(tree)
        .map_err(|e| untrusted(format!("cannot be read: {e}")))?
        .uid();
    let whose = match owner {
        0 => "root",
        o if o == my_uid => "the control plane's own user",
        _ => return Ok(()),
    };
    Err(untrusted(format!(
        "belongs to {whose} (uid {owner}), not to a workload uid of the tenant's: \
         the node gives its workloads no uid of their own (a root agent with \
         --workload-uid-range does), so the tenant's files cannot be told from the node's"
    )))
}

/// The file to register, how it must be read, its size and SHA-256:
/// `path` (which must lie in the task's checkpoint directory), else the
/// reported `checkpoint`. It is read as its tenant could read it: inside the
/// task's tree (see [`trusted_tree`]), never through a symbolic link, only
/// if the tenant owns it or every user may read it (`confined_file`).
/// `my_uid`: this process's effective uid.
fn checkpoint_file(
    task_key: &str,
    checkpoint: &str,
    rel: Option<&str>,
    path: Option<&str>,
    my_uid: u32,
) -> Result<(PathBuf, ConfinedRead, u64, String)> {
    let bad = |why: String| ActorError::CheckpointUnreadable(why);
    let reported = Path::new(checkpoint);
    let tree = task_tree(reported, rel)
        .and_then(|t| t.canonicalize().ok())
        .ok_or_else(|| bad(format!("the task's tree of {checkpoint} cannot be read")))?;
    trusted_tree(&tree, task_key, my_uid)?;
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
    let opened = confined_file::open(&file, &confined).map_err(|e| bad(e.to_string()))?;
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

    const KEY: &str = "team-a/train";

    /// `<data>/checkpoints/team-a+train`, laid out as the agent lays it out.
    fn agent_tree(data: &Path) -> PathBuf {
        let tree = data.join("checkpoints").join("team-a+train");
        std::fs::create_dir_all(&tree).unwrap();
        tree
    }

    /// `checkpoint_file` as a control plane that is not the tree's owner:
    /// a root test process gives the tree to a workload uid (as a root agent
    /// does); any other pretends the control plane runs as another user.
    fn register(
        tree: &Path,
        checkpoint: &Path,
        rel: Option<&str>,
        path: Option<&str>,
    ) -> Result<(PathBuf, ConfinedRead, u64, String)> {
        // SAFETY: geteuid has no memory effects.
        let me = unsafe { libc::geteuid() };
        let cp_uid = if me == 0 {
            std::os::unix::fs::chown(tree, Some(61990), Some(61990)).unwrap();
            me
        } else {
            me.wrapping_add(1)
        };
        let r = checkpoint.to_str().unwrap();
        checkpoint_file(KEY, r, rel, path, cp_uid)
    }

    #[test]
    fn only_files_beside_the_reported_checkpoint_are_registered() {
        let dir = tempfile::tempdir().unwrap();
        let ck = agent_tree(dir.path());
        let reported = ck.join("step-2");
        std::fs::write(&reported, b"test").unwrap();
        std::fs::write(ck.join("final.bin"), b"weights").unwrap();
        std::fs::write(dir.path().join("checkpoints/secret"), b"no").unwrap();
        let (file, confined, size, sha) = register(&ck, &reported, None, None).unwrap();
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
        assert_eq!(register(&ck, &reported, None, other.to_str()).unwrap().2, 7);
        let outside = ck.join("../secret");
        let e = register(&ck, &reported, None, outside.to_str()).unwrap_err();
        assert_eq!(e.field(), Some("path"));
        assert!(register(&ck, &reported, None, Some("/nonexistent/x")).is_err());
    }

    /// The task owns its tree, so it can put links in it: a checkpoint that
    /// is a link, or a checkpoint dir swapped for a link to the node's data
    /// dir, is refused and nothing outside the tree is read.
    #[test]
    fn links_in_the_tasks_tree_never_reach_outside_it() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join("node-secret"), b"s3cret").unwrap();
        let tree = agent_tree(data.path());
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/step-1"), b"w").unwrap();
        let reported = tree.join("sub/step-1");
        assert!(register(&tree, &reported, Some("sub"), None).is_ok());
        symlink(data.path().join("node-secret"), tree.join("sub/step-2")).unwrap();
        let step2 = tree.join("sub/step-2");
        let e = register(&tree, &reported, Some("sub"), step2.to_str()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // The checkpoint dir itself becomes a link to the data dir.
        std::fs::remove_dir_all(tree.join("sub")).unwrap();
        symlink(data.path(), tree.join("sub")).unwrap();
        let secret = tree.join("sub/node-secret");
        let e = register(&tree, &reported, Some("sub"), secret.to_str()).unwrap_err();
        assert_eq!(e.field(), Some("path"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }

    /// The checkpoint path is the node's word. A node reporting a file in a
    /// tree that is not the agent's `checkpoints/<task>` (`/etc/x` makes the
    /// tree `/etc`), or a tree that belongs to root or to the control
    /// plane's own user, is refused before anything in it is read: the
    /// control plane, as root, would otherwise hash root's files as the
    /// tenant's.
    #[test]
    fn a_tree_the_tenant_does_not_own_is_refused_naming_from_task() {
        let data = tempfile::tempdir().unwrap();
        // SAFETY: geteuid has no memory effects.
        let me = unsafe { libc::geteuid() };
        // A node reports `<etc>/shadow`: the tree would be `<etc>`.
        let etc = data.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        std::fs::write(etc.join("shadow"), b"root:x").unwrap();
        let shadow = etc.join("shadow");
        let e = checkpoint_file(
            KEY,
            shadow.to_str().unwrap(),
            None,
            None,
            me.wrapping_add(1),
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("from_task"), "{e}");
        assert_eq!(e.error_code().name, "checkpoint_untrusted");
        assert!(e.to_string().contains("checkpoints/team-a+train"), "{e}");
        // Another task's tree is not this task's either.
        let other = data.path().join("checkpoints/team-b+train");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("ckpt-1"), b"b's").unwrap();
        let e = checkpoint_file(
            KEY,
            other.join("ckpt-1").to_str().unwrap(),
            None,
            None,
            61990,
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("from_task"), "{e}");
        // Laid out right but made by this process (root, when tests run as
        // root: an agent with uid isolation off), so owned by its uid.
        let tree = agent_tree(data.path());
        std::fs::write(tree.join("ckpt-1"), b"w").unwrap();
        let ck = tree.join("ckpt-1");
        let e = checkpoint_file(KEY, ck.to_str().unwrap(), None, None, me).unwrap_err();
        assert_eq!(e.field(), Some("from_task"), "{e}");
        assert_eq!(e.error_code().name, "checkpoint_untrusted");
        let text = e.to_string();
        assert!(text.starts_with("from_task: task train's"), "{text}");
        assert!(text.contains("no uid of their own"), "{text}");
        let whose = if me == 0 {
            "root (uid 0)"
        } else {
            "the control plane's own user"
        };
        assert!(text.contains(whose), "{text}");
        if me == 0 {
            // Root-owned is refused even for a control plane of another uid.
            let e = checkpoint_file(KEY, ck.to_str().unwrap(), None, None, 1000).unwrap_err();
            assert!(e.to_string().contains("root (uid 0)"), "{e}");
        }
        // Given to a workload uid, the same tree is the tenant's.
        assert!(register(&tree, &ck, None, None).is_ok());
    }
}
