//! A container's scratch space holds at most its task's `disk.size_gb`
//! (the allocation's `disk_mb`): the agent gives it a filesystem of exactly
//! that size, an ext4 image file loop-mounted on the allocation's scratch
//! dir, so a write past the size fails with ENOSPC inside the workload and
//! never fills the node's disk. The image is sparse: it takes on the node
//! only what the workload wrote (plus a few MiB of ext4 metadata), and the
//! sum of the allocations' `disk_mb` on a node never exceeds the disk it
//! offers, as placement sees to.
//!
//! The images live in `<data-dir>/scratch-images/` (root only), one per
//! allocation, named as its scratch dir is. When the workload ends the
//! filesystem is unmounted and its image deleted; an agent that starts
//! again releases those of allocations it no longer holds and keeps those
//! of the workloads it adopts.
//!
//! Without loop mounts (not root, no `/dev/loop-control`, no `mkfs.ext4`
//! or `mount`) scratch stays a plain dir of the node's disk; the agent says
//! so once in its log and in its isolation label.
use caldera_spec::node::safe_file_name;
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The dir under the data dir that holds the images.
pub const IMAGES_DIR: &str = "scratch-images";
/// Where a host has the tools, also when the agent's PATH lacks the sbin dirs.
const TOOL_DIRS: &[&str] = &["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// How this node sizes scratch space.
#[derive(Debug, Clone)]
pub struct ScratchVolumes {
    data_dir: PathBuf,
    tools: Result<Tools, Unsized>,
}

/// Why this node cannot size scratch space: said once at start and in the
/// node's isolation label, so an operator knows what to install or grant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsized {
    #[error("the agent is not root, and loop mounts need it")]
    NotRoot,
    #[error("{} is missing (no loop devices)", .0.display())]
    NoLoopDevices(PathBuf),
    #[error("{0} is not installed")]
    ToolMissing(&'static str),
}

/// Why one allocation's scratch filesystem could not be made; nothing of it
/// is left behind.
#[derive(Debug, thiserror::Error)]
#[error("cannot give the scratch dir its {disk_mb} MiB filesystem ({}): {step}", image.display())]
pub struct SizeError {
    pub disk_mb: u64,
    pub image: PathBuf,
    #[source]
    pub step: StepError,
}

/// The step of making, mounting or handing over a scratch filesystem that
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("{program} failed ({status}): {stderr}")]
    Tool {
        program: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

#[derive(Debug, Clone)]
struct Tools {
    mkfs: PathBuf,
    mount: PathBuf,
}

impl ScratchVolumes {
    /// Looks for what loop-mounted images need; when something is missing
    /// it says so once (here) and scratch stays unsized.
    pub fn detect(data_dir: &Path) -> ScratchVolumes {
        let tools = find_tools(Path::new("/dev/loop-control"));
        if let Err(why) = &tools {
            tracing::warn!("scratch space is NOT sized by disk.size_gb on this node: {why}");
        }
        ScratchVolumes {
            data_dir: data_dir.to_path_buf(),
            tools,
        }
    }

    /// Whether scratch space is sized here.
    pub fn available(&self) -> bool {
        self.tools.is_ok()
    }

    /// For the node's isolation label.
    pub fn label(&self) -> String {
        match &self.tools {
            Ok(_) => "container scratch sized by disk.size_gb (ext4 on a loop device)".into(),
            Err(why) => format!("container scratch not sized ({why})"),
        }
    }

    /// The image of `allocation_id`'s scratch space.
    pub fn image_of(&self, allocation_id: &str) -> PathBuf {
        self.image_named(&safe_file_name(allocation_id))
    }

    /// The image of the allocation whose dirs are named `safe`.
    fn image_named(&self, safe: &str) -> PathBuf {
        self.data_dir.join(IMAGES_DIR).join(format!("{safe}.img"))
    }

    /// The allocation's scratch dir, as the runtime prepares it.
    pub fn scratch_dir_of(&self, allocation_id: &str) -> PathBuf {
        self.data_dir
            .join("scratch")
            .join(safe_file_name(allocation_id))
    }

    /// Mounts a fresh filesystem of `disk_mb` MiB on the allocation's
    /// scratch dir (which must exist), its root owned by `uid` (mode 0700)
    /// where there is one. Ok(false): scratch is not sized here (nothing
    /// done). On an error nothing is left behind.
    pub fn size(
        &self,
        allocation_id: &str,
        disk_mb: u64,
        uid: Option<u32>,
    ) -> Result<bool, SizeError> {
        let Ok(tools) = &self.tools else {
            return Ok(false);
        };
        let image = self.image_of(allocation_id);
        let dir = self.scratch_dir_of(allocation_id);
        let made = make_image(tools, &image, disk_mb)
            .and_then(|()| mount(tools, &image, &dir))
            .and_then(|()| own_root(&dir, uid).map_err(StepError::Io));
        if let Err(step) = made {
            self.release(allocation_id);
            return Err(SizeError {
                disk_mb,
                image,
                step,
            });
        }
        Ok(true)
    }

    /// Unmounts the allocation's scratch filesystem and deletes its image;
    /// nothing when it has none.
    pub fn release(&self, allocation_id: &str) {
        self.release_named(&safe_file_name(allocation_id));
    }

    /// [`ScratchVolumes::release`] of the allocation whose dirs are named
    /// `safe` (the runtime's scratch dir is `<data-dir>/scratch/<safe>`).
    fn release_named(&self, safe: &str) {
        let image = self.image_named(safe);
        if !image.exists() {
            return;
        }
        let dir = self.data_dir.join("scratch").join(safe);
        if let Err(e) = unmount(&dir) {
            tracing::error!("cannot unmount the scratch dir {}: {e}", dir.display());
        }
        if let Err(e) = fs::remove_file(&image) {
            tracing::error!("cannot delete the scratch image {}: {e}", image.display());
        }
    }

    /// Releases the scratch space of every allocation not in `held` (ids as
    /// the runtime keys them); returns how many.
    pub fn release_all_but(&self, held: &BTreeSet<String>) -> usize {
        let held: BTreeSet<String> = held.iter().map(|id| safe_file_name(id)).collect();
        let Ok(entries) = fs::read_dir(self.data_dir.join(IMAGES_DIR)) else {
            return 0;
        };
        let mut released = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(safe) = name.strip_suffix(".img") else {
                continue;
            };
            if held.contains(safe) {
                continue;
            }
            self.release_named(safe);
            tracing::warn!(
                "released the scratch filesystem of {safe}, an allocation this node no longer holds"
            );
            released += 1;
        }
        released
    }
}

/// The tools, or what is missing, in words.
fn find_tools(loop_control: &Path) -> Result<Tools, Unsized> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Unsized::NotRoot);
    }
    if !loop_control.exists() {
        return Err(Unsized::NoLoopDevices(loop_control.to_path_buf()));
    }
    let find = |name: &'static str| {
        let path_dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default();
        path_dirs
            .into_iter()
            .chain(TOOL_DIRS.iter().map(PathBuf::from))
            .map(|d| d.join(name))
            .find(|p| p.is_file())
            .ok_or(Unsized::ToolMissing(name))
    };
    Ok(Tools {
        mkfs: find("mkfs.ext4")?,
        mount: find("mount")?,
    })
}

/// A sparse file of `disk_mb` MiB holding an empty ext4 filesystem: no
/// blocks reserved for root (the workload gets all of it), inode tables and
/// journal initialised lazily (a 200 GiB one is made in well under a second).
fn make_image(tools: &Tools, image: &Path, disk_mb: u64) -> Result<(), StepError> {
    let dir = image.parent().unwrap_or(Path::new("/"));
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(image)?;
    file.set_len(disk_mb.saturating_mul(1024 * 1024))?;
    drop(file);
    run(Command::new(&tools.mkfs)
        .args(["-q", "-F", "-m", "0"])
        .args(["-E", "lazy_itable_init=1,lazy_journal_init=1"])
        .arg(image))
}

/// Loop-mounts `image` on `dir` (no setuid files, no device files; the
/// loop device goes when it is unmounted).
fn mount(tools: &Tools, image: &Path, dir: &Path) -> Result<(), StepError> {
    run(Command::new(&tools.mount)
        .args(["-t", "ext4", "-o", "loop,nosuid,nodev"])
        .arg(image)
        .arg(dir))
}

/// The mounted root as the scratch dir was: the workload's, mode 0700,
/// empty (mkfs's lost+found taken away).
fn own_root(dir: &Path, uid: Option<u32>) -> io::Result<()> {
    let _ = fs::remove_dir(dir.join("lost+found"));
    if let Some(uid) = uid {
        std::os::unix::fs::chown(dir, Some(uid), Some(uid))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Unmounts whatever is mounted on `dir`: at once, or detached when
/// something still holds it (it goes with its last user).
fn unmount(dir: &Path) -> io::Result<()> {
    if !is_mount_point(dir) {
        return Ok(());
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a valid NUL-terminated path; umount2 touches no other memory.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let busy = io::Error::last_os_error();
    // SAFETY: as above.
    match unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } {
        0 => {
            tracing::warn!("{} was busy ({busy}): detached", dir.display());
            Ok(())
        }
        _ => Err(io::Error::last_os_error()),
    }
}

/// Whether `dir` is a mount point (it and its parent are on different
/// devices; a loop mount always is).
fn is_mount_point(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(d), Some(Ok(p))) = (fs::metadata(dir), dir.parent().map(fs::metadata)) else {
        return false;
    };
    d.dev() != p.dev()
}

fn run(cmd: &mut Command) -> Result<(), StepError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = match cmd.output() {
        Ok(out) => out,
        Err(source) => return Err(StepError::Spawn { program, source }),
    };
    match out.status.success() {
        true => Ok(()),
        false => Err(StepError::Tool {
            program,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
