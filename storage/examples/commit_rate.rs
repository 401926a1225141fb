//! Commit throughput of the store, as the gateway uses it: one submission =
//! one batch (task record + `task_submitted` event), group-committed with
//! one flush per N commits. Then the boot-time scan of every task.
//!
//! ```text
//! cargo run --release -p caldera-storage --example commit_rate -- [TASKS] [DIR]
//! ```
//! TASKS (default 100000) submissions are written; DIR (default: a fresh
//! temporary directory) holds the store.
use caldera_spec::{Event, EventKind, TaskRecord, TaskSpec};
use caldera_storage::{Store, StoreConfig};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
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
    let store = Store::open(&dir, &StoreConfig::default())?;

    println!(
        "{:>12} {:>12} {:>12} {:>12} {:>12}",
        "flush every", "commits", "commits/s", "flush p50", "flush p99"
    );
    // BENCH_GROUPS="1,10,100,1000": commits per flush for each run.
    let groups: Vec<u64> = std::env::var("BENCH_GROUPS")
        .unwrap_or_else(|_| "1,10,100,1000".to_string())
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let per_setting = total / groups.len() as u64;
    let mut n = 0u64;
    for &every in &groups {
        let mut flushes = Vec::new();
        let start = Instant::now();
        for i in 0..per_setting {
            let id = format!("bench-{n:08}");
            n += 1;
            let record = TaskRecord::new(spec(&id), "acme".to_string(), 1, n);
            let mut b = store.batch();
            b.put_task(&record);
            b.append_event(
                Event::new(1, EventKind::TaskSubmitted, "submitted")
                    .task(&id)
                    .tenant("acme"),
            );
            store.commit(b)?;
            if (i + 1) % every == 0 || i + 1 == per_setting {
                let f = Instant::now();
                store.flush()?;
                flushes.push(f.elapsed());
            }
        }
        let secs = start.elapsed().as_secs_f64();
        flushes.sort_unstable();
        println!(
            "{:>12} {:>12} {:>12.0} {:>10.2}ms {:>10.2}ms",
            every,
            per_setting,
            per_setting as f64 / secs,
            percentile(&flushes, 0.5),
            percentile(&flushes, 0.99)
        );
    }
    println!(
        "on disk: {:.1} MiB for {n} tasks and {n} events",
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
