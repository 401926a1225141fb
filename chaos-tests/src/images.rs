//! Images for the image-cache tests and benchmark, and a meter of what the
//! registry serves.
//!
//! Each test makes its own images (a file of random bytes imported as an
//! image and pushed to the local registry), so no image another test uses
//! is ever evicted; each agent gets its own container store
//! ([`NodeStore`]), so "on this node" means something on one host; and
//! [`RegistryMeter`] stands between each agent and the registry, one port
//! per agent, counting bytes served and how many agents pull at once.
use crate::container_host::{registry, PodmanError};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A container store of its own (podman's `CONTAINERS_STORAGE_CONF`), for
/// one agent; its containers and images are removed when it is dropped.
pub struct NodeStore {
    pub dir: PathBuf,
    pub conf: PathBuf,
}

impl NodeStore {
    /// A store under `dir/<name>-store`.
    pub fn new(dir: &Path, name: &str) -> NodeStore {
        let dir = dir.join(format!("{name}-store"));
        std::fs::create_dir_all(&dir).ok();
        let conf = dir.join("storage.conf");
        let text = format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            dir.join("graph").display(),
            dir.join("run").display()
        );
        std::fs::write(&conf, text).expect("the store's storage.conf is written");
        NodeStore { dir, conf }
    }

    /// The environment variable that points podman at this store.
    pub fn env(&self) -> (&'static str, String) {
        ("CONTAINERS_STORAGE_CONF", self.conf.display().to_string())
    }

    /// Runs podman on this store: its stdout, or its stderr.
    pub fn podman(&self, args: &[&str]) -> Result<String, PodmanError> {
        let conf: &Path = &self.conf;
        crate::container_host::podman_with(&[("CONTAINERS_STORAGE_CONF", conf)], args)
    }

    /// Whether this store holds `image`.
    pub fn has(&self, image: &str) -> bool {
        self.podman(&["image", "exists", image]).is_ok()
    }
}

impl Drop for NodeStore {
    fn drop(&mut self) {
        let ids = |what: &[&str]| -> Vec<String> {
            self.podman(what)
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .filter(|l| !l.is_empty())
                .collect()
        };
        // Only this store's own: made by this test's agents or the test.
        for c in ids(&["ps", "-a", "--format", "{{.ID}}"]) {
            let _ = self.podman(&["rm", "-f", "-t", "0", &c]);
        }
        for i in ids(&["images", "-q", "--no-trunc"]) {
            let _ = self.podman(&["rmi", "-f", &i]);
        }
    }
}

/// Why a test image could not be built or pushed.
#[derive(Debug, thiserror::Error)]
pub enum ImageBuildError {
    /// Its work directory or payload could not be written.
    #[error("{0}")]
    Write(#[from] std::io::Error),
    /// `tar` could not be started.
    #[error("tar: {0}")]
    TarNotRun(std::io::Error),
    /// `tar` ran and failed.
    #[error("tar failed")]
    TarFailed,
    /// A podman step (import, push, pull, create, export) failed.
    #[error("{0}")]
    Podman(#[from] PodmanError),
}

/// An image pushed to the local registry by a test.
#[derive(Debug, Clone)]
pub struct TestImage {
    /// As a task or pre-pull names it (`127.0.0.1:5555/caldera-test/...:1`).
    pub name: String,
    /// Bytes of its one file.
    pub payload_bytes: u64,
}

/// Makes an image of one file of `bytes` random bytes (from `seed`: a
/// different seed, a different image), named `caldera-test/<name>:1` in
/// the local registry, and pushes it there. The image is built in a store of
/// its own under `dir`, removed after: no node holds it until it pulls it.
pub fn push_image(
    dir: &Path,
    name: &str,
    bytes: u64,
    seed: u64,
) -> Result<TestImage, ImageBuildError> {
    let work = dir.join(format!("build-{name}"));
    std::fs::create_dir_all(work.join("root"))?;
    write_random(&work.join("root").join("payload"), bytes, seed)?;
    let tar = work.join("rootfs.tar");
    let ok = Command::new("tar")
        .arg("-C")
        .arg(work.join("root"))
        .arg("-cf")
        .arg(&tar)
        .arg("payload")
        .status()
        .map_err(ImageBuildError::TarNotRun)?;
    if !ok.success() {
        return Err(ImageBuildError::TarFailed);
    }
    let image = format!("{}/caldera-test/{name}:1", registry());
    let store = NodeStore::new(&work, "builder");
    let tar_path = tar.display().to_string();
    store.podman(&["import", "--quiet", &tar_path, &image])?;
    store.podman(&["push", "--quiet", "--tls-verify=false", &image])?;
    drop(store);
    let _ = std::fs::remove_dir_all(&work);
    Ok(TestImage {
        name: image,
        payload_bytes: bytes,
    })
}

/// [`push_image`] of an image that runs: the seed image's files (busybox)
/// and `/payload`, `bytes` random bytes, in one layer.
pub fn push_runnable_image(
    dir: &Path,
    name: &str,
    bytes: u64,
    seed: u64,
) -> Result<TestImage, ImageBuildError> {
    let work = dir.join(format!("build-{name}"));
    std::fs::create_dir_all(&work)?;
    let store = NodeStore::new(&work, "builder");
    let seed_image = crate::container_host::SEED_IMAGE;
    store.podman(&["pull", "--quiet", seed_image])?;
    let container = store.podman(&["create", seed_image, "true"])?;
    let tar = work.join("rootfs.tar");
    let tar_path = tar.display().to_string();
    store.podman(&["export", "-o", &tar_path, container.trim()])?;
    let payload_dir = work.join("payload-dir");
    std::fs::create_dir_all(&payload_dir)?;
    write_random(&payload_dir.join("payload"), bytes, seed)?;
    let ok = Command::new("tar")
        .arg("-C")
        .arg(&payload_dir)
        .arg("-rf")
        .arg(&tar)
        .arg("payload")
        .status()
        .map_err(ImageBuildError::TarNotRun)?;
    if !ok.success() {
        return Err(ImageBuildError::TarFailed);
    }
    std::fs::remove_dir_all(&payload_dir).ok();
    let image = format!("{}/caldera-test/{name}:1", registry());
    store.podman(&["import", "--quiet", &tar_path, &image])?;
    store.podman(&["push", "--quiet", "--tls-verify=false", &image])?;
    drop(store);
    let _ = std::fs::remove_dir_all(&work);
    Ok(TestImage {
        name: image,
        payload_bytes: bytes,
    })
}

/// `bytes` bytes that do not compress (xorshift from `seed`).
fn write_random(path: &Path, bytes: u64, seed: u64) -> std::io::Result<()> {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut left = bytes;
    let mut buf = [0u8; 8192];
    while left > 0 {
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// What the meter saw.
#[derive(Debug, Default)]
struct Seen {
    /// Open connections per agent port.
    open: Vec<u64>,
    /// Most agents with a connection open at once.
    max_pulling: usize,
}

/// One loopback port per agent in front of the local registry: counts the
/// bytes the registry served and the most agents pulling at once (an agent
/// pulls while it has a connection open to the registry: podman's pull
/// process opens them and exits when the pull ends).
pub struct RegistryMeter {
    pub ports: Vec<u16>,
    served: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
}

impl RegistryMeter {
    /// `agents` ports forwarding to the local registry.
    pub fn start(agents: usize) -> std::io::Result<RegistryMeter> {
        let served = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(Mutex::new(Seen {
            open: vec![0; agents],
            max_pulling: 0,
        }));
        let mut ports = Vec::new();
        for i in 0..agents {
            let listener = TcpListener::bind("127.0.0.1:0")?;
            ports.push(listener.local_addr()?.port());
            let (served, seen) = (served.clone(), seen.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let (served, seen) = (served.clone(), seen.clone());
                    std::thread::spawn(move || forward(conn, i, &served, &seen));
                }
            });
        }
        Ok(RegistryMeter {
            ports,
            served,
            seen,
        })
    }

    /// A registries.conf for agent `i`: `prefix` pulls through its port.
    pub fn registries_conf(&self, dir: &Path, i: usize, prefix: &str) -> PathBuf {
        let path = dir.join(format!("registries-{i}.conf"));
        let text = format!(
            "[[registry]]\nprefix = \"{prefix}\"\nlocation = \"127.0.0.1:{}\"\ninsecure = true\n",
            self.ports[i]
        );
        std::fs::write(&path, text).expect("registries.conf is written");
        path
    }

    /// Bytes the registry sent through the meter.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::SeqCst)
    }

    /// Most agents that pulled at once.
    pub fn max_pulling(&self) -> usize {
        self.seen
            .lock()
            .map(|s| s.max_pulling)
            .unwrap_or(usize::MAX)
    }
}

fn opened(seen: &Mutex<Seen>, i: usize, delta: i64) {
    if let Ok(mut s) = seen.lock() {
        s.open[i] = (s.open[i] as i64 + delta).max(0) as u64;
        let pulling = s.open.iter().filter(|&&n| n > 0).count();
        s.max_pulling = s.max_pulling.max(pulling);
    }
}

fn forward(client: TcpStream, i: usize, served: &AtomicU64, seen: &Mutex<Seen>) {
    let Ok(upstream) = TcpStream::connect(registry()) else {
        return;
    };
    opened(seen, i, 1);
    let (Ok(mut c_read), Ok(mut u_write)) = (client.try_clone(), upstream.try_clone()) else {
        opened(seen, i, -1);
        return;
    };
    let up = std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok(n) = c_read.read(&mut buf) {
            if n == 0 || u_write.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (upstream, client);
    let mut buf = [0u8; 65536];
    while let Ok(n) = u_read.read(&mut buf) {
        if n == 0 || c_write.write_all(&buf[..n]).is_err() {
            break;
        }
        served.fetch_add(n as u64, Ordering::SeqCst);
    }
    let _ = c_write.shutdown(Shutdown::Both);
    let _ = up.join();
    opened(seen, i, -1);
}
