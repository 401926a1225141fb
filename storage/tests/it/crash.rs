//! A crash between writes leaves no half record.
//!
//! The parent test re-runs this test binary as a child process that commits
//! batches in a tight loop and flushes every few commits, kills it with
//! SIGKILL at an arbitrary moment, reopens the store and checks that every
//! batch is there entirely or not at all, and that every flushed batch is there.
use crate::common;

use caldera_spec::{EventKind, TaskState};
use caldera_storage::{EventFilter, Store};
use common::{allocation, event, open, scheduled};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DIR_ENV: &str = "CALDERA_STORAGE_CRASH_DIR";
const START_ENV: &str = "CALDERA_STORAGE_CRASH_START";
const FLUSH_EVERY: u64 = 7;
const ROUNDS: u64 = 6;

fn task_id(k: u64) -> String {
    format!("task-{k:08}")
}
fn alloc_id(k: u64) -> String {
    format!("alloc-{k:08}")
}

/// Batch `k`: task k is placed (task + allocation + event) and task k-1
/// finishes (task update + allocation removal + event), all in one commit.
fn commit_step(store: &Store, k: u64) {
    let alloc = allocation(&alloc_id(k), &task_id(k), "acme", "node-a");
    let mut b = store.batch();
    b.put_task(&scheduled(&task_id(k), "acme", k, &alloc));
    b.put_allocation(&alloc);
    b.append_event(event(
        EventKind::AllocationGranted,
        Some(&task_id(k)),
        Some("acme"),
        Some("node-a"),
    ));
    if let Some(prev) = k.checked_sub(1) {
        let prev_alloc = allocation(&alloc_id(prev), &task_id(prev), "acme", "node-a");
        let mut done = scheduled(&task_id(prev), "acme", prev, &prev_alloc);
        done.transition(TaskState::Finished, 3_000 + k, None);
        done.allocation = None;
        b.put_task(&done);
        b.remove_allocation(&alloc_id(prev));
        b.append_event(event(
            EventKind::AllocationReleased,
            Some(&task_id(prev)),
            Some("acme"),
            Some("node-a"),
        ));
    }
    b.meta_put("last_step", &k.to_be_bytes());
    store.commit(b).expect("commit");
}

/// The child: writes until killed. Only does anything when started by the parent.
#[test]
#[ignore = "helper process of crash_mid_write_leaves_no_half_batch"]
fn crash_writer() {
    let Ok(dir) = std::env::var(DIR_ENV) else {
        return;
    };
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let store = open(Path::new(&dir));
    for k in start.. {
        commit_step(&store, k);
        if (k + 1) % FLUSH_EVERY == 0 {
            store.flush().expect("flush");
            // Printed only after the flush returned: this is an acknowledgement.
            println!("flushed {k}");
        }
    }
}

/// Checks every invariant of the step sequence; returns the last step present.
fn check_consistent(store: &Store) -> Option<u64> {
    let tasks: Vec<_> = store.tasks().collect::<Result<_, _>>().unwrap();
    let Some(last) = tasks.len().checked_sub(1).map(|n| n as u64) else {
        assert_eq!(store.allocations().count(), 0);
        assert_eq!(store.last_event_seq(), 0);
        return None;
    };
    // Batches land in order: the tasks present are exactly steps 0..=last.
    for (k, t) in tasks.iter().enumerate() {
        let k = k as u64;
        assert_eq!(t.spec.task_id, task_id(k), "tasks are a gapless prefix");
        let events = store
            .events(
                &EventFilter {
                    task: Some(task_id(k)),
                    ..EventFilter::default()
                },
                0,
                10,
            )
            .unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.kind).collect();
        if k == last {
            assert_eq!(t.state, TaskState::Scheduled, "{}", t.spec.task_id);
            assert!(
                store.allocation(&alloc_id(k)).unwrap().is_some(),
                "task {k} without its allocation"
            );
            assert_eq!(kinds, vec![EventKind::AllocationGranted], "task {k}");
        } else {
            assert_eq!(t.state, TaskState::Finished, "{}", t.spec.task_id);
            assert!(
                store.allocation(&alloc_id(k)).unwrap().is_none(),
                "finished task {k} still allocated"
            );
            assert_eq!(
                kinds,
                vec![EventKind::AllocationGranted, EventKind::AllocationReleased],
                "task {k}"
            );
        }
    }
    // The ledger holds exactly the last step's allocation.
    let allocs: Vec<_> = store.allocations().collect::<Result<_, _>>().unwrap();
    assert_eq!(allocs.len(), 1);
    assert_eq!(allocs[0].allocation_id, alloc_id(last));
    // The log is gapless: 1 event for step 0, 2 for each later step.
    let log = store
        .events(&EventFilter::default(), 0, usize::MAX)
        .unwrap();
    let want: Vec<u64> = (1..=2 * last + 1).collect();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), want);
    assert_eq!(store.last_event_seq(), 2 * last + 1);
    assert_eq!(
        store.meta_get("last_step").unwrap(),
        Some(last.to_be_bytes().to_vec())
    );
    Some(last)
}

#[test]
fn crash_mid_write_leaves_no_half_batch() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut next = 0u64;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::crash_writer",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_ENV, dir.path())
            .env(START_ENV, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(k) = line
                    .strip_prefix("flushed ")
                    .and_then(|k| k.parse::<u64>().ok())
                {
                    if tx.send(k).is_err() {
                        break;
                    }
                }
            }
        });
        // Let it get well into its run, then kill it at a moment that
        // differs from round to round.
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut acked = None;
        while acked.is_none_or(|k| k < next + 100) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(k) => acked = Some(k),
                Err(e) => {
                    let _ = child.kill();
                    panic!("writer made no progress: {e}");
                }
            }
        }
        std::thread::sleep(Duration::from_micros(1_700 * round + 300));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        // Every "flushed" line was printed after its flush returned.
        let acked = rx.try_iter().last().or(acked).unwrap();

        let store = open(dir.path());
        let last = check_consistent(&store).expect("flushed steps are present");
        assert!(
            last >= acked,
            "round {round}: step {acked} was flushed but only {last} survived"
        );
        eprintln!("round {round}: acked {acked}, survived {last}");
        next = last + 1;
    }
    // After all the crashes the log still hands out fresh seqs.
    let store = open(dir.path());
    let before = store.last_event_seq();
    commit_step(&store, next);
    assert_eq!(store.last_event_seq(), before + 2);
    check_consistent(&store);
}
