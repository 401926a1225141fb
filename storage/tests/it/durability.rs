//! What was committed and flushed survives closing and reopening the store.
use crate::common;

use caldera_spec::{EventKind, TaskState};
use caldera_storage::{EventFilter, Store, StoreConfig};
use common::{allocation, event, node, open, scheduled, task, tenant};
use std::sync::Arc;

#[test]
fn flushed_records_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let a1 = allocation("alloc-1", "task-1", "acme", "node-a");
    let a2 = allocation("alloc-2", "task-2", "acme", "node-b");
    let t1 = scheduled("task-1", "acme", 1, &a1);
    let mut t2 = scheduled("task-2", "acme", 2, &a2);
    let seqs = {
        let store = open(dir.path());
        let mut b = store.batch();
        b.put_tenant(&tenant("acme"));
        b.put_node(&node("node-a"));
        b.put_node(&node("node-b"));
        b.put_task(&t1);
        b.put_task(&t2);
        b.put_allocation(&a1);
        b.put_allocation(&a2);
        b.meta_put("operator_token_sha256", b"abc123");
        b.append_event(event(EventKind::TenantCreated, None, Some("acme"), None));
        b.append_event(event(
            EventKind::AllocationGranted,
            Some("task-1"),
            Some("acme"),
            Some("node-a"),
        ));
        let first = store.commit(b).unwrap();
        assert_eq!(first.event_seqs, vec![1, 2]);

        // Task 2 finishes: its allocation leaves the ledger in the same batch.
        t2.transition(TaskState::Finished, 9_000, None);
        t2.exit_code = Some(0);
        let mut b = store.batch();
        b.put_task(&t2);
        b.remove_allocation("alloc-2");
        b.append_event(event(
            EventKind::AllocationReleased,
            Some("task-2"),
            Some("acme"),
            Some("node-b"),
        ));
        let second = store.commit(b).unwrap();
        assert_eq!(second.event_seqs, vec![3]);
        store.flush().unwrap();
        store.last_event_seq()
    };
    assert_eq!(seqs, 3);

    let store = open(dir.path());
    assert_eq!(store.task("task-1").unwrap(), Some(t1.clone()));
    assert_eq!(store.task("task-2").unwrap(), Some(t2.clone()));
    assert_eq!(store.task("task-3").unwrap(), None);
    let tasks: Vec<_> = store.tasks().collect::<Result<_, _>>().unwrap();
    assert_eq!(tasks, vec![t1, t2]);
    let allocs: Vec<_> = store.allocations().collect::<Result<_, _>>().unwrap();
    assert_eq!(allocs, vec![a1.clone()], "alloc-2 was removed");
    assert_eq!(store.allocation("alloc-1").unwrap(), Some(a1));
    assert_eq!(store.allocation("alloc-2").unwrap(), None);
    assert_eq!(store.tenant("acme").unwrap(), Some(tenant("acme")));
    assert_eq!(store.tenants().unwrap(), vec![tenant("acme")]);
    assert_eq!(store.nodes().unwrap(), vec![node("node-a"), node("node-b")]);
    assert_eq!(store.node("node-b").unwrap(), Some(node("node-b")));
    assert_eq!(store.node("node-c").unwrap(), None);
    assert_eq!(
        store.meta_get("operator_token_sha256").unwrap().as_deref(),
        Some(&b"abc123"[..])
    );
    assert_eq!(store.meta_get("absent").unwrap(), None);

    let events = store.events(&EventFilter::default(), 0, 100).unwrap();
    let got: Vec<_> = events.iter().map(|e| (e.seq, e.kind)).collect();
    assert_eq!(
        got,
        vec![
            (1, EventKind::TenantCreated),
            (2, EventKind::AllocationGranted),
            (3, EventKind::AllocationReleased)
        ]
    );
    assert_eq!(events[1].task.as_deref(), Some("task-1"));
    assert_eq!(events[1].node.as_deref(), Some("node-a"));

    // The log goes on after the reopen; no seq is handed out twice.
    assert_eq!(store.last_event_seq(), 3);
    let mut b = store.batch();
    b.append_event(event(EventKind::ServerStarted, None, None, None));
    b.append_event(event(EventKind::NodeJoined, None, None, Some("node-a")));
    assert_eq!(store.commit(b).unwrap().event_seqs, vec![4, 5]);
    assert_eq!(store.last_event_seq(), 5);
}

#[test]
fn event_seq_is_never_reused_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3u64 {
        let store = open(dir.path());
        assert_eq!(store.last_event_seq(), round * 2);
        let mut b = store.batch();
        b.append_event(event(EventKind::ServerStarted, None, None, None));
        b.append_event(event(EventKind::ServerStarted, None, None, None));
        let info = store.commit(b).unwrap();
        assert_eq!(info.event_seqs, vec![round * 2 + 1, round * 2 + 2]);
        store.flush().unwrap();
    }
    let store = open(dir.path());
    let seqs: Vec<u64> = store
        .events(&EventFilter::default(), 0, 100)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
}

#[test]
fn flush_async_is_a_durability_point() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        let mut b = store.batch();
        b.put_task(&task("t-async", "acme", 1));
        store.commit(b).unwrap();
        let store2 = store.clone();
        let flushed = std::thread::spawn(move || block_on(store2.flush_async()))
            .join()
            .unwrap();
        flushed.unwrap();
    }
    let store = open(dir.path());
    assert!(store.task("t-async").unwrap().is_some());
}

#[test]
fn concurrent_commits_get_unique_gapless_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(dir.path()));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut seqs = Vec::new();
                for i in 0..50 {
                    let id = format!("t{t}-{i}");
                    let mut b = store.batch();
                    b.put_task(&task(&id, "acme", i));
                    b.append_event(event(
                        EventKind::TaskSubmitted,
                        Some(&id),
                        Some("acme"),
                        None,
                    ));
                    seqs.extend(store.commit(b).unwrap().event_seqs);
                }
                seqs
            })
        })
        .collect();
    let mut all: Vec<u64> = threads
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (1..=200).collect::<Vec<u64>>());
    // Log order is seq order, and each event's seq is the one the commit returned.
    let log = store.events(&EventFilter::default(), 0, 1000).unwrap();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), all);
    assert_eq!(store.tasks().count(), 200);
}

#[test]
fn empty_batch_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let b = store.batch();
    assert!(b.is_empty());
    assert_eq!(store.commit(b).unwrap().event_seqs, Vec::<u64>::new());
    let mut b = store.batch();
    b.remove_allocation("nothing");
    assert!(!b.is_empty());
    store.commit(b).unwrap();
    assert_eq!(store.last_event_seq(), 0);
}

#[test]
fn second_open_of_a_held_store_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let _first = open(dir.path());
    let err = Store::open(dir.path(), &StoreConfig::default()).unwrap_err();
    assert_eq!(err.code(), 50001);
    assert_eq!(err.name(), "storage_io");
}

#[test]
fn a_bad_config_is_refused_before_opening() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        cache_capacity_bytes: 1,
        flush_every_ms: None,
    };
    let err = Store::open(dir.path(), &cfg).unwrap_err();
    assert_eq!(err.name(), "storage_config");
    assert!(err.to_string().contains("cache-capacity-bytes"), "{err}");
}

/// Drives a future to completion on this thread (sled's flush future needs no runtime).
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn dropping_the_last_handle_flushes() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        let clone = store.clone();
        let mut b = clone.batch();
        b.put_task(&task("t-unflushed", "acme", 1));
        b.append_event(event(
            EventKind::TaskSubmitted,
            Some("t-unflushed"),
            None,
            None,
        ));
        clone.commit(b).unwrap();
        drop(clone);
        // No flush: a clean close (the last handle dropped) writes it out.
    }
    let store = open(dir.path());
    assert!(store.task("t-unflushed").unwrap().is_some());
    assert_eq!(store.last_event_seq(), 1);
}

#[test]
fn store_and_flush_future_can_cross_threads() {
    fn send_sync_static<T: Send + Sync + 'static>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    send_sync_static(&store);
    let tasks = store.tasks();
    send(&tasks);
    drop(tasks);
    let fut = store.flush_async();
    send(&fut);
    block_on(fut).unwrap();
}
