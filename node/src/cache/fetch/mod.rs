//! One fetch of one version into the cache: bytes from a source are written
//! to `<sha256>.partial` (resuming at its length), then the whole partial is
//! synced and checked (size, SHA-256) and only then renamed to
//! `weights/<sha256>`, mode 0444. A cut fetch leaves the partial for the
//! next source; a wrong checksum deletes it. The task runs on the agent's
//! thread (its writes are small and sequential, so an aborted task — the
//! control plane switched sources — leaves no write in flight); the sync
//! and the checksum run on the blocking pool.
mod source;
mod tls;

pub use tls::Tls;

use super::layout::{file_len, sync_dir, COPY_MODE};
use super::{digest, CacheNote};
use caldera_spec::weights::{OriginAccess, WeightSource};
use futures_util::StreamExt;
use std::cell::Cell;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// Longest wait for the next bytes of a source before it counts as dead.
const STALL_TIMEOUT: Duration = Duration::from_secs(20);
/// Progress is reported at most this often (about twice a second).
pub const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// What to fetch and where it goes.
#[derive(Debug, Clone)]
pub struct Job {
    pub sha256: String,
    pub size_bytes: u64,
    pub source: WeightSource,
    pub partial: PathBuf,
    pub copy: PathBuf,
    /// Tells this run's notes from an earlier (switched-away) run's.
    pub generation: u64,
    /// TLS of an https origin.
    pub tls: Tls,
    /// How the origin may be read (its registrant's allow-list, a confined file).
    pub origin: OriginAccess,
}

/// Counts a run shares with the cache (the same thread reads them), so an
/// aborted run's bytes are still counted.
#[derive(Debug, Default)]
pub struct Tally {
    /// Bytes this run wrote.
    pub written: Cell<u64>,
    /// Bytes in the partial now.
    pub bytes_done: Cell<u64>,
}

/// What a run tells the cache.
#[derive(Debug)]
pub enum FetchNote {
    Progress {
        sha256: String,
        generation: u64,
        rate_bytes_per_s: u64,
    },
    Done {
        sha256: String,
        generation: u64,
        seconds: f64,
        outcome: Result<(), Failure>,
    },
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub reason: String,
    /// The bytes did not match: the partial was deleted.
    pub corrupt: bool,
}

impl Failure {
    fn cut(reason: String) -> Failure {
        Failure {
            reason,
            corrupt: false,
        }
    }
}

/// Runs `job` on the agent's thread; returns the handle that aborts it.
pub fn spawn(
    job: Job,
    tally: Rc<Tally>,
    notes: UnboundedSender<CacheNote>,
) -> tokio::task::JoinHandle<()> {
    actix_rt::spawn(async move {
        let started = Instant::now();
        let outcome = run(&job, &tally, &notes).await;
        let _ = notes.send(CacheNote::Fetch(FetchNote::Done {
            sha256: job.sha256.clone(),
            generation: job.generation,
            seconds: started.elapsed().as_secs_f64(),
            outcome,
        }));
    })
}

async fn run(job: &Job, tally: &Tally, notes: &UnboundedSender<CacheNote>) -> Result<(), Failure> {
    let mut have = file_len(&job.partial);
    if have > job.size_bytes {
        have = 0;
    }
    if have < job.size_bytes {
        transfer(job, have, tally, notes).await?;
    }
    tally.bytes_done.set(job.size_bytes);
    let job = job.clone();
    let checked = tokio::task::spawn_blocking(move || seal(&job)).await;
    checked.unwrap_or_else(|e| Err(Failure::cut(format!("verifying: {e}"))))
}

/// Copies the source's bytes from `have` into the partial.
async fn transfer(
    job: &Job,
    have: u64,
    tally: &Tally,
    notes: &UnboundedSender<CacheNote>,
) -> Result<(), Failure> {
    let opened = source::open(job, have)
        .await
        .map_err(|e| Failure::cut(e.to_string()))?;
    let io = |e: std::io::Error| Failure::cut(format!("{}: {e}", job.partial.display()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&job.partial)
        .map_err(io)?;
    file.set_len(opened.offset).map_err(io)?;
    file.seek(SeekFrom::Start(opened.offset)).map_err(io)?;
    let mut done = opened.offset;
    tally.bytes_done.set(done);
    let mut body = opened.body;
    let mut last_report = (Instant::now(), done);
    while done < job.size_bytes {
        let chunk = match tokio::time::timeout(STALL_TIMEOUT, body.next()).await {
            Err(_) => Err(format!("no bytes for {}s", STALL_TIMEOUT.as_secs())),
            Ok(None) => Err(format!(
                "the source ended at {done} of {} bytes",
                job.size_bytes
            )),
            Ok(Some(chunk)) => chunk,
        }
        .map_err(Failure::cut)?;
        let room = (job.size_bytes - done) as usize;
        let take = &chunk[..chunk.len().min(room)];
        file.write_all(take).map_err(io)?;
        done += take.len() as u64;
        tally.bytes_done.set(done);
        tally.written.set(tally.written.get() + take.len() as u64);
        let elapsed = last_report.0.elapsed();
        if elapsed >= PROGRESS_EVERY {
            let rate = ((done - last_report.1) as f64 / elapsed.as_secs_f64()) as u64;
            last_report = (Instant::now(), done);
            let _ = notes.send(CacheNote::Fetch(FetchNote::Progress {
                sha256: job.sha256.clone(),
                generation: job.generation,
                rate_bytes_per_s: rate,
            }));
        }
    }
    Ok(())
}

/// Syncs the partial, checks it, and renames it into place (read-only).
fn seal(job: &Job) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::cut(format!("{}: {e}", job.partial.display()));
    std::fs::File::open(&job.partial)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    if let Err(m) = digest::check(&job.partial, job.size_bytes, &job.sha256) {
        let _ = std::fs::remove_file(&job.partial);
        return Err(Failure {
            reason: format!(
                "{}: the fetched copy does not match: {m}; it was deleted",
                caldera_spec::codes::WEIGHTS_CORRUPT.name
            ),
            corrupt: true,
        });
    }
    std::fs::set_permissions(&job.partial, std::fs::Permissions::from_mode(COPY_MODE))
        .map_err(io)?;
    std::fs::rename(&job.partial, &job.copy).map_err(io)?;
    if let Some(dir) = job.copy.parent() {
        sync_dir(dir).map_err(io)?;
    }
    Ok(())
}
