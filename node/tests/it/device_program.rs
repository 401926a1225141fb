//! The cgroup v2 device program, on the real kernel: a process in a cgroup
//! with the program attached cannot open the denied character device and can
//! open any other. `/dev/zero` stands in for another workload's GPU (this
//! host has no /dev/nvidia*); the program treats every (major, minor) alike.
//!
//! Needs root and a cgroup v2 hierarchy (the unified mount, or the hybrid
//! `/sys/fs/cgroup/unified`); without them the test says so and checks
//! nothing else.
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first cgroup2 mount point, from /proc/self/mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(point))
    })
}

fn rdev(path: &str) -> (u32, u32) {
    let r = std::fs::metadata(path).unwrap().rdev();
    (libc::major(r), libc::minor(r))
}

/// Runs `head -c 1 <device>` inside `cgroup`; the shell joins it first.
fn read_one_byte_in(cgroup: &Path, device: &str) -> std::process::Output {
    let procs = cgroup.join("cgroup.procs");
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {} && exec head -c 1 {device}",
            procs.display()
        ))
        .output()
        .unwrap()
}

#[test]
fn a_denied_device_cannot_be_opened_inside_the_cgroup_and_others_can() {
    let Some(mount) = cgroup2_mount() else {
        eprintln!("no cgroup2 hierarchy on this host: nothing to test");
        return;
    };
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: device programs cannot be loaded; nothing to test");
        return;
    }
    let cg = mount.join(format!("caldera-devtest-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    let zero = rdev("/dev/zero");
    let before = read_one_byte_in(&cg, "/dev/zero");
    assert!(before.status.success(), "{before:?}");
    caldera_node::device_program::attach_deny(&cg, &[zero]).unwrap();
    let denied = read_one_byte_in(&cg, "/dev/zero");
    let allowed = read_one_byte_in(&cg, "/dev/urandom");
    // Outside the cgroup the device stays open (the test process).
    let outside = std::fs::File::open("/dev/zero");
    let _ = std::fs::remove_dir(&cg);
    assert!(!denied.status.success(), "{denied:?}");
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(allowed.status.success(), "{allowed:?}");
    assert_eq!(allowed.stdout.len(), 1);
    assert!(outside.is_ok());
}
