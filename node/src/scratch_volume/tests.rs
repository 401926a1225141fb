//! Real loop mounts: these need root and loop devices, as the container
//! host has them (`scripts/container-host`).
use super::*;
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::time::Instant;

/// A data dir whose scratch filesystems are released when it goes.
struct DataDir {
    _dir: tempfile::TempDir,
    volumes: ScratchVolumes,
}

impl DataDir {
    fn new() -> DataDir {
        let dir = tempfile::tempdir().unwrap();
        let volumes = ScratchVolumes::detect(dir.path());
        assert!(volumes.available(), "{}", volumes.label());
        DataDir { _dir: dir, volumes }
    }

    /// The allocation's scratch dir, made as the runtime makes it.
    fn scratch(&self, allocation_id: &str) -> PathBuf {
        let d = self.volumes.scratch_dir_of(allocation_id);
        fs::create_dir_all(&d).unwrap();
        d
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        self.volumes.release_all_but(&BTreeSet::new());
    }
}

/// Size and free bytes of the filesystem holding `path`.
fn statvfs(path: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path and a zeroed struct statvfs fills.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (
        s.f_blocks * s.f_frsize as u64,
        s.f_bavail * s.f_frsize as u64,
    )
}

/// Writes up to `mb` MiB into `path`; the error that stopped it, if any.
fn fill(path: &Path, mb: usize) -> Option<io::Error> {
    let mut f = fs::File::create(path).unwrap();
    let block = vec![7u8; 1024 * 1024];
    for _ in 0..mb {
        if let Err(e) = f.write_all(&block) {
            return Some(e);
        }
    }
    f.sync_all().err()
}

#[test]
fn a_sized_scratch_holds_its_size_for_the_workload_and_release_takes_it_away() {
    let d = DataDir::new();
    let dir = d.scratch("acme/a1");
    assert_eq!(
        d.volumes
            .size("acme/a1", 64, Some(54321))
            .map_err(|e| e.to_string()),
        Ok(true)
    );
    let (total, free) = statvfs(&dir);
    assert!(
        total <= 64 << 20 && free >= 50 << 20,
        "a 64 MiB filesystem nearly all free: {total} bytes, {free} free"
    );
    let root = fs::metadata(&dir).unwrap();
    assert_eq!((root.uid(), root.mode() & 0o777), (54321, 0o700));
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        0,
        "empty, as a fresh scratch dir"
    );
    let err = fill(&dir.join("big"), 200).expect("200 MiB do not fit in 64");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    let image = d.volumes.image_of("acme/a1");
    let on_disk = fs::metadata(&image).unwrap().blocks() * 512;
    assert!(
        on_disk <= 64 << 20,
        "the node's disk holds at most the image: {on_disk} bytes"
    );
    d.volumes.release("acme/a1");
    assert!(!image.exists(), "the image is deleted");
    assert!(!is_mount_point(&dir), "the filesystem is unmounted");
    assert!(!dir.join("big").exists(), "what it held went with it");
}

#[test]
fn an_agent_releases_the_scratch_of_allocations_it_no_longer_holds_and_keeps_the_others() {
    let d = DataDir::new();
    let (kept, gone) = (d.scratch("acme/kept"), d.scratch("acme/gone"));
    assert_eq!(
        d.volumes
            .size("acme/kept", 64, None)
            .map_err(|e| e.to_string()),
        Ok(true)
    );
    assert_eq!(
        d.volumes
            .size("acme/gone", 64, None)
            .map_err(|e| e.to_string()),
        Ok(true)
    );
    fs::write(kept.join("work"), "still here").unwrap();
    let held = BTreeSet::from(["acme/kept".to_string()]);
    assert_eq!(d.volumes.release_all_but(&held), 1);
    assert!(is_mount_point(&kept) && d.volumes.image_of("acme/kept").exists());
    assert_eq!(fs::read_to_string(kept.join("work")).unwrap(), "still here");
    assert!(!is_mount_point(&gone) && !d.volumes.image_of("acme/gone").exists());
    assert_eq!(
        d.volumes.release_all_but(&held),
        0,
        "nothing left to release"
    );
}

#[test]
fn a_failed_sizing_leaves_nothing_behind_and_says_why() {
    let d = DataDir::new();
    // No scratch dir to mount on.
    let err = d
        .volumes
        .size("acme/nodir", 64, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("64 MiB") && err.contains("mount"), "{err}");
    assert!(!d.volumes.image_of("acme/nodir").exists());
}

#[test]
fn without_loop_devices_scratch_stays_unsized_and_the_label_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let why = find_tools(&dir.path().join("loop-control")).unwrap_err();
    assert!(
        matches!(&why, Unsized::NoLoopDevices(p) if p.ends_with("loop-control"))
            || why == Unsized::NotRoot,
        "{why}"
    );
    let volumes = ScratchVolumes {
        data_dir: dir.path().to_path_buf(),
        tools: Err(why.clone()),
    };
    fs::create_dir_all(volumes.scratch_dir_of("acme/a")).unwrap();
    assert!(matches!(volumes.size("acme/a", 64, None), Ok(false)));
    assert!(!volumes.image_of("acme/a").exists());
    assert_eq!(
        volumes.label(),
        format!("container scratch not sized ({why})")
    );
}

/// `cargo test -p caldera-node --lib scratch_volume -- --ignored --nocapture`:
/// how long making and mounting a scratch filesystem takes (figures in
/// docs/benchmarks/containers.md).
#[test]
#[ignore]
fn bench_sizing_scratch_of_1_gib_and_200_gib() {
    let d = DataDir::new();
    for (id, gib) in [("acme/one", 1u64), ("acme/two-hundred", 200)] {
        d.scratch(id);
        let mut runs = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            assert_eq!(
                d.volumes
                    .size(id, gib * 1024, None)
                    .map_err(|e| e.to_string()),
                Ok(true)
            );
            let made = t.elapsed();
            let on_disk = fs::metadata(d.volumes.image_of(id)).unwrap().blocks() * 512;
            let t = Instant::now();
            d.volumes.release(id);
            runs.push((made, t.elapsed(), on_disk));
        }
        runs.sort();
        let (made, released, on_disk) = runs[runs.len() / 2];
        println!(
            "{gib} GiB: mkfs+mount {made:?} (median of 5), unmount+delete {released:?}, \
             image on disk {} KiB",
            on_disk / 1024
        );
    }
}
