//! Pulls against real podman: the project's local registry on 127.0.0.1
//! (the seed's image name maps to it), or a stand-in registry on loopback.
//! Each test pulls into an image store of its own (`--root`/`--runroot`
//! in a temp dir), so it neither sees nor touches the host's images.
use super::*;
use caldera_chaos_tests::container_host::{self, SEED_IMAGE};
use caldera_chaos_tests::registry_standin::{Answer, StandinRegistry};
use caldera_spec::codes;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

/// A temp dir for one test's store and data dir. Podman's overlay driver
/// mounts `<root>/overlay` over itself on first use, and the disk-full
/// test mounts a small tmpfs: both are unmounted when the test ends, so the
/// dir can be removed.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Scratch {
        Scratch(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for m in ["small", "store/overlay"] {
            let Ok(c) = std::ffi::CString::new(self.path().join(m).display().to_string()) else {
                continue;
            };
            // SAFETY: a valid NUL-terminated path; a path that is not a
            // mount point only makes umount2 fail, which is ignored.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// A puller with a store and data dir of its own, under `dir`.
fn puller(dir: &Path) -> Puller {
    let mut p = Puller::new(PathBuf::from("podman"), &dir.join("data"));
    p.global_args = vec![
        "--root".into(),
        dir.join("store").display().to_string(),
        "--runroot".into(),
        dir.join("run").display().to_string(),
    ];
    p
}

/// Image names under this prefix pull from a test's stand-in registry (the
/// host's own registries.conf.d maps `registry.internal` to the local
/// registry, and its drop-ins are read whatever the main file says).
const STANDIN_PREFIX: &str = "caldera-test.internal";

/// [`puller`] whose podman reads `registries.conf` from `conf` (a
/// stand-in registry's) instead of the host's.
fn puller_for(dir: &Path, registry: &StandinRegistry) -> Puller {
    let conf = registry.registries_conf(dir, STANDIN_PREFIX).unwrap();
    let mut p = puller(dir);
    p.global_args
        .extend(["--registries-conf".to_string(), conf.display().to_string()]);
    p
}

fn start(image: &str, pull: PullPolicy, timeout_ms: u64) -> ContainerStart {
    ContainerStart {
        image: image.to_string(),
        pull,
        prepare_timeout_ms: timeout_ms,
        volumes: Vec::new(),
        registry_auth: None,
    }
}

/// Runs `ensure` on a current-thread runtime, collecting its reports.
fn run(
    p: &Puller,
    key: &str,
    s: &ContainerStart,
) -> (Result<Pulled, PullError>, Vec<PullProgress>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = reports.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(ensure(p, key, s, move |r| seen.lock().unwrap().push(r)));
    let reports = reports.lock().unwrap().clone();
    (out, reports)
}

/// The manifest digest the registry serves for `repo:tag` (its
/// `Docker-Content-Digest`), read with a plain HEAD request.
fn registry_digest(repo: &str, tag: &str) -> String {
    use std::io::{Read, Write};
    let addr = container_host::registry();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    let req = format!(
        "HEAD /v2/{repo}/manifests/{tag} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).unwrap();
    let mut head = String::new();
    conn.read_to_string(&mut head).unwrap();
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("docker-content-digest")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no digest in {head}"))
}

#[test]
fn the_seed_image_is_pulled_with_progress_and_its_digest_is_the_registrys() {
    container_host::require();
    let dir = Scratch::new();
    let p = puller(dir.path());
    let s = start(SEED_IMAGE, PullPolicy::IfNotPresent, 60_000);
    let (out, reports) = run(&p, "alloc-seed", &s);
    let pulled = out.unwrap();
    let served = registry_digest("deeplearning/pytorch", "2.1-cu12.1");
    assert_eq!(pulled.digest, served);
    assert!(pulled.pulled);
    // The first report says the pull began; the last that its one layer is in.
    let first = reports.first().expect("a report");
    assert_eq!((first.layers_done, first.layers_total), (0, 0));
    let last = reports.last().unwrap();
    assert_eq!((last.layers_done, last.layers_total), (1, 1), "{reports:?}");
    assert!(last.bytes_done > 500_000, "the busybox layer: {reports:?}");
    assert_eq!(last.image, SEED_IMAGE);
    assert!(
        !p.work_root.join("alloc-seed").exists(),
        "the pull's dir is removed"
    );

    // if_not_present: already here, nothing pulled, nothing reported.
    let (again, reports) = run(&p, "alloc-seed-2", &s);
    let again = again.unwrap();
    assert!(!again.pulled && again.digest == served, "{again:?}");
    assert!(reports.is_empty(), "{reports:?}");
    // always: pulled again (its layer already here is not downloaded).
    let always = start(SEED_IMAGE, PullPolicy::Always, 60_000);
    let (third, reports) = run(&p, "alloc-seed-3", &always);
    let third = third.unwrap();
    assert!(third.pulled && third.digest == served, "{third:?}");
    assert_eq!(reports.last().map(|r| r.layers_done), Some(1));
}

#[test]
fn the_bytes_of_the_layers_pulled_are_counted() {
    container_host::require();
    let dir = Scratch::new();
    let image = format!("{}/caldera-test/pull-bytes:1", container_host::registry());
    push_test_image(dir.path(), &image, 12_000_000);
    let p = puller(dir.path());
    let (out, reports) = run(
        &p,
        "alloc-bytes",
        &start(&image, PullPolicy::Always, 60_000),
    );
    let pulled = out.unwrap();
    let last = reports.last().unwrap();
    assert_eq!((last.layers_done, last.layers_total), (1, 1), "{reports:?}");
    // 12 MB of incompressible bytes in its layer, downloaded compressed.
    assert!(last.bytes_done >= 12_000_000, "{reports:?}");
    assert_eq!(pulled.progress, *last);
}

/// Puts a one-layer image of `size` incompressible bytes (the same bytes
/// every run, so the registry keeps one copy) into the local registry as
/// `image`; the host's store keeps nothing of it.
fn push_test_image(dir: &Path, image: &str, size: usize) {
    let root = dir.join("rootfs");
    std::fs::create_dir_all(&root).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(root.join("blob"), bytes).unwrap();
    let tar = dir.join("layer.tar");
    let ok = std::process::Command::new("tar")
        .args([
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--sort=name",
            "-C",
        ])
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar");
    let tar = tar.display().to_string();
    container_host::podman(&["import", "-q", &tar, image]).unwrap();
    let pushed = container_host::podman(&["push", "-q", "--tls-verify=false", image]);
    let _ = container_host::podman(&["rmi", "-f", image]);
    pushed.unwrap();
}

#[test]
fn a_missing_image_fails_at_once_with_its_code_and_one_try() {
    container_host::require();
    let registry = StandinRegistry::start(Answer::NotFound).unwrap();
    let dir = Scratch::new();
    let image = &format!("{STANDIN_PREFIX}/nope:1");
    let p = puller_for(dir.path(), &registry);
    let began = std::time::Instant::now();
    let (out, _) = run(
        &p,
        "alloc-nope",
        &start(image, PullPolicy::IfNotPresent, 60_000),
    );
    let e = out.unwrap_err();
    assert_eq!(e.error_code().code, codes::IMAGE_NOT_FOUND.code, "{e}");
    assert!(e.to_string().contains("not found"), "{e}");
    // One podman pull: its ping and one manifest read, not a retry storm.
    let manifests = registry
        .requests()
        .iter()
        .filter(|r| r.contains("/manifests/"))
        .count();
    assert_eq!(manifests, 1, "{:?}", registry.requests());
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "not retried until the timeout"
    );
}

#[test]
fn a_failing_registry_is_tried_again_and_called_unreachable() {
    container_host::require();
    let registry = StandinRegistry::start(Answer::ServerError).unwrap();
    let dir = Scratch::new();
    let image = format!("{}/flaky:1", registry.addr);
    let p = puller_for(dir.path(), &registry);
    let (out, _) = run(&p, "alloc-5xx", &start(&image, PullPolicy::Always, 3_000));
    let e = out.unwrap_err();
    assert_eq!(e.error_code().code, codes::REGISTRY_UNREACHABLE.code, "{e}");
    let PullError::Unreachable { attempts, .. } = e else {
        panic!("{e}")
    };
    // 500 ms, then 1 s, 2 s... within 3 s: two or three tries, not dozens.
    assert!((2..=4).contains(&attempts), "{attempts} tries");
}

#[test]
fn a_registry_that_never_answers_times_out_saying_where_and_the_credentials_are_gone() {
    container_host::require();
    let registry = StandinRegistry::start(Answer::Silent).unwrap();
    let dir = Scratch::new();
    let image = format!("{}/stuck:1", registry.addr);
    let p = puller_for(dir.path(), &registry);
    let mut s = start(&image, PullPolicy::Always, 3_000);
    let secret = r#"{"auths":{"127.0.0.1":{"auth":"dXNlcjpzM2NyZXQ="}}}"#;
    s.registry_auth = Some(secret.into());
    let work = p.work_root.join("alloc-stuck");
    let watcher = {
        let work = work.clone();
        std::thread::spawn(move || {
            // While the pull hangs: the credentials are in a 0600 file in a
            // 0700 dir.
            let auth = work.join("auth.json");
            for _ in 0..200 {
                if auth.exists() {
                    let mode =
                        |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
                    return Some((
                        mode(&work),
                        mode(&auth),
                        std::fs::read_to_string(&auth).ok(),
                    ));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            None
        })
    };
    let (out, reports) = run(&p, "alloc-stuck", &s);
    let seen = watcher.join().unwrap();
    let (dir_mode, file_mode, body) = seen.expect("the auth file while pulling");
    assert_eq!((dir_mode, file_mode), (0o700, 0o600));
    assert_eq!(body.as_deref(), Some(secret));
    let e = out.unwrap_err();
    assert_eq!(e.error_code().code, codes::PULL_TIMED_OUT.code, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("within the prepare timeout of 3 s: no layer started yet"),
        "{text}"
    );
    assert!(!text.contains("dXNlcjpzM2NyZXQ"), "{text}");
    assert!(
        !work.exists(),
        "the credentials are removed with the pull's dir"
    );
    assert!(registry.connections() >= 1);
    assert_eq!(reports.len(), 1, "one report: the pull began, {reports:?}");
}

#[test]
fn a_full_disk_fails_at_once_as_disk_full() {
    container_host::require();
    let dir = Scratch::new();
    let image = format!("{}/caldera-test/pull-bytes:1", container_host::registry());
    push_test_image(dir.path(), &image, 12_000_000);
    // The pull's own dir (where podman downloads) on a 2 MiB tmpfs: the
    // 12 MB layer does not fit.
    let small = dir.path().join("small");
    std::fs::create_dir_all(&small).unwrap();
    let c = |t: &str| std::ffi::CString::new(t).unwrap();
    let target = c(&small.display().to_string());
    let (fs, opts) = (c("tmpfs"), c("size=2m"));
    // SAFETY: valid NUL-terminated strings; Scratch unmounts it.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            opts.as_ptr().cast(),
        )
    };
    assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
    let mut p = puller(dir.path());
    p.work_root = small.join("pulls");
    let (out, _) = run(&p, "alloc-full", &start(&image, PullPolicy::Always, 60_000));
    let e = out.unwrap_err();
    assert_eq!(e.error_code().code, codes::IMAGE_DISK_FULL.code, "{e}");
    assert!(e.to_string().contains("no space left on device"), "{e}");
    assert!(!small.join("pulls/alloc-full").exists());
}
