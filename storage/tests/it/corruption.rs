//! A corrupt stored value is an error that names its key, never a panic.
use crate::common;

use caldera_spec::EventKind;
use caldera_storage::{EventFilter, StorageError};
use common::{event, open, task};

/// Writes raw bytes under `key` with sled directly, as a damaged disk might.
/// Retries `f` while the directory is still locked by a handle being dropped
/// (sled's background thread can hold the file lock a moment past `drop`).
fn when_unlocked<T, E: std::fmt::Display>(mut f: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    for _ in 0..100 {
        match f() {
            Err(e) if e.to_string().contains("lock") => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
    f()
}

fn poke(dir: &std::path::Path, key: &[u8], value: &[u8]) {
    let db = when_unlocked(|| sled::open(dir)).unwrap();
    db.insert(key, value).unwrap();
    db.flush().unwrap();
}

fn corrupt_key(err: StorageError) -> String {
    assert_eq!(err.code(), 50002, "{err}");
    assert_eq!(err.name(), "storage_corrupt_record");
    match err {
        StorageError::Corrupt { key, .. } => key,
        other => panic!("expected Corrupt, got {other}"),
    }
}

#[test]
fn corrupt_records_are_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = open(dir.path());
        let mut b = store.batch();
        b.put_task(&task("good-1", "acme", 1));
        b.put_task(&task("good-2", "acme", 2));
        b.append_event(event(
            EventKind::TaskSubmitted,
            Some("good-1"),
            Some("acme"),
            None,
        ));
        b.append_event(event(
            EventKind::TaskSubmitted,
            Some("good-2"),
            Some("acme"),
            None,
        ));
        store.commit(b).unwrap();
        store.flush().unwrap();
    }
    poke(dir.path(), b"t/bad", b"{\"spec\": tru");
    poke(dir.path(), b"a/bad", b"\xff\xfe");
    poke(dir.path(), b"u/bad", b"[]");
    poke(dir.path(), b"n/bad", b"null");
    let mut event2 = b"e/".to_vec();
    event2.extend_from_slice(&2u64.to_be_bytes());
    poke(dir.path(), &event2, b"{\"seq\": 2}");

    let store = open(dir.path());
    assert_eq!(corrupt_key(store.task("bad").unwrap_err()), "t/bad");
    assert!(store.task("good-1").unwrap().is_some());

    // The boot scan reports the bad record and still yields the good ones.
    let scanned: Vec<_> = store.tasks().collect();
    assert_eq!(scanned.len(), 3);
    let (ok, bad): (Vec<_>, Vec<_>) = scanned.into_iter().partition(Result::is_ok);
    assert_eq!(ok.len(), 2);
    assert_eq!(
        corrupt_key(bad.into_iter().next().unwrap().unwrap_err()),
        "t/bad"
    );

    let alloc_err = store.allocations().find_map(Result::err).unwrap();
    assert_eq!(corrupt_key(alloc_err), "a/bad");
    assert_eq!(corrupt_key(store.tenant("bad").unwrap_err()), "u/bad");
    assert_eq!(corrupt_key(store.tenants().unwrap_err()), "u/bad");
    assert_eq!(corrupt_key(store.nodes().unwrap_err()), "n/bad");

    // Events: the whole-log walk and the index walk both name `e/2`.
    let all = store.events(&EventFilter::default(), 0, 10).unwrap_err();
    assert_eq!(corrupt_key(all), "e/2");
    let by_task = EventFilter {
        task: Some("good-2".into()),
        ..EventFilter::default()
    };
    assert_eq!(
        corrupt_key(store.events(&by_task, 0, 10).unwrap_err()),
        "e/2"
    );
    // Reads that do not touch the bad event still work.
    assert_eq!(
        store.events(&EventFilter::default(), 0, 1).unwrap()[0].seq,
        1
    );
    assert_eq!(
        store.events(&EventFilter::default(), 2, 10).unwrap().len(),
        0
    );
}

#[test]
fn an_unknown_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    poke(dir.path(), b"s/format", b"99");
    let err = when_unlocked(|| caldera_storage::Store::open(dir.path(), &Default::default()))
        .unwrap_err();
    assert_eq!(err.code(), 50004);
    assert!(err.to_string().contains("99"), "{err}");
}
