//! The node's image store as the control plane sees it, and its eviction.
//!
//! A background task reads `podman images --format json` every
//! `refresh` (a read costs about 35 ms of a podman process on these
//! machines, so it is not done at every heartbeat: the heartbeat carries
//! the last reading) and sooner while a start's or pre-pull's image is
//! expected to appear. Each reading becomes an [`ImageReport`] on a watch
//! channel the agent's loop reads.
//!
//! Which images are the agent's: those a start or a pre-pull on this node
//! brought ("managed", kept in `images.json` in the data dir with when each
//! was last used). Only they count against `--image-cache-gb` and only they
//! are ever removed: an image the host's administrator or another tool put
//! in the store is reported (placement may use it) but never touched.
//! Eviction is least recently used first and never takes an image that a
//! container (running or stopped) was made from; podman itself refuses to
//! remove one, and it is not asked to.
use caldera_spec::images::{canonical, ImageEntry, ImageReport};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::{mpsc, watch};

/// The ledger's file in the agent's data dir.
const LEDGER_FILE: &str = "images.json";
/// How often the store is read while an expected image has not appeared.
const EAGER_REFRESH: Duration = Duration::from_secs(1);
/// Longest a `podman images` or `podman rmi` may take.
const PODMAN_TIMEOUT: Duration = Duration::from_secs(30);

/// How the image cache runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageCacheConfig {
    /// The podman binary.
    pub podman: String,
    /// Where the ledger lives (the agent's data dir).
    pub data_dir: PathBuf,
    /// Bytes the managed images may take; 0: no cap.
    pub cap_bytes: u64,
    /// How often the store is read.
    pub refresh: Duration,
}

/// What the agent asks of the image task.
#[derive(Debug)]
pub enum ImageRequest {
    /// A start names this image: once it is in the store it is the agent's
    /// (managed) and used now; read the store often until it appears.
    Used { image: String, within: Duration },
    /// Pull this image (the operator's pre-pull); the outcome comes back on
    /// the handle's `prepulled` channel.
    Prepull { image: String, timeout: Duration },
}

/// How a pre-pull ended: the image, and its digest or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepulled {
    pub image: String,
    pub outcome: Result<String, ImageError>,
}

/// Why podman could not list, pull or remove an image, in the words the
/// operator's pre-pull answer and the agent's log show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("podman {verb} took over {timeout:?}")]
    Timeout { verb: String, timeout: Duration },
    #[error("podman could not be run: {0}")]
    NotRun(String),
    /// podman's own last line of complaint.
    #[error("{0}")]
    Refused(String),
    #[error("podman images printed no image list: {0}")]
    NoImageList(String),
    #[error("pulled, but not found after: {0}")]
    GoneAfterPull(Box<ImageError>),
    #[error("this node has no container runtime")]
    NoRuntime,
}

/// The agent's side of the image task.
pub struct ImageCache {
    /// None: no container runtime here, no task (the report stays unknown).
    requests: Option<mpsc::UnboundedSender<ImageRequest>>,
    pub report: watch::Receiver<ImageReport>,
}

impl ImageCache {
    /// Starts the task (inside the agent's runtime). Pre-pull outcomes are
    /// sent on `prepulled`.
    pub fn start(config: ImageCacheConfig, prepulled: mpsc::UnboundedSender<Prepulled>) -> Self {
        let (requests, rx) = mpsc::unbounded_channel();
        let (report_tx, report) = watch::channel(ImageReport::default());
        actix_rt::spawn(run(config, rx, report_tx, prepulled));
        ImageCache {
            requests: Some(requests),
            report,
        }
    }

    /// No container runtime on this node: nothing is read, the report says
    /// the store is not known.
    pub fn disabled() -> Self {
        let (_, report) = watch::channel(ImageReport::default());
        ImageCache {
            requests: None,
            report,
        }
    }

    /// Whether the node reads (and pulls into) an image store.
    pub fn enabled(&self) -> bool {
        self.requests.is_some()
    }

    /// See [`ImageRequest::Used`].
    pub fn used(&self, image: &str, within: Duration) {
        let Some(requests) = &self.requests else {
            return;
        };
        let _ = requests.send(ImageRequest::Used {
            image: image.to_string(),
            within,
        });
    }

    /// See [`ImageRequest::Prepull`].
    pub fn prepull(&self, image: &str, timeout: Duration) {
        let Some(requests) = &self.requests else {
            return;
        };
        let _ = requests.send(ImageRequest::Prepull {
            image: image.to_string(),
            timeout,
        });
    }

    /// The last reading.
    pub fn current(&self) -> ImageReport {
        self.report.borrow().clone()
    }
}

/// One entry of `podman images --format json` (podman 4.x field names).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StoreImage {
    #[serde(rename = "Id")]
    pub id: String,
    #[serde(rename = "Names")]
    pub names: Option<Vec<String>>,
    #[serde(rename = "Digest")]
    pub digest: String,
    #[serde(rename = "Size")]
    pub size: u64,
    #[serde(rename = "Containers")]
    pub containers: u32,
}

/// Reads `podman images --format json`; an error says what was wrong.
pub fn parse_store(json: &str) -> Result<Vec<StoreImage>, ImageError> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(json).map_err(|e| ImageError::NoImageList(e.to_string()))
}

/// What the agent keeps of its images between runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ledger {
    /// Managed images by store id: unix ms last used.
    pub last_used_ms: BTreeMap<String, u64>,
    pub evictions: u64,
}

impl Ledger {
    /// The ledger in `dir`, empty when there is none or it cannot be read
    /// (then images are reported, but none is the agent's until used again).
    pub fn load(dir: &Path) -> Ledger {
        match std::fs::read(dir.join(LEDGER_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{LEDGER_FILE} unreadable ({e}); starting a new one");
                Ledger::default()
            }),
            Err(_) => Ledger::default(),
        }
    }

    /// Writes it (through a temporary file, so a crash leaves the old one).
    pub fn store(&self, dir: &Path) {
        let tmp = dir.join(format!("{LEDGER_FILE}.tmp"));
        let write = serde_json::to_vec(self)
            .map_err(std::io::Error::other)
            .and_then(|b| std::fs::write(&tmp, b))
            .and_then(|_| std::fs::rename(&tmp, dir.join(LEDGER_FILE)));
        if let Err(e) = write {
            tracing::warn!("could not write {LEDGER_FILE}: {e}");
        }
    }

    /// The store's image `id` is the agent's and was used at `now_ms`.
    pub fn touch(&mut self, id: &str, now_ms: u64) {
        self.last_used_ms.insert(id.to_string(), now_ms);
    }
}

/// The report of `store` as `ledger` knows it; images gone from the store
/// are dropped from the ledger.
pub fn report(
    store: &[StoreImage],
    ledger: &mut Ledger,
    cap_bytes: u64,
    now_ms: u64,
) -> ImageReport {
    ledger
        .last_used_ms
        .retain(|id, _| store.iter().any(|s| &s.id == id));
    let mut images: Vec<ImageEntry> = store
        .iter()
        .map(|s| {
            let managed = ledger.last_used_ms.contains_key(&s.id);
            if managed && s.containers > 0 {
                // Still used: it stays the most recent.
                ledger.touch(&s.id, now_ms);
            }
            ImageEntry {
                id: s.id.clone(),
                digest: s.digest.clone(),
                names: s.names.iter().flatten().map(|n| canonical(n)).collect(),
                size_bytes: s.size,
                last_used_ms: ledger.last_used_ms.get(&s.id).copied().unwrap_or(0),
                in_use: s.containers,
                managed,
            }
        })
        .collect();
    images.sort_by(|a, b| a.id.cmp(&b.id));
    ImageReport {
        known: true,
        capacity_bytes: cap_bytes,
        managed_bytes: images
            .iter()
            .filter(|e| e.managed)
            .map(|e| e.size_bytes)
            .sum(),
        images,
        evictions: ledger.evictions,
    }
}

/// The managed images to remove, least recently used first, until the
/// managed ones fit `cap_bytes` (0: no cap). Images in use are never chosen:
/// when they alone exceed the cap, the store stays over it.
pub fn to_evict(report: &ImageReport, cap_bytes: u64) -> Vec<&ImageEntry> {
    if cap_bytes == 0 || report.managed_bytes <= cap_bytes {
        return Vec::new();
    }
    let mut candidates: Vec<&ImageEntry> = report
        .images
        .iter()
        .filter(|e| e.managed && e.in_use == 0)
        .collect();
    candidates.sort_by_key(|e| (e.last_used_ms, e.id.clone()));
    let mut over = report.managed_bytes - cap_bytes;
    let mut out = Vec::new();
    for e in candidates {
        if over == 0 {
            break;
        }
        over = over.saturating_sub(e.size_bytes);
        out.push(e);
    }
    out
}

/// An image a start expects, until it appears or `until` passes.
struct Expected {
    name: String,
    until: tokio::time::Instant,
}

async fn run(
    config: ImageCacheConfig,
    mut requests: mpsc::UnboundedReceiver<ImageRequest>,
    report_tx: watch::Sender<ImageReport>,
    prepulled: mpsc::UnboundedSender<Prepulled>,
) {
    let mut ledger = Ledger::load(&config.data_dir);
    let mut expected: Vec<Expected> = Vec::new();
    let (pulled_tx, mut pulled_rx) = mpsc::unbounded_channel::<(Prepulled, Option<String>)>();
    let mut next = tokio::time::Instant::now();
    loop {
        let wait = if expected.is_empty() {
            config.refresh
        } else {
            EAGER_REFRESH.min(config.refresh)
        };
        tokio::select! {
            r = requests.recv() => match r {
                None => return,
                Some(ImageRequest::Used { image, within }) => {
                    expected.push(Expected {
                        name: canonical(&image),
                        until: tokio::time::Instant::now() + within,
                    });
                    next = tokio::time::Instant::now() + EAGER_REFRESH;
                    continue;
                }
                Some(ImageRequest::Prepull { image, timeout }) => {
                    let podman = config.podman.clone();
                    let tx = pulled_tx.clone();
                    actix_rt::spawn(async move {
                        let (outcome, id) = pull(&podman, &image, timeout).await;
                        let _ = tx.send((Prepulled { image, outcome }, id));
                    });
                    continue;
                }
            },
            Some((done, id)) = pulled_rx.recv() => {
                if let Some(id) = id {
                    ledger.touch(&id, crate::runtime::now_ms());
                    ledger.store(&config.data_dir);
                }
                let _ = prepulled.send(done);
            }
            _ = tokio::time::sleep_until(next) => {}
        }
        let now = tokio::time::Instant::now();
        expected.retain(|e| e.until > now);
        refresh(&config, &mut ledger, &mut expected, &report_tx).await;
        next = tokio::time::Instant::now() + wait;
    }
}

/// One reading of the store: expected images become managed, the report is
/// published, and what is over the cap is evicted (then read again).
async fn refresh(
    config: &ImageCacheConfig,
    ledger: &mut Ledger,
    expected: &mut Vec<Expected>,
    report_tx: &watch::Sender<ImageReport>,
) {
    let store = match list(&config.podman).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("image store not read: {e}");
            report_tx.send_if_modified(|r| {
                let unknown = ImageReport::default();
                let changed = *r != unknown;
                *r = unknown;
                changed
            });
            return;
        }
    };
    let now_ms = crate::runtime::now_ms();
    let before = ledger.clone();
    expected.retain(|e| {
        let found = store
            .iter()
            .find(|s| s.names.iter().flatten().any(|n| canonical(n) == e.name));
        match found {
            Some(s) => {
                ledger.touch(&s.id, now_ms);
                false
            }
            None => true,
        }
    });
    let mut now = report(&store, ledger, config.cap_bytes, now_ms);
    let evict: Vec<ImageEntry> = to_evict(&now, config.cap_bytes)
        .into_iter()
        .cloned()
        .collect();
    if !evict.is_empty() {
        for e in &evict {
            match remove(&config.podman, &e.id).await {
                Ok(()) => {
                    tracing::info!(
                        image = %e.id, names = ?e.names, bytes = e.size_bytes,
                        "image evicted (least recently used, over --image-cache-gb)"
                    );
                    ledger.last_used_ms.remove(&e.id);
                    ledger.evictions += 1;
                }
                Err(why) => tracing::warn!(image = %e.id, "image not evicted: {why}"),
            }
        }
        if let Ok(store) = list(&config.podman).await {
            now = report(&store, ledger, config.cap_bytes, now_ms);
        }
    }
    if *ledger != before {
        ledger.store(&config.data_dir);
    }
    report_tx.send_if_modified(|r| {
        let changed = *r != now;
        *r = now;
        changed
    });
}

/// Runs podman with `args`, under [`PODMAN_TIMEOUT`] or `timeout`: its
/// stdout, or what went wrong.
async fn podman(podman: &str, args: &[&str], timeout: Duration) -> Result<String, ImageError> {
    let mut cmd = Command::new(podman);
    cmd.args(args)
        .env_clear()
        .env("PATH", super::podman::PODMAN_PATH)
        .envs(super::podman::config_env())
        .kill_on_drop(true)
        .stdin(std::process::Stdio::null());
    let out = match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => {
            return Err(ImageError::Timeout {
                verb: args.first().copied().unwrap_or("").to_string(),
                timeout,
            })
        }
        Ok(Err(e)) => return Err(ImageError::NotRun(e.to_string())),
        Ok(Ok(out)) => out,
    };
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(ImageError::Refused(
            err.trim().lines().last().unwrap_or("failed").to_string(),
        ))
    }
}

async fn list(bin: &str) -> Result<Vec<StoreImage>, ImageError> {
    let out = podman(bin, &["images", "--format", "json"], PODMAN_TIMEOUT).await?;
    parse_store(&out)
}

/// Removes one image by id. Without `--force`: podman refuses an image a
/// container was made from, so a container created since the reading keeps
/// its image.
async fn remove(bin: &str, id: &str) -> Result<(), ImageError> {
    podman(bin, &["rmi", id], PODMAN_TIMEOUT).await.map(|_| ())
}

/// Pulls `image`: its digest and store id, or why not.
async fn pull(
    bin: &str,
    image: &str,
    timeout: Duration,
) -> (Result<String, ImageError>, Option<String>) {
    if let Err(e) = podman(bin, &["pull", "--quiet", image], timeout).await {
        return (Err(e), None);
    }
    let inspect = podman(
        bin,
        &["image", "inspect", "--format", "{{.Id}} {{.Digest}}", image],
        PODMAN_TIMEOUT,
    )
    .await;
    match inspect {
        Ok(out) => {
            let mut words = out.split_whitespace();
            let id = words.next().map(str::to_string);
            let digest = words.next().unwrap_or_default().to_string();
            (Ok(digest), id)
        }
        Err(e) => (Err(ImageError::GoneAfterPull(Box::new(e))), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `podman images --format json` of podman 4.3.1, as captured here.
    const STORE: &str = r#"[
    {
        "Id": "12f22dfac50100e1c6b1a04cacc5c3940cf5270b598538c46fdd620f6d61df04",
        "ParentId": "",
        "RepoTags": null,
        "RepoDigests": [
            "registry.internal/deeplearning/pytorch@sha256:21097a7112bfa8dd3c911f020a5a6bb75dc8745138feb5ff349a5444eb0a9ced"
        ],
        "Size": 2131062,
        "SharedSize": 0,
        "VirtualSize": 2131062,
        "Labels": null,
        "Containers": 1,
        "Names": [
            "registry.internal/deeplearning/pytorch:2.1-cu12.1"
        ],
        "Digest": "sha256:21097a7112bfa8dd3c911f020a5a6bb75dc8745138feb5ff349a5444eb0a9ced",
        "History": [
            "registry.internal/deeplearning/pytorch:2.1-cu12.1"
        ],
        "Created": 1796309448,
        "CreatedAt": "2026-12-03T14:50:48Z"
    },
    {
        "Id": "2a965f17ee80b7867029746817b933d8cd4f9c89203d16b5631b3be39a4d69a4",
        "ParentId": "",
        "RepoTags": null,
        "RepoDigests": [],
        "Size": 2131052,
        "SharedSize": 0,
        "VirtualSize": 2131052,
        "Labels": null,
        "Containers": 0,
        "Dangling": true,
        "Digest": "sha256:d9dcfe44b8d2c07797bcbbfd5f84627395bdff1a079e2ae5b41fc6f408ebacf3",
        "History": [
            "registry.internal/deeplearning/pytorch:2.1-cu12.1"
        ],
        "Created": 1796309443,
        "CreatedAt": "2026-12-03T14:50:43Z"
    }
]"#;

    fn image(id: &str, size: u64, last_used: u64, in_use: u32) -> ImageEntry {
        ImageEntry {
            id: id.into(),
            names: vec![format!("r.io/{id}:1")],
            size_bytes: size,
            last_used_ms: last_used,
            in_use,
            managed: true,
            ..ImageEntry::default()
        }
    }

    fn of(images: Vec<ImageEntry>) -> ImageReport {
        ImageReport {
            known: true,
            managed_bytes: images
                .iter()
                .filter(|e| e.managed)
                .map(|e| e.size_bytes)
                .sum(),
            images,
            ..ImageReport::default()
        }
    }

    #[test]
    fn the_store_reads_with_names_digests_sizes_and_use() {
        let store = parse_store(STORE).unwrap();
        assert_eq!(store.len(), 2);
        let mut ledger = Ledger::default();
        ledger.touch(&store[0].id, 5);
        ledger.touch("gone-from-the-store", 1);
        let r = report(&store, &mut ledger, 0, 9);
        assert!(r.known);
        let seed = r
            .holds("registry.internal/deeplearning/pytorch:2.1-cu12.1")
            .unwrap();
        assert_eq!(seed.size_bytes, 2_131_062);
        assert_eq!(seed.in_use, 1);
        assert!(seed.managed);
        // In use: its last use is the reading's.
        assert_eq!(seed.last_used_ms, 9);
        assert!(seed.digest.starts_with("sha256:2109"));
        // The dangling one has no name and is not the agent's.
        let dangling = r.images.iter().find(|e| e.id.starts_with("2a96")).unwrap();
        assert!(dangling.names.is_empty() && !dangling.managed);
        assert_eq!(r.managed_bytes, 2_131_062);
        // An image no longer in the store leaves the ledger.
        assert_eq!(ledger.last_used_ms.len(), 1);
        assert_eq!(parse_store("").unwrap(), vec![]);
        assert!(parse_store("Error: no").is_err());
    }

    #[test]
    fn eviction_takes_the_least_recently_used_until_under_the_cap_never_one_in_use() {
        // (managed bytes 10 + 20 + 30 + 40 = 100)
        let r = of(vec![
            image("a", 10, 400, 0),
            image("b", 20, 100, 0),
            // The oldest, but a container was made from it.
            image("c", 30, 50, 1),
            image("d", 40, 300, 0),
        ]);
        let ids = |cap| -> Vec<String> { to_evict(&r, cap).iter().map(|e| e.id.clone()).collect() };
        // No cap, or under it: nothing.
        assert!(ids(0).is_empty());
        assert!(ids(100).is_empty());
        // 100 - 90 = 10 over: b (used at 100, the oldest not in use) goes.
        assert_eq!(ids(90), ["b"]);
        // 100 - 60 = 40 over: b (20), then d (used at 300; 40 - 20 = 20 left).
        assert_eq!(ids(60), ["b", "d"]);
        // 100 - 25 = 75 over: b, d, a (70 freed < 75), and c stays in use:
        // the store stays over the cap.
        assert_eq!(ids(25), ["b", "d", "a"]);
    }

    #[test]
    fn images_not_the_agents_are_neither_counted_nor_evicted() {
        let mut foreign = image("host", 500, 0, 0);
        foreign.managed = false;
        let r = of(vec![foreign, image("mine", 10, 1, 0)]);
        assert_eq!(r.managed_bytes, 10);
        assert!(to_evict(&r, 10).is_empty());
        assert_eq!(
            to_evict(&r, 5)
                .iter()
                .map(|e| e.id.as_str())
                .collect::<Vec<_>>(),
            ["mine"]
        );
    }

    #[test]
    fn the_ledger_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = Ledger::default();
        l.touch("abc", 42);
        l.evictions = 3;
        l.store(dir.path());
        assert_eq!(Ledger::load(dir.path()), l);
        std::fs::write(dir.path().join(LEDGER_FILE), "not json").unwrap();
        assert_eq!(Ledger::load(dir.path()), Ledger::default());
    }
}
