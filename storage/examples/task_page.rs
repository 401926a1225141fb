//! The cost of one page of `GET /v1/tasks?state=` at two sizes of the store,
//! side by side in one run: does a page cost the same at 20k tasks as at 1M?
//!
//! Each store holds tenant `bulk` with N tasks (99 in 100 queued, the
//! rest failed) and tenant `quiet` with 300 queued tasks. A page is what
//! the control plane's `task_page::read` does for a state filter: the keys
//! of one run of the task index (`Store::task_keys_in_state`), then each
//! record read and decoded. Timed, in turns across the two stores:
//!
//! - `quiet queued`: tenant quiet's first page of queued tasks (limit 100);
//! - `bulk queued @mid`: tenant bulk's queued tasks from a cursor halfway;
//! - `all queued @mid`: every tenant's queued tasks from a cursor halfway
//!   (the operator's listing);
//! - `bulk failed`: tenant bulk's failed tasks (1 in 100), first page;
//! - `bulk failed, no index`: the same page found by reading bulk's records
//!   in key order and keeping the failed ones — what a listing by state
//!   costs without the index (capped at 5,000 records, as a page was).
//!
//! ```text
//! cargo run --release -p caldera-storage --example task_page -- [SMALL] [LARGE] [REPS]
//! ```
//! Defaults: 20000, 1000000, 300. Prints the median and p99 of each case at
//! both sizes and the ratio of the medians (large / small).
use caldera_spec::{TaskRecord, TaskSpec, TaskState};
use caldera_storage::{Store, StoreConfig};
use std::time::{Duration, Instant};

type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const LIMIT: usize = 100;
/// Most records a page examined when listings by state scanned records.
const OLD_SCAN_BUDGET: usize = 5_000;

fn spec(key: &str) -> BoxResult<TaskSpec> {
    let json = serde_json::json!({
        "task_id": key,
        "task_type": "training",
        "priority": "medium",
        "resources": {"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 4}},
        "duration": "01:00:00",
        "image": "registry.internal/deeplearning/pytorch:2.1-cu12.1",
        "command": ["python", "train.py", "--epochs", "3"],
    });
    Ok(serde_json::from_value(json)?)
}

/// A store in `dir` with `n` tasks of tenant bulk and 300 of tenant quiet.
fn build(dir: &std::path::Path, n: usize) -> BoxResult<Store> {
    let store = Store::open(dir, &StoreConfig::default())?;
    let began = Instant::now();
    let mut b = store.batch();
    let tasks = (0..n)
        .map(|i| ("bulk", i))
        .chain((0..300).map(|i| ("quiet", i)));
    for (seq, (tenant, i)) in tasks.enumerate() {
        let key = caldera_spec::task_key(tenant, &format!("job-{i:08}"));
        let mut r = TaskRecord::new(spec(&key)?, tenant.to_string(), 1, seq as u64);
        if tenant == "bulk" && i % 100 == 99 {
            r.state = TaskState::Failed;
        }
        b.put_task(&r);
        if seq % 10_000 == 9_999 {
            store.commit(std::mem::take(&mut b))?;
        }
    }
    store.commit(b)?;
    store.flush()?;
    println!(
        "built {n} + 300 tasks in {:.1} s, {:.0} MiB on disk",
        began.elapsed().as_secs_f64(),
        store.size_on_disk()? as f64 / 1048576.0
    );
    Ok(store)
}

/// One page by the index: keys of one run, then each record decoded.
fn page(store: &Store, state: TaskState, prefix: &str, after: &str) -> BoxResult<usize> {
    let mut n = 0;
    for k in store
        .task_keys_in_state(state, prefix, after)
        .take(LIMIT + 1)
    {
        if store.task(&k?)?.is_some() {
            n += 1;
        }
    }
    Ok(n)
}

/// The same page without the index: the tenant's records in key order.
fn scanned(store: &Store, state: TaskState, prefix: &str) -> BoxResult<usize> {
    let mut n = 0;
    for r in store.tasks_after(prefix).take(OLD_SCAN_BUDGET) {
        let r = r?;
        if !r.spec.task_id.starts_with(prefix) {
            break;
        }
        if r.state == state {
            n += 1;
            if n > LIMIT {
                break;
            }
        }
    }
    Ok(n)
}

type Case = fn(&Store, &str) -> BoxResult<usize>;

fn main() -> BoxResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(d);
    let (small, large, reps) = (arg(0, 20_000), arg(1, 1_000_000), arg(2, 300));
    let root = tempfile::tempdir()?;
    let stores = [
        (small, build(&root.path().join("small"), small)?),
        (large, build(&root.path().join("large"), large)?),
    ];
    let cases: [(&str, Case); 5] = [
        ("quiet queued", |s, _| {
            page(s, TaskState::Queued, "quiet/", "")
        }),
        ("bulk queued @mid", |s, mid| {
            page(s, TaskState::Queued, "bulk/", mid)
        }),
        ("all queued @mid", |s, mid| {
            page(s, TaskState::Queued, "", mid)
        }),
        ("bulk failed", |s, _| {
            page(s, TaskState::Failed, "bulk/", "")
        }),
        ("bulk failed, no index", |s, _| {
            scanned(s, TaskState::Failed, "bulk/")
        }),
    ];
    println!(
        "{:<24} {:>12} {:>10} {:>10} {:>12} {:>10} {:>10} {:>7}",
        "page (limit 100)", "tasks", "median", "p99", "tasks", "median", "p99", "ratio"
    );
    for (name, case) in cases {
        let mut times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
        let mut found = [0usize; 2];
        // In turns, so that both sizes see the same machine load.
        for _ in 0..reps {
            for (i, (n, store)) in stores.iter().enumerate() {
                let mid = caldera_spec::task_key("bulk", &format!("job-{:08}", n / 2));
                let t = Instant::now();
                found[i] = case(store, &mid)?;
                times[i].push(t.elapsed());
            }
        }
        let stat = |v: &mut Vec<Duration>, p: f64| {
            v.sort();
            v[((v.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
        };
        let (m0, p0) = (stat(&mut times[0], 0.5), stat(&mut times[0], 0.99));
        let (m1, p1) = (stat(&mut times[1], 0.5), stat(&mut times[1], 0.99));
        println!(
            "{:<24} {:>12} {:>8.3}ms {:>8.3}ms {:>12} {:>8.3}ms {:>8.3}ms {:>7.2}",
            name,
            format!("{} ({})", stores[0].0, found[0]),
            m0,
            p0,
            format!("{} ({})", stores[1].0, found[1]),
            m1,
            p1,
            m1 / m0
        );
    }
    Ok(())
}
