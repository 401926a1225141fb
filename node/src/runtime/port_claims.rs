//! Replica ports claimed host-wide.
//!
//! Several agents may share a host (`caldera up` runs two; tests run many),
//! and a bind probe alone cannot keep them apart: two agents that start
//! workloads a few ms apart both find the port free, because neither
//! workload has bound it yet, and the second workload's bind fails (a replica
//! exits "Address already in use" while its readiness probe passes against
//! the other node's process). So
//! each port handed out is also claimed host-wide: an exclusive `flock` on
//! the file `PORT` in [`claims_dir`], held as long as a workload of this
//! agent holds the port, and let go with the process if the agent dies (the
//! workload still listening is then skipped by the probe). A host where that
//! directory cannot be used falls back to the probe alone, and says so.
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The host-wide claims this agent holds: port -> its locked file.
#[derive(Debug)]
pub(super) struct Claims {
    /// None: claims are off (the directory could not be used).
    dir: Option<PathBuf>,
    held: BTreeMap<u16, File>,
}

/// Where agents on this host claim ports: `caldera-replica-ports` in the
/// temp dir, shared by every agent whatever its uid (mode 1777, as /tmp).
pub fn claims_dir() -> PathBuf {
    std::env::temp_dir().join("caldera-replica-ports")
}

impl Claims {
    pub(super) fn open(dir: &Path) -> Claims {
        match prepare(dir) {
            Ok(()) => Claims {
                dir: Some(dir.to_path_buf()),
                held: BTreeMap::new(),
            },
            Err(e) => {
                tracing::warn!(
                    "replica ports are not claimed host-wide ({}: {e}); another agent \
                     on this host may hand out the same port",
                    dir.display()
                );
                Claims {
                    dir: None,
                    held: BTreeMap::new(),
                }
            }
        }
    }

    /// Claims `port` (true), or finds another agent holds it (false). With
    /// claims off every port counts as claimed.
    pub(super) fn claim(&mut self, port: u16) -> bool {
        let Some(dir) = &self.dir else {
            return true;
        };
        if self.held.contains_key(&port) {
            return true;
        }
        let path = dir.join(port.to_string());
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .or_else(|_| File::open(&path));
        match file {
            Ok(f) if f.try_lock().is_ok() => {
                self.held.insert(port, f);
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!("replica port {port}: cannot open {}: {e}", path.display());
                false
            }
        }
    }

    /// Lets go of every claim whose port no workload holds any more, and
    /// claims (best effort) the ones adopted workloads hold.
    pub(super) fn settle(&mut self, held: &BTreeSet<u16>) {
        self.held.retain(|port, _| held.contains(port));
        for port in held {
            self.claim(*port);
        }
    }

    pub(super) fn release(&mut self, port: u16) {
        self.held.remove(&port);
    }
}

/// The claims directory, made if missing (1777 when this agent made it).
fn prepare(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777))?;
    }
    Ok(())
}
