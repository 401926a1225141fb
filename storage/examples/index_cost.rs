//! What the task index adds to a submission's commit: one task record
//! committed (no flush) three ways, in turns of 500 commits so that all
//! three see the same machine load:
//!
//! 1. `put_task`: the record and its index entry (a fresh task has no
//!    other state in its history, so nothing to remove);
//! 2. the record alone (its JSON under a key of its own);
//! 3. the record, an entry, and ten removals of absent keys: what a put
//!    would cost if it removed the entries of every other state.
//!
//! ```text
//! cargo run --release -p caldera-storage --example index_cost -- [COMMITS]
//! ```
//! COMMITS (default 30000) per way; prints the mean time per commit.
use caldera_spec::{TaskRecord, TaskSpec};
use caldera_storage::{Store, StoreConfig};
use std::time::{Duration, Instant};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const TURN: usize = 500;

fn spec(key: &str) -> BoxResult<TaskSpec> {
    Ok(serde_json::from_value(serde_json::json!({
        "task_id": key,
        "task_type": "training",
        "priority": "medium",
        "resources": {"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 4}},
        "duration": "01:00:00",
        "command": ["python", "train.py", "--epochs", "3"],
    }))?)
}

fn main() -> BoxResult<()> {
    let commits: usize = std::env::args()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(30_000);
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), &StoreConfig::default())?;
    let mut took = [Duration::ZERO; 3];
    let mut seq = 0u64;
    for turn in 0..commits.div_ceil(TURN) {
        for (way, t) in took.iter_mut().enumerate() {
            let began = Instant::now();
            for i in 0..TURN {
                seq += 1;
                let key = format!("acme/w{way}-{turn}-{i}");
                let rec = TaskRecord::new(spec(&key)?, "acme".into(), 1, seq);
                let mut b = store.batch();
                match way {
                    0 => b.put_task(&rec),
                    1 => b.meta_put(&key, &serde_json::to_vec(&rec)?),
                    _ => {
                        b.meta_put(&key, &serde_json::to_vec(&rec)?);
                        b.meta_put(&format!("ix/{key}"), b"");
                        for k in 0..10 {
                            b.meta_remove(&format!("ix{k}/{key}"));
                        }
                    }
                }
                store.commit(b)?;
            }
            *t += began.elapsed();
        }
    }
    let n = (commits.div_ceil(TURN) * TURN) as f64;
    for (way, name) in [
        "put_task (record + index entry)",
        "record alone",
        "record + entry + 10 removals",
    ]
    .iter()
    .enumerate()
    {
        println!(
            "{name:<32} {:>6.1} us/commit",
            took[way].as_secs_f64() * 1e6 / n
        );
    }
    Ok(())
}
