//! Who may open a verified copy. The cache itself (`<data-dir>/cache/`: the
//! index, fetches in progress, `weights/`) is the agent's alone, mode 0700:
//! no workload can list which versions are here, read the index, or open a
//! copy by guessing its digest. A workload gets its model through a hard
//! link to the verified copy (the same inode, no second copy on disk) in
//! `<data-dir>/models/`:
//!
//! - `models/shared/<sha256>`: a version the operator registered, which
//!   every tenant may use. `models/` and `shared/` are 0711: a workload
//!   opens the path it was given but cannot list the others.
//! - `models/<uid>/<sha256>`: a tenant's private version, linked into a dir
//!   of that tenant's uid only: owned by root, group the tenant's gid
//!   (each tenant's uid is also its gid), mode 0710. Another tenant's uid
//!   cannot enter it, whatever digest it knows.
//!
//! A link is made again before every start that uses it (so it always is
//! the copy verified for that start), and goes when the copy is deleted.
use super::layout::{is_sha256, Layout};
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Mode of `models/` and `models/shared/`: traversable, not listable.
const OPEN_DIR_MODE: u32 = 0o711;
/// Mode of a tenant's `models/<uid>/`: its group may enter, nobody else.
const TENANT_DIR_MODE: u32 = 0o710;
/// The dir of the links every tenant may open.
const SHARED: &str = "shared";

/// Who a workload's model copy is opened by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The agent's own uid (no uid isolation): the copy itself.
    Agent,
    /// Every tenant's uid: a version registered by the operator.
    Everyone,
    /// One tenant's uid (and gid): its private version.
    Tenant(u32),
}

impl Audience {
    /// For a workload running as `uid` (None: as the agent) using a version
    /// owned by a tenant (`private`) or by the operator.
    pub fn of(uid: Option<u32>, private: bool) -> Audience {
        match (uid, private) {
            (None, _) => Audience::Agent,
            (Some(u), true) => Audience::Tenant(u),
            (Some(_), false) => Audience::Everyone,
        }
    }
}

/// `<data-dir>/models`.
fn models_dir(layout: &Layout) -> PathBuf {
    layout
        .root()
        .parent()
        .map(|d| d.join("models"))
        .unwrap_or_else(|| PathBuf::from("models"))
}

/// The path the workload is given for the verified copy of `sha256`,
/// linked where `audience` may open it (made again if it was there).
pub fn expose(layout: &Layout, sha256: &str, audience: Audience) -> io::Result<PathBuf> {
    if !is_sha256(sha256) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a sha256"));
    }
    let copy = layout.copy(sha256);
    let dir = match audience {
        Audience::Agent => return Ok(copy),
        Audience::Everyone => open_dir(layout)?,
        Audience::Tenant(uid) => tenant_dir(layout, uid)?,
    };
    let link = dir.join(sha256);
    match fs::remove_file(&link) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fs::hard_link(&copy, &link).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("linking {} to {}: {e}", copy.display(), link.display()),
        )
    })?;
    Ok(link)
}

/// Removes every link to `sha256` (its copy is being deleted).
pub fn withdraw(layout: &Layout, sha256: &str) {
    if !is_sha256(sha256) {
        return;
    }
    for dir in audience_dirs(layout) {
        match fs::remove_file(dir.join(sha256)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                tracing::warn!("weight cache: unlinking {sha256} in {}: {e}", dir.display())
            }
            _ => {}
        }
    }
}

/// Removes links whose copy is gone (deleted while the agent was down),
/// and narrows the dirs' modes.
pub fn sweep(layout: &Layout) {
    if let Err(e) = open_dir(layout) {
        tracing::warn!("weight cache: {}: {e}", models_dir(layout).display());
    }
    let copies = layout.copies();
    for dir in audience_dirs(layout) {
        let names = fs::read_dir(&dir).into_iter().flatten().flatten();
        for name in names.filter_map(|e| e.file_name().into_string().ok()) {
            if !copies.contains(&name) {
                let _ = fs::remove_file(dir.join(&name));
            }
        }
    }
}

/// `models/shared` (and `models/`), made with their modes.
fn open_dir(layout: &Layout) -> io::Result<PathBuf> {
    let models = models_dir(layout);
    let shared = models.join(SHARED);
    for d in [&models, &shared] {
        fs::create_dir_all(d)?;
        set_mode(d, OPEN_DIR_MODE)?;
    }
    Ok(shared)
}

/// `models/<uid>`: root's, group `uid`, 0710.
fn tenant_dir(layout: &Layout, uid: u32) -> io::Result<PathBuf> {
    open_dir(layout)?;
    let dir = models_dir(layout).join(uid.to_string());
    fs::create_dir_all(&dir)?;
    std::os::unix::fs::lchown(&dir, None, Some(uid))?;
    set_mode(&dir, TENANT_DIR_MODE)?;
    Ok(dir)
}

/// `models/shared` and every `models/<uid>`.
fn audience_dirs(layout: &Layout) -> Vec<PathBuf> {
    let models = models_dir(layout);
    let mut dirs = vec![models.join(SHARED)];
    let tenants = fs::read_dir(&models).into_iter().flatten().flatten();
    dirs.extend(
        tenants
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .map(|e| e.path()),
    );
    dirs
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    if fs::metadata(path)?.permissions().mode() & 0o7777 != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_copy_is_linked_for_its_audience_and_unlinked_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        let sha = "ab".repeat(32);
        fs::write(layout.copy(&sha), b"weights").unwrap();
        assert_eq!(
            expose(&layout, &sha, Audience::Agent).unwrap(),
            layout.copy(&sha)
        );
        let shared = expose(&layout, &sha, Audience::Everyone).unwrap();
        assert_eq!(shared, dir.path().join("models/shared").join(&sha));
        assert_eq!(fs::read(&shared).unwrap(), b"weights");
        assert_eq!(mode(&dir.path().join("models")), 0o711);
        assert_eq!(mode(&dir.path().join("models/shared")), 0o711);
        // SAFETY: getegid has no memory effects.
        let gid = unsafe { libc::getegid() };
        let private = expose(&layout, &sha, Audience::Tenant(gid)).unwrap();
        assert_eq!(private, dir.path().join(format!("models/{gid}")).join(&sha));
        let tenant_dir = fs::metadata(private.parent().unwrap()).unwrap();
        assert_eq!((tenant_dir.mode() & 0o7777, tenant_dir.gid()), (0o710, gid));
        assert_eq!(
            fs::metadata(&private).unwrap().ino(),
            fs::metadata(layout.copy(&sha)).unwrap().ino(),
            "a link, not a second copy"
        );
        // Made again over a stale link.
        expose(&layout, &sha, Audience::Everyone).unwrap();
        withdraw(&layout, &sha);
        assert!(!shared.exists() && !private.exists());
        assert!(expose(&layout, "../../etc/passwd", Audience::Everyone).is_err());
    }

    #[test]
    fn links_whose_copy_is_gone_are_swept() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::under(dir.path());
        layout.create().unwrap();
        let (kept, gone) = ("ab".repeat(32), "cd".repeat(32));
        for sha in [&kept, &gone] {
            fs::write(layout.copy(sha), b"w").unwrap();
            expose(&layout, sha, Audience::Everyone).unwrap();
        }
        fs::remove_file(layout.copy(&gone)).unwrap();
        sweep(&layout);
        assert!(dir.path().join("models/shared").join(&kept).exists());
        assert!(!dir.path().join("models/shared").join(&gone).exists());
    }
}
