//! Tenants on the node: each tenant's workloads run as one unprivileged uid of
//! its own, from a configured range (`--workload-uid-range`), so one tenant
//! cannot read another's log, checkpoints, scratch files or
//! `/proc/<pid>/environ` (the kernel lets only the same uid, or root, read a
//! process's environment). The tenant -> uid map is kept in
//! `<data-dir>/tenant-uids.json`, so a tenant keeps its uid across agent
//! restarts (its files stay its own), and no uid ever serves two tenants.
//!
//! This takes a root agent. One that is not root, or whose data dir other
//! users cannot reach (a parent dir of mode 0700), runs workloads as itself
//! and says so: in its log at startup and in every `Ready` event's isolation
//! label.
use crate::error::StartError;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The map's file in the data dir.
const MAP_FILE: &str = "tenant-uids.json";

/// How workloads are kept apart by identity on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenancy {
    mode: Mode,
    map_path: PathBuf,
    map: BTreeMap<String, u32>,
    /// Why the map file could not be read: then no uid is given out at all
    /// (starting over could hand a tenant's old uid, and files, to another).
    unreadable: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// One uid (and gid of the same number) per tenant, from `first..=last`.
    UidPerTenant { first: u32, last: u32 },
    /// Every workload runs as the agent's own uid; the string says why.
    Shared(String),
}

/// A `workload-uid-range` that is neither `FIRST-LAST` within the bounds
/// nor `off`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workload uid range {0:?} must be FIRST-LAST with 1000 <= FIRST <= LAST, or off")]
pub struct BadUidRange(pub String);

/// `"61000-61999"` -> (61000, 61999); `off` -> None.
pub fn parse_range(text: &str) -> Result<Option<(u32, u32)>, BadUidRange> {
    let text = text.trim();
    if text == "off" {
        return Ok(None);
    }
    let parsed = text
        .split_once('-')
        .and_then(|(a, b)| Some((a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?)));
    match parsed {
        Some((first, last)) if first >= 1000 && first <= last => Ok(Some((first, last))),
        _ => Err(BadUidRange(text.to_string())),
    }
}

impl Tenancy {
    /// Decides the mode for an agent with `data_dir` (absolute) and `range`,
    /// and reads the map kept there.
    pub fn new(data_dir: &Path, range: Option<(u32, u32)>) -> Tenancy {
        let map_path = data_dir.join(MAP_FILE);
        // SAFETY: geteuid has no memory effects.
        let euid = unsafe { libc::geteuid() };
        let mode = match range {
            None => Mode::Shared(format!("uid isolation off; workloads run as uid {euid}")),
            Some(_) if euid != 0 => Mode::Shared(format!(
                "the agent is not root (uid {euid}); workloads run as uid {euid}"
            )),
            Some((first, last)) => match unreachable_ancestor(data_dir) {
                Some(dir) => Mode::Shared(format!(
                    "{} is not reachable by other users (mode 0700?); workloads run as uid 0",
                    dir.display()
                )),
                None => Mode::UidPerTenant { first, last },
            },
        };
        let (map, unreadable) = match crate::shim::files::read_json(&map_path) {
            Ok(map) => (map, None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (BTreeMap::new(), None),
            Err(e) => {
                tracing::error!(
                    "{} is unreadable ({e}): no workload can start until it is fixed",
                    map_path.display()
                );
                (BTreeMap::new(), Some(e.to_string()))
            }
        };
        Tenancy {
            mode,
            map_path,
            map,
            unreadable,
        }
    }

    /// True when each tenant gets a uid of its own.
    pub fn separates_tenants(&self) -> bool {
        matches!(self.mode, Mode::UidPerTenant { .. })
    }

    /// What this node does, for logs and the inventory.
    pub fn label(&self) -> String {
        match &self.mode {
            Mode::UidPerTenant { first, last } => match crate::proc_hiding::check() {
                Ok(()) => format!("uid per tenant ({first}-{last}), own /proc"),
                Err(why) => format!(
                    "uid per tenant ({first}-{last}), other uids' processes visible in /proc ({why})"
                ),
            },
            Mode::Shared(why) => format!("no uid isolation ({why})"),
        }
    }

    /// The uid `tenant`'s workloads run as (None: the agent's own), given out
    /// on first use and kept in the map file.
    pub fn uid_of(&mut self, tenant: &str) -> Result<Option<u32>, StartError> {
        let Mode::UidPerTenant { first, last } = self.mode else {
            return Ok(None);
        };
        if let Some(why) = &self.unreadable {
            return Err(StartError::Prepare {
                path: self.map_path.clone(),
                source: io::Error::new(io::ErrorKind::InvalidData, why.clone()),
            });
        }
        if let Some(uid) = self.map.get(tenant) {
            return Ok(Some(*uid));
        }
        let taken: std::collections::BTreeSet<u32> = self.map.values().copied().collect();
        let Some(uid) = (first..=last).find(|u| !taken.contains(u)) else {
            return Err(StartError::UidsExhausted {
                tenant: tenant.to_string(),
                range: format!("{first}-{last}"),
            });
        };
        self.map.insert(tenant.to_string(), uid);
        let bytes = serde_json::to_vec_pretty(&self.map).map_err(io::Error::other);
        let written = bytes.and_then(|b| crate::shim::files::write_atomic(&self.map_path, &b));
        if let Err(source) = written {
            // Not handed out unless remembered: a restart must give it back to the same tenant.
            self.map.remove(tenant);
            return Err(StartError::Prepare {
                path: self.map_path.clone(),
                source,
            });
        }
        tracing::info!("tenant {tenant} runs as uid {uid} on this node");
        Ok(Some(uid))
    }
}

/// Makes `dir` (created if missing) belong to `uid` with mode 0700; with no
/// uid it is only created.
pub fn own_dir(dir: &Path, uid: Option<u32>) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    if let Some(uid) = uid {
        std::os::unix::fs::chown(dir, Some(uid), Some(uid))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Makes the file `path` belong to `uid`, mode 0600 (created if missing).
pub fn own_file(path: &Path, uid: Option<u32>) -> io::Result<()> {
    let f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    if let Some(uid) = uid {
        std::os::unix::fs::fchown(&f, Some(uid), Some(uid))?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// The first of `dir` and its ancestors that others cannot enter (no o+x).
fn unreachable_ancestor(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 == 0))
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_or_name_the_problem() {
        assert_eq!(parse_range("61000-61999"), Ok(Some((61000, 61999))));
        assert_eq!(parse_range("off"), Ok(None));
        for bad in ["61999-61000", "0-10", "x-y", "61000"] {
            assert!(
                parse_range(bad).unwrap_err().to_string().contains(bad),
                "{bad}"
            );
        }
    }

    #[test]
    fn tenants_get_distinct_uids_that_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tenancy::new(dir.path(), Some((61000, 61001)));
        // Forced on: the decision of `new` depends on who runs the test.
        t.mode = Mode::UidPerTenant {
            first: 61000,
            last: 61001,
        };
        assert_eq!(t.uid_of("a").unwrap(), Some(61000));
        assert_eq!(t.uid_of("b").unwrap(), Some(61001));
        assert_eq!(t.uid_of("a").unwrap(), Some(61000));
        let err = t.uid_of("c").unwrap_err();
        assert!(err.to_string().contains("61000-61001"), "{err}");
        let mut again = Tenancy::new(dir.path(), Some((61000, 61001)));
        again.mode = t.mode.clone();
        assert_eq!(again.uid_of("b").unwrap(), Some(61001));
    }

    #[test]
    fn an_unreadable_map_hands_out_no_uid_twice() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MAP_FILE), b"{oops").unwrap();
        let mut t = Tenancy::new(dir.path(), None);
        t.mode = Mode::UidPerTenant {
            first: 61000,
            last: 61001,
        };
        let err = t.uid_of("a").unwrap_err();
        assert!(err.to_string().contains(MAP_FILE), "{err}");
    }
}
