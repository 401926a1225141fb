//! CPU, memory and disks through sysinfo. Only what a heartbeat needs is
//! refreshed (memory, CPU usage, disk space and IO counters): no process table,
//! which is what keeps the agent small.
use caldera_spec::DiskInfo;
use std::path::{Path, PathBuf};
use std::time::Instant;
use sysinfo::{DiskRefreshKind, Disks, System};

const MIB: u64 = 1024 * 1024;

/// Figures declared with `--simulate-*` instead of probed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclaredHost {
    pub cpu_cores: Option<u32>,
    pub memory_mb: Option<u64>,
    pub disk_mb: Option<u64>,
}

impl DeclaredHost {
    /// True when any figure is declared.
    pub fn any(&self) -> bool {
        self.cpu_cores.is_some() || self.memory_mb.is_some() || self.disk_mb.is_some()
    }
}

/// Host figures of one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSample {
    pub cpu_used_pct: f32,
    pub memory_used_mb: u64,
    pub disk_free_mb: u64,
    pub disk_read_bytes_per_s: u64,
    pub disk_write_bytes_per_s: u64,
}

/// The sysinfo handles, kept between samples so rates can be computed.
pub struct HostProbe {
    system: System,
    disks: Disks,
    data_dir: PathBuf,
    declared: DeclaredHost,
    last_io: Instant,
}

/// Why the host's CPUs, memory or disks could not be read at start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostProbeError {
    #[error("sysinfo: {0}")]
    System(String),
    #[error("sysinfo disks: {0}")]
    Disks(String),
}

impl HostProbe {
    /// Loads the CPU list, memory and disk list once.
    pub fn new(data_dir: &Path, declared: DeclaredHost) -> Result<Self, HostProbeError> {
        let mut system = System::new().map_err(|e| HostProbeError::System(e.to_string()))?;
        system.refresh_cpu_usage();
        system.refresh_memory();
        let disks = Disks::new_with_refreshed_list_specifics(
            DiskRefreshKind::nothing().with_storage().with_io_usage(),
        )
        .map_err(|e| HostProbeError::Disks(e.to_string()))?;
        // Canonical so the longest-mount-prefix match below sees through symlinks.
        let data_dir = data_dir
            .canonicalize()
            .unwrap_or_else(|_| data_dir.to_path_buf());
        Ok(HostProbe {
            system,
            disks,
            data_dir,
            declared,
            last_io: Instant::now(),
        })
    }

    /// Logical CPU cores offered (declared or probed).
    pub fn cpu_cores(&self) -> u32 {
        self.declared
            .cpu_cores
            .unwrap_or_else(|| self.system.cpus().len().max(1) as u32)
    }

    /// Memory offered, MiB.
    pub fn memory_total_mb(&self) -> u64 {
        self.declared
            .memory_mb
            .unwrap_or_else(|| self.system.total_memory() / MIB)
    }

    /// Every mounted disk, deduplicated by mount point.
    pub fn disks(&self) -> Vec<DiskInfo> {
        let mut out: Vec<DiskInfo> = Vec::new();
        for disk in self.disks.iter() {
            let mount = disk.mount_point().to_string_lossy().into_owned();
            if out.iter().any(|d| d.mount == mount) {
                continue;
            }
            out.push(DiskInfo {
                mount,
                total_mb: disk.total_space() / MIB,
                free_mb: disk.available_space() / MIB,
            });
        }
        out
    }

    /// Disk offered to workloads: declared, else the free space of the data dir's filesystem.
    pub fn disk_offered_mb(&self) -> u64 {
        self.declared
            .disk_mb
            .unwrap_or_else(|| self.data_dir_free_mb())
    }

    /// Free space of the filesystem holding the data dir (longest mount prefix).
    fn data_dir_free_mb(&self) -> u64 {
        self.disks
            .iter()
            .filter(|d| self.data_dir.starts_with(d.mount_point()))
            .max_by_key(|d| d.mount_point().as_os_str().len())
            .map(|d| d.available_space() / MIB)
            .unwrap_or(0)
    }

    /// Refreshes memory, CPU usage and disks, and returns the sample.
    pub fn sample(&mut self) -> HostSample {
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        self.disks.refresh_specifics(
            false,
            DiskRefreshKind::nothing().with_storage().with_io_usage(),
        );
        let elapsed = self.last_io.elapsed().as_secs_f64().max(0.001);
        self.last_io = Instant::now();
        // Several mounts of one device (bind mounts) share counters: count each device once.
        let mut seen: Vec<&std::ffi::OsStr> = Vec::new();
        let (mut read, mut written) = (0u64, 0u64);
        for disk in self.disks.iter() {
            if seen.contains(&disk.name()) {
                continue;
            }
            seen.push(disk.name());
            let usage = disk.usage();
            read = read.saturating_add(usage.read_bytes);
            written = written.saturating_add(usage.written_bytes);
        }
        let memory_used_mb = self.system.used_memory() / MIB;
        HostSample {
            cpu_used_pct: self.system.global_cpu_usage(),
            memory_used_mb: memory_used_mb.min(self.memory_total_mb()),
            disk_free_mb: match self.declared.disk_mb {
                Some(mb) => mb,
                None => self.data_dir_free_mb(),
            },
            disk_read_bytes_per_s: (read as f64 / elapsed) as u64,
            disk_write_bytes_per_s: (written as f64 / elapsed) as u64,
        }
    }
}
