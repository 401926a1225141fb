//! Commit throughput of the store, as the gateway uses it: one submission =
//! one batch (task record + `task_submitted` event).
//!
//! 1. One thread, one flush per N commits (`BENCH_GROUPS`, default 1,10,100,1000).
//! 2. Group commit as the gateway does it: `BENCH_SUBMITTERS` threads (default
//!    16) each commit and wait for the next flush; one flusher thread flushes
//!    back to back. Reports acknowledged (durable) submissions/s and latency.
//! 3. Reopen and decode every task (the boot-time rebuild).
//!
//! ```text
//! cargo run --release -p caldera-storage --example commit_rate -- [TASKS] [DIR]
//! ```
//! TASKS (default 100000) submissions are written in all; DIR (default: a
//! fresh temporary directory) holds the store.
use caldera_spec::{Event, EventKind, TaskRecord, TaskSpec};
use caldera_storage::{Store, StoreConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn spec(id: &str) -> TaskSpec {
    let json = serde_json::json!({
        "task_id": id,
        "task_type": "training",
        "priority": "high",
        "resources": {"gpu": {"count": 4, "memory_gb": 80, "model": "A100"}, "cpu": {"cores": 32},
                      "memory": {"size_gb": 256}, "disk": {"size_gb": 200}},
        "duration": "01:00:00",
        "image": "registry.internal/deeplearning/pytorch:2.1-cu12.1",
        "command": ["python", "train.py", "--epochs", "3"],
    });
    serde_json::from_value(json).expect("spec")
}

/// Commits submission number `n`.
fn submit(store: &Store, n: u64) -> BoxResult<()> {
    let id = format!("bench-{n:08}");
    let record = TaskRecord::new(spec(&id), "acme".to_string(), 1, n);
    let mut b = store.batch();
    b.put_task(&record);
    b.append_event(
        Event::new(1, EventKind::TaskSubmitted, "submitted")
            .task(&id)
            .tenant("acme"),
    );
    store.commit(b)?;
    Ok(())
}

fn ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn env_list(name: &str, default: &str) -> BoxResult<Vec<u64>> {
    let raw = std::env::var(name).unwrap_or_else(|_| default.to_string());
    Ok(raw.split(',').map(str::parse).collect::<Result<_, _>>()?)
}

/// Part 1: one thread, a flush every `every` commits.
fn sequential(store: &Store, every: u64, count: u64, next: &AtomicU64) -> BoxResult<()> {
    let mut flushes = Vec::new();
    let start = Instant::now();
    for i in 0..count {
        submit(store, next.fetch_add(1, Ordering::Relaxed))?;
        if (i + 1) % every == 0 || i + 1 == count {
            let f = Instant::now();
            store.flush()?;
            flushes.push(f.elapsed());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    flushes.sort_unstable();
    println!(
        "{every:>12} {count:>10} {:>10.0} {:>10.2}ms {:>10.2}ms",
        count as f64 / secs,
        ms(&flushes, 0.5),
        ms(&flushes, 0.99)
    );
    Ok(())
}

/// Flush generations: `started` counts flushes begun, `done` the last
/// finished; `waiting` submitters wait for one.
#[derive(Default)]
struct Generations {
    started: u64,
    done: u64,
    waiting: u64,
}

/// Part 2: concurrent submitters acknowledged by a shared flusher.
fn group_commit(
    store: &Store,
    submitters: u64,
    count: u64,
    next: &Arc<AtomicU64>,
) -> BoxResult<()> {
    // .1 wakes submitters (a flush finished), .2 wakes the flusher (work waits).
    let gens = Arc::new((
        Mutex::new(Generations::default()),
        Condvar::new(),
        Condvar::new(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let flushes = Arc::new(AtomicU64::new(0));
    let flusher = {
        let (store, gens, stop, flushes) =
            (store.clone(), gens.clone(), stop.clone(), flushes.clone());
        std::thread::spawn(move || -> BoxResult<()> {
            while !stop.load(Ordering::Relaxed) {
                let g = {
                    let mut s = gens.0.lock().map_err(|_| "poisoned")?;
                    while s.waiting == 0 && !stop.load(Ordering::Relaxed) {
                        s = gens
                            .2
                            .wait_timeout(s, Duration::from_millis(10))
                            .map_err(|_| "poisoned")?
                            .0;
                    }
                    s.waiting = 0;
                    s.started += 1;
                    s.started
                };
                store.flush()?;
                flushes.fetch_add(1, Ordering::Relaxed);
                gens.0.lock().map_err(|_| "poisoned")?.done = g;
                gens.1.notify_all();
            }
            Ok(())
        })
    };
    let per_thread = count / submitters;
    let start = Instant::now();
    let workers: Vec<_> = (0..submitters)
        .map(|_| {
            let (store, gens, next) = (store.clone(), gens.clone(), next.clone());
            std::thread::spawn(move || -> BoxResult<Vec<Duration>> {
                let mut lat = Vec::with_capacity(per_thread as usize);
                for _ in 0..per_thread {
                    let t = Instant::now();
                    submit(&store, next.fetch_add(1, Ordering::Relaxed))?;
                    // Durable once a flush that began after this commit is done.
                    let mut s = gens.0.lock().map_err(|_| "poisoned")?;
                    let target = s.started + 1;
                    s.waiting += 1;
                    gens.2.notify_one();
                    while s.done < target {
                        s = gens.1.wait(s).map_err(|_| "poisoned")?;
                    }
                    lat.push(t.elapsed());
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for w in workers {
        lat.extend(w.join().map_err(|_| "submitter panicked")??);
    }
    let secs = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    flusher.join().map_err(|_| "flusher panicked")??;
    lat.sort_unstable();
    println!(
        "{submitters:>12} {:>10} {:>10.0} {:>10.2}ms {:>10.2}ms {:>10.1}",
        lat.len(),
        lat.len() as f64 / secs,
        ms(&lat, 0.5),
        ms(&lat, 0.99),
        lat.len() as f64 / flushes.load(Ordering::Relaxed).max(1) as f64
    );
    Ok(())
}

fn main() -> BoxResult<()> {
    let mut args = std::env::args().skip(1);
    let total: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100_000);
    let tmp = tempfile::tempdir()?;
    let dir: PathBuf = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("db"));
    let groups = env_list("BENCH_GROUPS", "1,10,100,1000")?;
    let submitters = env_list("BENCH_SUBMITTERS", "16")?;
    let per_run = total / (groups.len() + submitters.len()) as u64;
    let store = Store::open(&dir, &StoreConfig::default())?;
    let next = Arc::new(AtomicU64::new(0));

    println!("one thread, flush every N commits");
    println!(
        "{:>12} {:>10} {:>10} {:>12} {:>12}",
        "N", "commits", "commits/s", "flush p50", "flush p99"
    );
    for &every in &groups {
        sequential(&store, every, per_run, &next)?;
    }
    println!("group commit: submitters wait for a flush that began after their commit");
    println!(
        "{:>12} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "submitters", "acked", "acked/s", "p50", "p99", "per flush"
    );
    for &s in &submitters {
        group_commit(&store, s, per_run, &next)?;
    }
    let n = next.load(Ordering::Relaxed);
    println!(
        "on disk: {:.1} MiB for {n} tasks and events",
        store.size_on_disk()? as f64 / 1048576.0
    );
    drop(store);

    let start = Instant::now();
    let store = Store::open(&dir, &StoreConfig::default())?;
    let opened = start.elapsed();
    let mut count = 0usize;
    for task in store.tasks() {
        task?;
        count += 1;
    }
    println!(
        "reopen: {:.0} ms; scan + decode of {count} tasks: {:.0} ms",
        opened.as_secs_f64() * 1e3,
        (start.elapsed() - opened).as_secs_f64() * 1e3
    );
    Ok(())
}
