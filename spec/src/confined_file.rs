//! Opening a file on a tenant's behalf ([`ConfinedRead`]): the control plane
//! (hashing a `from_task` checkpoint) and every agent (copying it into its
//! cache) run as root, so a path a tenant controls must never take them
//! where the tenant could not go. This is the crate's one piece of I/O: both
//! sides must confine alike, and both depend on this crate.
//!
//! The path is walked from the root one component at a time with
//! `openat(O_NOFOLLOW)`: a symbolic link anywhere below the root is refused,
//! never followed; `..` is refused. The file must be a regular file, and the
//! tenant must be able to read it itself: any user may (o+r), or, with
//! `owner_reads`, it belongs to the root's owner (a task's tree is chowned
//! to its tenant's uid). A hard link to someone else's file is someone
//! else's file, and is refused.
use crate::weights::ConfinedRead;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Why a file was not opened on the tenant's behalf. The words name the
/// path and the rule it broke; they never hold the file's contents.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    #[error("{path} is not inside {root}")]
    NotInside { path: PathBuf, root: PathBuf },
    #[error("{root}: {source}")]
    Root {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} climbs out of {root}")]
    ClimbsOut { path: PathBuf, root: PathBuf },
    #[error("{path} names no file")]
    NoFile { path: PathBuf },
    #[error("{path} passes through a symbolic link, which is not followed")]
    SymbolicLink { path: PathBuf },
    #[error("{path}: {source}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: a directory on the way is not open to the tenant")]
    ClosedDirectory { path: PathBuf },
    #[error("{path} is not a regular file")]
    NotRegular { path: PathBuf },
    #[error("{path} is not readable by the tenant (not its own, and not readable by every user)")]
    NotTheTenants { path: PathBuf },
}

/// Opens `path` for reading under `rule`; the error says why in words.
pub fn open(path: &Path, rule: &ConfinedRead) -> Result<File, ConfinedError> {
    let root = Path::new(&rule.root);
    let rest = path
        .strip_prefix(root)
        .map_err(|_| ConfinedError::NotInside {
            path: path.into(),
            root: root.into(),
        })?;
    let at_root = |source| ConfinedError::Root {
        root: root.into(),
        source,
    };
    let mut dir = File::open(root).map_err(at_root)?;
    let root_uid = dir.metadata().map_err(at_root)?.uid();
    let parts: Vec<&std::ffi::OsStr> = rest
        .components()
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(ConfinedError::ClimbsOut {
                path: path.into(),
                root: root.into(),
            }),
        })
        .collect::<Result<_, _>>()?;
    let Some((last, dirs)) = parts.split_last() else {
        return Err(ConfinedError::NoFile { path: path.into() });
    };
    let refused = |source: std::io::Error| match source.raw_os_error() {
        Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
            ConfinedError::SymbolicLink { path: path.into() }
        }
        _ => ConfinedError::Unreadable {
            path: path.into(),
            source,
        },
    };
    for part in dirs {
        dir = open_at(&dir, part, libc::O_DIRECTORY).map_err(refused)?;
        let meta = dir.metadata().map_err(refused)?;
        if !readable_by_tenant(&meta, root_uid, rule.owner_reads, 0o001) {
            return Err(ConfinedError::ClosedDirectory { path: path.into() });
        }
    }
    let file = open_at(&dir, last, libc::O_NONBLOCK).map_err(refused)?;
    let meta = file.metadata().map_err(refused)?;
    if !meta.is_file() {
        return Err(ConfinedError::NotRegular { path: path.into() });
    }
    if !readable_by_tenant(&meta, root_uid, rule.owner_reads, 0o004) {
        return Err(ConfinedError::NotTheTenants { path: path.into() });
    }
    Ok(file)
}

/// Whether the tenant may use `meta`: `other_bit` (o+r for a file, o+x for
/// a directory) is set, or with `owner_reads` it belongs to the root's owner.
fn readable_by_tenant(
    meta: &std::fs::Metadata,
    root_uid: u32,
    owner_reads: bool,
    other_bit: u32,
) -> bool {
    meta.mode() & other_bit != 0 || (owner_reads && meta.uid() == root_uid)
}

/// `openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | extra)`.
fn open_at(dir: &File, name: &std::ffi::OsStr, extra: i32) -> std::io::Result<File> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | extra;
    // SAFETY: `dir` is an open descriptor and `name` a NUL-terminated string
    // that outlives the call; the returned descriptor is owned by the File.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn rule(root: &Path, owner_reads: bool) -> ConfinedRead {
        ConfinedRead {
            root: root.display().to_string(),
            owner_reads,
        }
    }

    #[test]
    fn links_out_of_the_tree_and_climbing_out_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("node-secret");
        std::fs::write(&secret, b"s3cret").unwrap();
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("ckpt")).unwrap();
        std::fs::write(root.join("ckpt/step-1"), b"weights").unwrap();
        symlink(&secret, root.join("ckpt/step-2")).unwrap();
        symlink(outside.path(), root.join("sub")).unwrap();
        let r = rule(&root, true);
        let mut good = String::new();
        std::io::Read::read_to_string(&mut open(&root.join("ckpt/step-1"), &r).unwrap(), &mut good)
            .unwrap();
        assert_eq!(good, "weights");
        for bad in [
            root.join("ckpt/step-2"),
            root.join("sub/node-secret"),
            root.join("ckpt/../../node-secret"),
            secret.clone(),
            root.join("ckpt"),
        ]
        .iter()
        {
            let e = open(bad, &r).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
        }
        let e = open(&root.join("sub/node-secret"), &r).unwrap_err();
        assert!(matches!(e, ConfinedError::SymbolicLink { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "{} passes through a symbolic link, which is not followed",
                root.join("sub/node-secret").display()
            )
        );
        assert!(matches!(
            open(&root.join("ckpt/../../node-secret"), &r),
            Err(ConfinedError::ClimbsOut { .. })
        ));
        assert!(matches!(
            open(&secret, &r),
            Err(ConfinedError::NotInside { .. })
        ));
        assert!(matches!(
            open(&root.join("ckpt"), &r),
            Err(ConfinedError::NotRegular { .. })
        ));
        let missing = open(&root.join("ckpt/step-9"), &r).unwrap_err();
        assert!(
            matches!(&missing, ConfinedError::Unreadable { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound),
            "{missing:?}"
        );
    }

    #[test]
    fn without_owner_reads_only_files_every_user_may_read_are_opened() {
        let tree = tempfile::tempdir().unwrap();
        let root = tree.path().canonicalize().unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open_file = root.join("public.bin");
        let closed = root.join("private.bin");
        std::fs::write(&open_file, b"x").unwrap();
        std::fs::write(&closed, b"y").unwrap();
        std::fs::set_permissions(&open_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(open(&open_file, &rule(&root, false)).is_ok());
        let e = open(&closed, &rule(&root, false)).unwrap_err();
        assert!(matches!(e, ConfinedError::NotTheTenants { .. }), "{e:?}");
        assert!(e.to_string().contains("not readable"), "{e}");
        // The root's owner (here: whoever runs the test) may read its own.
        assert!(open(&closed, &rule(&root, true)).is_ok());
    }
}
