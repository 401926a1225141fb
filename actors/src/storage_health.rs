//! Storage that fails and clears again (a disk that fills up and is freed):
//! the gate notes the first failure, its flusher tries, backing off, until
//! storage takes a write and its flush again, reopening sled when sled has
//! latched the error (it answers every later write with it for the life of
//! its handle), and then records what happened as two events. A reopen
//! drops what was applied but never flushed, so every actor is then rebuilt
//! from storage, as after a failed commit.
use caldera_spec::{Event, EventKind};
use caldera_storage::{StorageError, Store};
use std::sync::Mutex;
use std::time::Duration;

/// The first wait before storage is tried again, doubled after each try
/// that fails, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// Since when storage refuses writes, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    pub since_ms: u64,
    pub error: String,
}

/// How storage came back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Writes went through again on the same handle.
    AsItWas,
    /// sled had latched the error: reopened from its files.
    Reopened,
}

/// Whether storage is degraded now (shared by the gate and its flusher).
#[derive(Debug, Default)]
pub struct StorageHealth {
    degraded: Mutex<Option<Degraded>>,
}

impl StorageHealth {
    /// Notes a write or flush that failed with `e`; true when storage was
    /// healthy until now. Errors of a record itself (corrupt, unencodable)
    /// say nothing of the disk and are not counted.
    pub fn failed(&self, now_ms: u64, e: &StorageError) -> bool {
        if !matches!(e, StorageError::Sled(_)) {
            return false;
        }
        let mut d = self.degraded.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_some() {
            return false;
        }
        tracing::error!(error = %e, "storage degraded: writes are refused until it recovers");
        *d = Some(Degraded {
            since_ms: now_ms,
            error: e.to_string(),
        });
        true
    }

    pub fn degraded(&self) -> Option<Degraded> {
        self.degraded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Storage is healthy again: answers what it was.
    pub fn cleared(&self) -> Option<Degraded> {
        self.degraded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// One try (blocking): a write and its flush on the handle as it is; if
/// that fails, whether the disk takes writes again, and if it does, a
/// reopen and the same write. Says whether it reopened (whatever the
/// outcome: a reopen drops what the old handle never flushed).
pub fn try_storage(store: &Store) -> (bool, Result<(), StorageError>) {
    if store.probe().is_ok() {
        return (false, Ok(()));
    }
    if let Err(e) = store.room_to_write() {
        return (false, Err(e));
    }
    if let Err(e) = store.reopen() {
        return (true, Err(e));
    }
    (true, store.probe())
}

/// The two events of a recovery: when storage stopped taking writes and
/// why, and when it took them again and how.
pub fn events(was: &Degraded, now_ms: u64, how: Recovery, lost: u64) -> Vec<Event> {
    let secs = now_ms.saturating_sub(was.since_ms) as f64 / 1000.0;
    let how = match how {
        Recovery::AsItWas => "writes go through again".to_string(),
        Recovery::Reopened => format!(
            "reopened from its files ({lost} changes applied but never flushed were dropped, none of them acknowledged); every actor was rebuilt from storage"
        ),
    };
    vec![
        Event::new(
            was.since_ms,
            EventKind::StorageDegraded,
            format!(
                "storage stopped taking writes ({}); changes were refused with 503 not_recorded",
                was.error
            ),
        ),
        Event::new(
            now_ms,
            EventKind::StorageRecovered,
            format!("storage takes writes again after {secs:.1} s: {how}"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_io_failure_degrades_and_a_bad_record_never_does() {
        let h = StorageHealth::default();
        let io = StorageError::Sled(sled::Error::Io(std::io::Error::other("No space left")));
        let bad = StorageError::Config("x".into());
        assert!(!h.failed(1, &bad));
        assert!(h.degraded().is_none());
        assert!(h.failed(2, &io));
        assert!(!h.failed(3, &io));
        assert_eq!(h.degraded().map(|d| d.since_ms), Some(2));
        let was = h.cleared().unwrap();
        assert!(h.degraded().is_none());
        let e = events(&was, 4502, Recovery::Reopened, 3);
        assert_eq!(e[0].kind, EventKind::StorageDegraded);
        assert_eq!(e[0].at_ms, 2);
        assert!(e[0].message.contains("No space left"), "{}", e[0].message);
        assert_eq!(e[1].kind, EventKind::StorageRecovered);
        assert!(e[1].message.contains("after 4.5 s"), "{}", e[1].message);
        assert!(e[1].message.contains("3 changes"), "{}", e[1].message);
    }
}
