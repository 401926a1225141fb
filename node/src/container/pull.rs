//! Preparing a container start is pulling its image. [`ensure`] makes the
//! start's image present on the node under its pull policy and the start's
//! prepare timeout, reporting progress as it goes, and answers the digest
//! the container will run ([`digest`] answers it for an image already
//! here). It runs `podman pull` (the CLI is the interface podman keeps
//! stable), reads how far it got from podman's own output ([`progress`]),
//! retries what a registry may get over (unreachable, server errors) with a
//! capped backoff and fails at once on what it will not ([`classify`]), so a
//! missing image costs the registry one request, not a storm.
//!
//! A tenant's registry credentials reach podman as an `--authfile` in a
//! directory of this pull's own (mode 0700 under the agent's data dir,
//! the file 0600), removed when the pull ends however it ends; they are
//! never logged, and no error sentence quotes them (podman's do not).
pub mod classify;
pub mod progress;
#[cfg(test)]
mod tests;

pub use classify::PullError;

use caldera_spec::container::{ContainerStart, PullPolicy, PullProgress};
use classify::Verdict;
use progress::{Tally, Throttle};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::Instant;

/// The first wait after a transient failure; doubled each try up to
/// [`BACKOFF_CAP`]. Podman already tries a refused connection three times
/// within about 3 s, so one of our tries is a few requests at the registry.
const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_CAP: Duration = Duration::from_secs(8);
/// How often the download files are measured while a pull runs.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);
/// Longest an `image exists` or `image inspect` may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// The prepare timeout of a start that carries none (older servers).
pub const DEFAULT_PREPARE_TIMEOUT: Duration = Duration::from_secs(600);
/// PATH for podman (it finds conmon and runc through its own config).
const PODMAN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Podman's own configuration variables that the agent's environment may
/// set (an operator's registries.conf, storage.conf or containers.conf for
/// the agent's podman); everything else of the agent's environment is
/// withheld from podman.
const PODMAN_ENV: &[&str] = &[
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_CONF",
];

/// How this agent pulls: the podman binary, flags put before every
/// subcommand (a test points `--root`/`--runroot` at a store of its own),
/// and where pulls keep their files.
#[derive(Debug, Clone)]
pub struct Puller {
    pub podman: PathBuf,
    pub global_args: Vec<String>,
    /// `<data dir>/pulls`: one 0700 dir per pull inside it.
    pub work_root: PathBuf,
}

impl Puller {
    pub fn new(podman: PathBuf, data_dir: &Path) -> Puller {
        Puller {
            podman,
            global_args: Vec::new(),
            work_root: data_dir.join("pulls"),
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.podman);
        cmd.args(&self.global_args)
            .env_clear()
            .env("PATH", PODMAN_PATH)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        for name in PODMAN_ENV {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        cmd
    }
}

/// The image a start will run, once [`ensure`] made it present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// `sha256:...`: the manifest digest podman resolved the name to; this
    /// is what `Started.image_digest` carries.
    pub digest: String,
    /// False when the policy let an image already here be used as it is.
    pub pulled: bool,
    /// The last progress (layers and bytes of the pull; zero when none ran).
    pub progress: PullProgress,
}

/// Makes `start.image` present on the node and answers its digest.
///
/// `pull: if_not_present` uses an image already here (`podman image
/// exists`); `always` pulls (layers already here are not downloaded again).
/// Progress goes to `report`, throttled to one every 500 ms and only when
/// it moved, with a last one when the pull ends. The whole of it, retries
/// included, runs within `start.prepare_timeout_ms`; past it the pull is
/// killed and the error says how far it got. `key` names the pull's own
/// work dir (the allocation id).
///
/// The launch path calls this between the `Preparing` event and creating
/// the container, sends each report as `WorkloadEventKind::Pulling`, and
/// puts [`Pulled::digest`] in `Started.image_digest`; on an error it sends
/// `StartFailed { reason: e.to_string(), code: e.error_code().code }`.
pub async fn ensure(
    puller: &Puller,
    key: &str,
    start: &ContainerStart,
    mut report: impl FnMut(PullProgress),
) -> Result<Pulled, PullError> {
    let timeout = match start.prepare_timeout_ms {
        0 => DEFAULT_PREPARE_TIMEOUT,
        ms => Duration::from_millis(ms),
    };
    let deadline = Instant::now() + timeout;
    let image = start.image.as_str();
    if start.pull == PullPolicy::IfNotPresent && exists(puller, image, deadline).await? {
        let digest = digest_by(puller, image, deadline).await?;
        return Ok(Pulled {
            digest,
            pulled: false,
            progress: PullProgress {
                image: image.to_string(),
                ..Default::default()
            },
        });
    }
    let work = WorkDir::create(&puller.work_root, key, image)?;
    if let Some(auth) = &start.registry_auth {
        work.write_auth(auth, image)?;
    }
    let mut throttle = Throttle::new();
    // The first report says the pull began: a registry that never answers
    // still shows the task as pulling, with no layer started.
    if let Some(p) = throttle.due(Tally::default().progress(image), std::time::Instant::now()) {
        report(p);
    }
    let mut backoff = BACKOFF_FIRST;
    let mut attempts = 0;
    let began = Instant::now();
    loop {
        attempts += 1;
        let mut tally = Tally::default();
        let outcome = attempt(
            puller,
            &work,
            image,
            deadline,
            &mut tally,
            &mut throttle,
            &mut report,
        )
        .await;
        match outcome {
            Attempt::Done => {
                tally.finish();
                tally.sample(&work.tmp_dir());
                let progress = tally.progress(image);
                if let Some(p) = throttle.last(progress.clone()) {
                    report(p);
                }
                let digest = digest_by(puller, image, deadline).await?;
                return Ok(Pulled {
                    digest,
                    pulled: true,
                    progress,
                });
            }
            Attempt::DeadlinePassed => {
                return Err(PullError::TimedOut {
                    image: image.to_string(),
                    timeout,
                    progress: tally.progress(image),
                })
            }
            Attempt::Failed(text) => match classify::classify(image, &text) {
                Verdict::Definite(e) => return Err(e),
                Verdict::Transient(detail) => {
                    let resume = Instant::now() + backoff;
                    if resume >= deadline {
                        return Err(PullError::Unreachable {
                            image: image.to_string(),
                            attempts,
                            spent: began.elapsed(),
                            detail,
                        });
                    }
                    tracing::info!("pulling {image}: {detail}; trying again in {backoff:?}");
                    tokio::time::sleep_until(resume).await;
                    backoff = (backoff * 2).min(BACKOFF_CAP);
                }
            },
        }
    }
}

/// The digest of `image` as the node holds it (`sha256:...`): for a start
/// whose image was already here, or to check what a container runs.
pub async fn digest(puller: &Puller, image: &str) -> Result<String, PullError> {
    digest_by(puller, image, Instant::now() + QUERY_TIMEOUT).await
}

enum Attempt {
    Done,
    DeadlinePassed,
    /// Podman failed; its stderr.
    Failed(String),
}

/// One `podman pull`, read as it runs.
async fn attempt(
    puller: &Puller,
    work: &WorkDir,
    image: &str,
    deadline: Instant,
    tally: &mut Tally,
    throttle: &mut Throttle,
    report: &mut impl FnMut(PullProgress),
) -> Attempt {
    let mut cmd = puller.command();
    cmd.arg("--log-level=debug").arg("pull");
    if work.has_auth() {
        cmd.arg("--authfile").arg(work.auth_file());
    }
    cmd.arg(image)
        .env("TMPDIR", work.tmp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Attempt::Failed(format!("Error: {}: {e}", puller.podman.display())),
    };
    let Some(stderr) = child.stderr.take() else {
        return Attempt::Failed("Error: podman's stderr could not be read".into());
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut kept = String::new();
    let mut sample = tokio::time::interval(SAMPLE_EVERY);
    let mut open = true;
    loop {
        let mut moved = false;
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                tally.sample(&work.tmp_dir());
                return Attempt::DeadlinePassed;
            }
            line = lines.next_line(), if open => match line {
                Ok(Some(line)) => {
                    // A layer being stored was downloaded whole: its file
                    // is measured now, so finished layers count exactly.
                    moved = tally.on_line(&line) && {
                        tally.sample(&work.tmp_dir());
                        true
                    };
                    if !line.starts_with("time=\"") || line.contains("level=error") {
                        kept.push_str(&line);
                        kept.push('\n');
                    }
                }
                _ => open = false,
            },
            _ = sample.tick() => moved = tally.sample(&work.tmp_dir()),
            status = child.wait(), if !open => {
                return match status {
                    Ok(s) if s.success() => Attempt::Done,
                    Ok(_) => Attempt::Failed(kept),
                    Err(e) => Attempt::Failed(format!("Error: waiting for podman: {e}")),
                };
            }
        }
        if moved {
            if let Some(p) = throttle.due(tally.progress(image), std::time::Instant::now()) {
                report(p);
            }
        }
    }
}

/// `podman image exists`: true when the node holds `image`.
async fn exists(puller: &Puller, image: &str, deadline: Instant) -> Result<bool, PullError> {
    let out = query(puller, &["image", "exists", image], image, deadline).await?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(PullError::Failed {
            image: image.to_string(),
            detail: format!(
                "podman image exists: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

/// The manifest digest `image` resolved to, from `podman image inspect`.
async fn digest_by(puller: &Puller, image: &str, deadline: Instant) -> Result<String, PullError> {
    let out = query(
        puller,
        &["image", "inspect", "--format", "{{.Digest}}", image],
        image,
        deadline,
    )
    .await?;
    let text = String::from_utf8_lossy(&out.stdout);
    let digest = text.lines().next().unwrap_or("").trim();
    if out.status.success() && digest.starts_with("sha256:") {
        return Ok(digest.to_string());
    }
    Err(PullError::Failed {
        image: image.to_string(),
        detail: format!(
            "podman image inspect found no digest: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    })
}

/// Runs a short podman query within the deadline.
async fn query(
    puller: &Puller,
    args: &[&str],
    image: &str,
    deadline: Instant,
) -> Result<std::process::Output, PullError> {
    let mut cmd = puller.command();
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let failed = |detail: String| PullError::Failed {
        image: image.to_string(),
        detail,
    };
    let until = deadline.min(Instant::now() + QUERY_TIMEOUT);
    match tokio::time::timeout_at(until, cmd.output()).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(failed(format!("{}: {e}", puller.podman.display()))),
        Err(_) => Err(failed(format!(
            "podman {} did not answer in time",
            args.join(" ")
        ))),
    }
}

/// A pull's own directory: its auth file and podman's download files.
/// Removed when dropped, so the credentials never outlive the pull.
struct WorkDir {
    path: PathBuf,
}

impl WorkDir {
    fn create(root: &Path, key: &str, image: &str) -> Result<WorkDir, PullError> {
        let name: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = root.join(name);
        let io = |e: std::io::Error, what: &Path| io_error(image, what, e);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|e| io(e, &path))?;
        for dir in [root, path.as_path()] {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io(e, dir))?;
        }
        let work = WorkDir { path };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(work.tmp_dir())
            .map_err(|e| io(e, &work.tmp_dir()))?;
        Ok(work)
    }

    fn tmp_dir(&self) -> PathBuf {
        self.path.join("tmp")
    }

    fn auth_file(&self) -> PathBuf {
        self.path.join("auth.json")
    }

    fn has_auth(&self) -> bool {
        self.auth_file().exists()
    }

    /// Writes the credentials, 0600 from the moment the file exists.
    fn write_auth(&self, auth: &str, image: &str) -> Result<(), PullError> {
        let path = self.auth_file();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error(image, &path, e))?;
        file.write_all(auth.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error(image, &path, e))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::error!("cannot remove the pull dir {}: {e}", self.path.display());
            }
        }
    }
}

/// A file of the pull's own could not be made: a full disk is said so.
fn io_error(image: &str, path: &Path, e: std::io::Error) -> PullError {
    let detail = format!("{}: {e}", path.display());
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return PullError::DiskFull {
            image: image.to_string(),
            detail,
        };
    }
    PullError::Failed {
        image: image.to_string(),
        detail,
    }
}
