//! Per-workload CPU and memory limits through cgroups, where the host lets the
//! agent create them. Detected once at startup; the result is reported in the
//! inventory (`isolation`) and in every `Ready` event, so nobody assumes limits
//! that are not there.
//!
//! Layout: under the agent's own cgroup (read from /proc/self/cgroup), one
//! `caldera-<node>-<data-dir hash>` directory, and in it one directory per allocation. The
//! workload joins its cgroup from `pre_exec` by writing "0" to a `cgroup.procs`
//! file its shim opened beforehand, so it is limited before its first
//! instruction; the shim itself stays outside (a `cgroup.kill` spares it).
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// CFS period used for CPU quotas (100 ms, the kernel default).
const CPU_PERIOD_US: u64 = 100_000;

/// What isolation the runtime can apply on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Unified hierarchy; `base` is this agent's `caldera-<node>-<hash>`
    /// directory. `devices`: the agent may load eBPF device programs
    /// ([`crate::device_program`]), so GPU device files can be denied.
    V2 { base: PathBuf, devices: bool },
    /// Legacy hierarchy; one base per controller (`devices` where the host
    /// has that controller and lets the agent use it: GPU device files).
    V1 {
        cpu: PathBuf,
        memory: PathBuf,
        devices: Option<PathBuf>,
    },
    /// No limits; the string says why.
    None(String),
}

/// The agent's base cgroup's name: its node name and a stable hash (FNV-1a,
/// the same in every build) of its data dir.
fn base_name(node_name: &str, data_dir: &Path) -> String {
    let hash = data_dir
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0x811c_9dc5u32, |h, b| {
            (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
        });
    format!("caldera-{node_name}-{hash:08x}")
}

impl Isolation {
    /// Finds a usable hierarchy and creates this agent's base directory in it,
    /// `caldera-<node>-<hash of the data dir>`. The data dir is part of the
    /// name because allocation ids repeat across clusters (`team-a+train.1`):
    /// two agents of one name on a host (two clusters, parallel tests) that
    /// shared a base would share an allocation's cgroup, and reaping one's
    /// workload killed the other's. The same data dir gives the same base,
    /// so a restarted agent finds the cgroups of the shims it adopts.
    pub fn detect(node_name: &str, data_dir: &Path) -> Isolation {
        Self::detect_at(Path::new(CGROUP_ROOT), &base_name(node_name, data_dir))
    }

    fn detect_at(root: &Path, leaf: &str) -> Isolation {
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        if let Ok(controllers) = fs::read_to_string(root.join("cgroup.controllers")) {
            let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
            if !(has("cpu") && has("memory")) {
                return Isolation::None(format!(
                    "cgroup v2 without cpu+memory controllers ({})",
                    controllers.trim()
                ));
            }
            let parent = root.join(own_path(&own, "").trim_start_matches('/'));
            let base = parent.join(leaf);
            return match setup_v2(&parent, &base) {
                Ok(()) => Isolation::V2 {
                    base,
                    devices: match crate::device_program::can_load() {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(
                                "cgroup v2 without device programs ({e}): other GPUs' \
                                 /dev/nvidia* stay open to workloads"
                            );
                            false
                        }
                    },
                },
                Err(e) => Isolation::None(format!(
                    "cgroup v2 at {} is not delegated to the agent: {e}",
                    parent.display()
                )),
            };
        }
        let cpu_root = root.join("cpu");
        let mem_root = root.join("memory");
        if cpu_root.join("cpu.cfs_quota_us").exists()
            && mem_root.join("memory.limit_in_bytes").exists()
        {
            let cpu = cpu_root
                .join(own_path(&own, "cpu").trim_start_matches('/'))
                .join(leaf);
            let memory = mem_root
                .join(own_path(&own, "memory").trim_start_matches('/'))
                .join(leaf);
            let devices_root = root.join("devices");
            let devices = devices_root
                .join("devices.deny")
                .exists()
                .then(|| {
                    devices_root
                        .join(own_path(&own, "devices").trim_start_matches('/'))
                        .join(leaf)
                })
                .filter(|d| fs::create_dir_all(d).is_ok());
            return match fs::create_dir_all(&cpu).and_then(|_| fs::create_dir_all(&memory)) {
                Ok(()) => Isolation::V1 {
                    cpu,
                    memory,
                    devices,
                },
                Err(e) => Isolation::None(format!("cgroup v1 is not writable: {e}")),
            };
        }
        Isolation::None(format!(
            "no cgroup hierarchy with cpu and memory under {}",
            root.display()
        ))
    }

    /// SIGKILLs whatever is left in an allocation's cgroup(s) once its
    /// workload has ended (or its shim was lost) and removes them; returns how
    /// many processes were killed. This also catches processes that left the
    /// workload's process group (setsid), which a group kill cannot see.
    pub fn reap(&self, allocation_id: &str) -> usize {
        let name = caldera_spec::node::safe_file_name(allocation_id);
        let dirs: Vec<PathBuf> = self.base_dirs().iter().map(|b| b.join(&name)).collect();
        let killed: usize = dirs.iter().map(|d| kill_procs(d)).sum();
        for dir in dirs.iter().filter(|d| d.exists()) {
            // Killed processes take a moment to leave the cgroup.
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        killed
    }

    fn base_dirs(&self) -> Vec<&PathBuf> {
        match self {
            Isolation::V2 { base, .. } => vec![base],
            Isolation::V1 {
                cpu,
                memory,
                devices,
            } => [Some(cpu), Some(memory), devices.as_ref()]
                .into_iter()
                .flatten()
                .collect(),
            Isolation::None(_) => Vec::new(),
        }
    }

    /// Removes this node's base directories if empty (at a clean shutdown),
    /// and the copies of the memory base's path that podman's runtime made
    /// in the other hierarchies for containers placed under it.
    pub fn cleanup(&self) {
        for dir in self.base_dirs() {
            if let Err(e) = fs::remove_dir(dir) {
                tracing::debug!("cgroup {} not removed: {e}", dir.display());
            }
        }
        let memory_base = match self {
            Isolation::V2 { base, .. } => Some(base),
            Isolation::V1 { memory, .. } => Some(memory),
            Isolation::None(_) => None,
        };
        if let Some(parent) = memory_base.and_then(|b| crate::container::cgroups::parent_of(b)) {
            crate::container::cgroups::remove_tree(&parent);
        }
    }

    /// "cgroup-v2", "cgroup-v1" or "none (why)".
    pub fn label(&self) -> String {
        match self {
            Isolation::V2 { .. } => "cgroup-v2".to_string(),
            Isolation::V1 { .. } => "cgroup-v1".to_string(),
            Isolation::None(why) => format!("none ({why})"),
        }
    }

    /// True when workloads' device access can be limited (GPU device files).
    pub fn limits_devices(&self) -> bool {
        matches!(
            self,
            Isolation::V1 {
                devices: Some(_),
                ..
            } | Isolation::V2 { devices: true, .. }
        )
    }

    /// Creates the allocation's cgroup with its limits. `cpu_milli` 0 or
    /// `memory_mb` 0 leave that dimension unlimited; `deny` lists character
    /// devices (major, minor) the workload may not open, where devices can be
    /// limited.
    pub fn create(
        &self,
        allocation_id: &str,
        cpu_milli: u64,
        memory_mb: u64,
        deny: &[(u32, u32)],
    ) -> io::Result<Option<WorkloadCgroup>> {
        let name = caldera_spec::node::safe_file_name(allocation_id);
        match self {
            Isolation::None(_) => Ok(None),
            Isolation::V2 { base, devices } => {
                let dir = base.join(&name);
                fs::create_dir_all(&dir)?;
                if *devices && !deny.is_empty() {
                    crate::device_program::attach_deny(&dir, deny)?;
                }
                let cpu = if cpu_milli == 0 {
                    "max".to_string()
                } else {
                    format!("{} {CPU_PERIOD_US}", quota_us(cpu_milli))
                };
                write_file(&dir.join("cpu.max"), &cpu)?;
                let mem = if memory_mb == 0 {
                    "max".to_string()
                } else {
                    (memory_mb * 1024 * 1024).to_string()
                };
                write_file(&dir.join("memory.max"), &mem)?;
                Ok(Some(WorkloadCgroup {
                    dirs: vec![dir],
                    v2: true,
                }))
            }
            Isolation::V1 {
                cpu,
                memory,
                devices,
            } => {
                let cpu_dir = cpu.join(&name);
                let mem_dir = memory.join(&name);
                fs::create_dir_all(&cpu_dir)?;
                fs::create_dir_all(&mem_dir)?;
                write_file(
                    &cpu_dir.join("cpu.cfs_period_us"),
                    &CPU_PERIOD_US.to_string(),
                )?;
                let quota = if cpu_milli == 0 {
                    -1
                } else {
                    quota_us(cpu_milli) as i64
                };
                write_file(&cpu_dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                let limit = if memory_mb == 0 {
                    "-1".to_string()
                } else {
                    (memory_mb * 1024 * 1024).to_string()
                };
                write_file(&mem_dir.join("memory.limit_in_bytes"), &limit)?;
                let mut dirs = vec![cpu_dir, mem_dir];
                if let (Some(devices), false) = (devices, deny.is_empty()) {
                    let dev_dir = devices.join(&name);
                    fs::create_dir_all(&dev_dir)?;
                    for (major, minor) in deny {
                        let rule = format!("c {major}:{minor} rwm");
                        write_file(&dev_dir.join("devices.deny"), &rule)?;
                    }
                    dirs.push(dev_dir);
                }
                Ok(Some(WorkloadCgroup { dirs, v2: false }))
            }
        }
    }
}

/// CPU quota per period for `cpu_milli` thousandths of a core, at least 1 ms.
/// Example: 1500 milli-cores -> 150000 us per 100000 us period.
fn quota_us(cpu_milli: u64) -> u64 {
    (cpu_milli * CPU_PERIOD_US / 1000).max(1000)
}

/// The cgroup path of this process for `controller` ("" = the v2 line "0::").
fn own_path(proc_self_cgroup: &str, controller: &str) -> String {
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next(), parts.next(), parts.next());
        let (Some(ctrls), Some(path)) = (ctrls, path) else {
            continue;
        };
        let matches = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        if matches {
            return path.to_string();
        }
    }
    "/".to_string()
}

/// Enables cpu+memory for children of `parent` and creates `base` with them enabled too.
///
/// cgroup v2 refuses to enable controllers for the children of a cgroup that
/// itself holds processes (EBUSY), and the agent usually sits in `parent`.
/// Then the agent moves itself into a leaf beside `base` and tries once more;
/// if other processes share `parent`, isolation stays off and says why.
fn setup_v2(parent: &Path, base: &Path) -> io::Result<()> {
    let enable = || write_file(&parent.join("cgroup.subtree_control"), "+cpu +memory");
    if let Err(e) = enable() {
        if e.raw_os_error() != Some(libc::EBUSY) {
            return Err(e);
        }
        let name = base
            .file_name()
            .map(|n| format!("{}-agent", n.to_string_lossy()))
            .unwrap_or_else(|| "caldera-agent".to_string());
        let leaf = parent.join(name);
        fs::create_dir_all(&leaf)?;
        write_file(&leaf.join("cgroup.procs"), "0")?;
        enable().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{e} (other processes share the agent's cgroup)"),
            )
        })?;
    }
    fs::create_dir_all(base)?;
    write_file(&base.join("cgroup.subtree_control"), "+cpu +memory")
}

/// SIGKILLs every process listed in `dir/cgroup.procs`; returns how many.
fn kill_procs(dir: &Path) -> usize {
    let Ok(pids) = fs::read_to_string(dir.join("cgroup.procs")) else {
        return 0;
    };
    let mut n = 0;
    for pid in pids.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill(2) with a pid read from the cgroup; no memory is touched.
        if pid > 1 && unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            n += 1;
        }
    }
    n
}

fn write_file(path: &Path, content: &str) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(content.as_bytes())
        .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))
}

/// The cgroup(s) of one workload, as paths: its shim opens `cgroup.procs`
/// before forking, and the workload joins by writing "0" to it.
#[derive(Debug, Clone)]
pub struct WorkloadCgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl WorkloadCgroup {
    /// The `cgroup.procs` file of each directory.
    pub fn procs_paths(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The dir holding its memory limit and counters (v2: its one dir; v1:
    /// the memory hierarchy's).
    pub fn memory_dir(&self) -> Option<PathBuf> {
        match self.v2 {
            true => self.dirs.first().cloned(),
            false => self.dirs.get(1).cloned(),
        }
    }

    /// cgroup v2's `cgroup.kill` (kills every member at once), where there is one.
    pub fn kill_path(&self) -> Option<PathBuf> {
        self.v2
            .then(|| self.dirs.first().map(|d| d.join("cgroup.kill")))
            .flatten()
    }

    /// Removes the directories (they must be empty of processes by now).
    pub fn remove(&self) {
        for dir in &self.dirs {
            if let Err(e) = fs::remove_dir(dir) {
                tracing::debug!("cgroup {} not removed: {e}", dir.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_of_one_name_with_other_data_dirs_get_other_bases() {
        let a = base_name("node-a", Path::new("/srv/one/node-a"));
        let b = base_name("node-a", Path::new("/srv/two/node-a"));
        assert_ne!(a, b);
        assert!(a.starts_with("caldera-node-a-"), "{a}");
        assert_eq!(
            a,
            base_name("node-a", Path::new("/srv/one/node-a")),
            "stable"
        );
    }

    #[test]
    fn own_path_reads_v1_and_v2_lines() {
        let text = "4:memory:/a/b\n2:cpu,cpuacct:/c\n0::/d\n";
        assert_eq!(own_path(text, "memory"), "/a/b");
        assert_eq!(own_path(text, "cpu"), "/c");
        assert_eq!(own_path(text, ""), "/d");
        assert_eq!(own_path("", "cpu"), "/");
    }

    #[test]
    fn quota_is_proportional_with_a_floor() {
        assert_eq!(quota_us(1500), 150_000);
        assert_eq!(quota_us(1), 1000);
    }

    #[test]
    fn a_root_without_cgroups_is_reported_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let iso = Isolation::detect_at(dir.path(), "caldera-n-0");
        assert!(iso.label().starts_with("none ("), "{}", iso.label());
    }
}
