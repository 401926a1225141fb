//! Keeping a workload to its GPUs. `CUDA_VISIBLE_DEVICES` always names only
//! the allocation's; where the host has NVIDIA device files (`/dev/nvidiaN`)
//! and a device cgroup (cgroup v1's `devices` controller, or on cgroup v2 an
//! eBPF device program, [`crate::device_program`]), the workload's cgroup also
//! denies the files of the GPUs it was not given, so a workload that ignores
//! the variable cannot open them ("Operation not permitted"). GPU index N is
//! taken to be `/dev/nvidiaN` (the driver numbers its minors that way on
//! ordinary hosts).
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// One `/dev/nvidiaN` character device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuDevice {
    pub index: u32,
    pub major: u32,
    pub minor: u32,
}

/// The `nvidia<N>` character devices in `dev_dir`, by index.
pub fn find(dev_dir: &Path) -> Vec<GpuDevice> {
    let Ok(entries) = std::fs::read_dir(dev_dir) else {
        return Vec::new();
    };
    let mut found: Vec<GpuDevice> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let index = name.to_str()?.strip_prefix("nvidia")?.parse::<u32>().ok()?;
            let meta = e.metadata().ok()?;
            if !meta.file_type().is_char_device() {
                return None;
            }
            let rdev = meta.rdev();
            Some(GpuDevice {
                index,
                major: libc::major(rdev),
                minor: libc::minor(rdev),
            })
        })
        .collect();
    found.sort_by_key(|d| d.index);
    found
}

/// (major, minor) of every GPU device not in `allocated`.
pub fn denied(devices: &[GpuDevice], allocated: &[u32]) -> Vec<(u32, u32)> {
    devices
        .iter()
        .filter(|d| !allocated.contains(&d.index))
        .map(|d| (d.major, d.minor))
        .collect()
}

/// What is done, for the isolation labels.
pub fn label(devices: &[GpuDevice], cgroup_limits_devices: bool) -> String {
    match (devices.is_empty(), cgroup_limits_devices) {
        (true, _) => "gpus: CUDA_VISIBLE_DEVICES (no /dev/nvidia* on this host)".to_string(),
        (false, true) => {
            "gpus: CUDA_VISIBLE_DEVICES + devices cgroup (other GPUs' /dev/nvidia* denied)"
                .to_string()
        }
        (false, false) => {
            "gpus: CUDA_VISIBLE_DEVICES only (no devices cgroup: /dev/nvidia* stays open)"
                .to_string()
        }
    }
}

/// How a container's GPUs reach it: `gpus: nvidia.com/gpu=0,3 through CDI`
/// (the simulated spec's stand-in devices on simulated GPUs), or `gpus: none`.
pub fn cdi_label(indices: &[u32], simulated: bool) -> String {
    if indices.is_empty() {
        return "gpus: none".into();
    }
    let list: Vec<String> = indices.iter().map(u32::to_string).collect();
    let what = if simulated {
        " (simulated devices)"
    } else {
        ""
    };
    format!("gpus: nvidia.com/gpu={} through CDI{what}", list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allocations_gpus_stay_open() {
        let d = |index| GpuDevice {
            index,
            major: 195,
            minor: index,
        };
        assert_eq!(denied(&[d(0), d(1), d(2)], &[1]), vec![(195, 0), (195, 2)]);
        assert!(label(&[], false).contains("no /dev/nvidia*"));
        assert_eq!(
            cdi_label(&[0, 3], true),
            "gpus: nvidia.com/gpu=0,3 through CDI (simulated devices)"
        );
        assert_eq!(cdi_label(&[1], false), "gpus: nvidia.com/gpu=1 through CDI");
        assert_eq!(cdi_label(&[], false), "gpus: none");
        assert!(label(&[d(0)], true).contains("devices cgroup"));
        assert!(label(&[d(0)], false).contains("stays open"));
    }

    #[test]
    fn plain_files_named_like_gpus_are_not_devices() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nvidia0"), b"").unwrap();
        assert!(find(dir.path()).is_empty());
    }
}
