//! Group commit: many writers apply their atomic batches to sled, one flush
//! makes all of them durable, and each writer waits only for the flush that
//! covers its own batch. This is what lets the gateway acknowledge thousands of
//! submissions a second while still answering 201 only after the record is on disk.
use crate::commit_site::CommitSite;
use caldera_storage::{StorageError, Store, WriteBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify};

/// A committed batch's place in the flush order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(u64);

/// Commits batches and tells when they are durable.
pub struct FlushGate {
    store: Store,
    committed: AtomicU64,
    flushed: watch::Sender<u64>,
    kick: Notify,
    /// Commit and flush times (`caldera_storage_*_seconds`).
    metrics: crate::metrics::Metrics,
    /// Fail points (test builds only): to prove that a failed commit on
    /// any path stops its actor and its supervisor rebuilds it from sled.
    #[cfg(any(test, feature = "failpoints"))]
    faults: crate::commit_faults::CommitFaults,
    /// Whether storage refuses writes now (`storage_health.rs`).
    health: crate::storage_health::StorageHealth,
    /// Tickets whose batches a reopen dropped (applied, never flushed):
    /// never reported durable.
    lost: std::sync::Mutex<Vec<std::ops::RangeInclusive<u64>>>,
    /// Counts reopens; actors rebuild from storage on each.
    reopened: watch::Sender<u64>,
}

impl FlushGate {
    /// Creates the gate and starts its flusher on the current runtime;
    /// commit and flush times are recorded into `metrics`.
    pub fn start(store: Store, metrics: crate::metrics::Metrics) -> Arc<FlushGate> {
        let (flushed, _) = watch::channel(0);
        let gate = Arc::new(FlushGate {
            store,
            committed: AtomicU64::new(0),
            flushed,
            kick: Notify::new(),
            metrics,
            #[cfg(any(test, feature = "failpoints"))]
            faults: Default::default(),
            health: Default::default(),
            lost: Default::default(),
            reopened: watch::channel(0).0,
        });
        let flusher = gate.clone();
        actix::spawn(async move { flusher.run().await });
        gate
    }

    /// The store behind the gate, for reads.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The control plane's event measures (see [`crate::metrics`]).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// Applies `batch` atomically (visible to reads at once) and schedules a
    /// flush. `site` names the write path (logs, fail points).
    pub fn commit(&self, site: CommitSite, batch: WriteBatch) -> Result<Ticket, StorageError> {
        #[cfg(any(test, feature = "failpoints"))]
        if self.faults.refuses(site) {
            return Err(StorageError::Config(format!(
                "commit at {site} refused by a test fault"
            )));
        }
        let began = std::time::Instant::now();
        self.store.commit(batch).inspect_err(|e| {
            tracing::error!(%site, error = %e, "commit failed");
            if self.health.failed(crate::clock::now_ms(), e) {
                // The flusher tries storage until it takes writes again.
                self.kick.notify_one();
            }
        })?;
        self.metrics.commit_took(site, began.elapsed());
        let t = self.committed.fetch_add(1, Ordering::SeqCst) + 1;
        self.kick.notify_one();
        Ok(Ticket(t))
    }

    /// [`FlushGate::commit`] for changes whose failure is logged, not returned:
    /// `None` tells the caller not to act on what was not recorded.
    pub fn commit_logged(&self, site: CommitSite, batch: WriteBatch) -> Option<Ticket> {
        match self.commit(site, batch) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(%site, error = %e, "could not record a change");
                None
            }
        }
    }

    /// Records one event on its own.
    pub fn record(&self, e: caldera_spec::Event) {
        let mut b = self.store.batch();
        b.append_event(e);
        self.commit_logged(CommitSite::Event, b);
    }

    /// The ticket of the latest batch committed so far: waiting for it covers
    /// every batch already readable (tickets are ordered).
    pub fn latest(&self) -> Ticket {
        Ticket(self.committed.load(Ordering::SeqCst))
    }

    /// Test fault: the next `n` commits, at any site, fail as if sled had.
    #[cfg(test)]
    pub fn refuse_commits(&self, n: u64) {
        let rule = crate::commit_faults::FaultRule { skip: 0, fail: n };
        self.faults.arm(None, rule);
    }

    /// The disk fail point (test builds only): `full`, files may grow no
    /// more than the store's size now, so its next write that grows its
    /// log fails as on a full disk; not `full`, the limit is lifted.
    /// Answers the limit set (0: none).
    #[cfg(any(test, feature = "failpoints"))]
    pub fn fill_disk(&self, full: bool) -> std::io::Result<u64> {
        let limit = match full {
            true => Some(
                self.store
                    .size_on_disk()
                    .map_err(|e| std::io::Error::other(e.to_string()))?,
            ),
            false => None,
        };
        crate::commit_faults::limit_file_size(limit)?;
        Ok(limit.unwrap_or(0))
    }

    /// The fail points of this gate (test builds only).
    #[cfg(any(test, feature = "failpoints"))]
    pub fn faults(&self) -> &crate::commit_faults::CommitFaults {
        &self.faults
    }

    /// Resolves once the batch behind `ticket` has been flushed to disk.
    /// A batch that a reopen dropped is never reported durable: its waiter
    /// waits on (a request is answered by its client's timeout, and an
    /// actor's wait ends with its rebuild).
    pub async fn durable(&self, ticket: Ticket) {
        if self.settled(ticket).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits for `ticket`'s flush; an error if a reopen dropped its batch
    /// (the acknowledgement paths answer 503 with it, nothing recorded).
    pub async fn settled(&self, ticket: Ticket) -> Result<(), StorageError> {
        let mut rx = self.flushed.subscribe();
        // `wait_for` only fails if the sender is gone, i.e. the gate itself: nothing left to wait for.
        let _ = rx.wait_for(|f| *f >= ticket.0).await;
        let lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        if lost.iter().any(|r| r.contains(&ticket.0)) {
            return Err(StorageError::Config(
                "the change was dropped when storage was reopened after an I/O failure; retry"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether storage refuses writes now, since when and why.
    pub fn degraded(&self) -> Option<crate::storage_health::Degraded> {
        self.health.degraded()
    }

    /// Changes each time storage is reopened after an I/O failure.
    pub fn reopened(&self) -> watch::Receiver<u64> {
        self.reopened.subscribe()
    }

    /// Commits and waits for durability: the acknowledgement path.
    pub async fn commit_durable(
        &self,
        site: CommitSite,
        batch: WriteBatch,
    ) -> Result<(), StorageError> {
        let t = self.commit(site, batch)?;
        self.settled(t).await
    }

    async fn run(self: Arc<Self>) {
        loop {
            if self.health.degraded().is_some() {
                self.recover().await;
                continue;
            }
            let target = self.committed.load(Ordering::SeqCst);
            if target <= *self.flushed.borrow() {
                self.kick.notified().await;
                continue;
            }
            let began = std::time::Instant::now();
            let flushed = match self.store.flush_async().await {
                Ok(_) => {
                    // sled's flush is sync_file_range; fdatasync makes the group
                    // durable against power loss too, once per group, off the executor.
                    let store = self.store.clone();
                    match tokio::task::spawn_blocking(move || store.sync_log()).await {
                        Ok(r) => r,
                        Err(e) => Err(caldera_storage::StorageError::Config(format!(
                            "sync task failed: {e}"
                        ))),
                    }
                }
                Err(e) => Err(e),
            };
            match flushed {
                Ok(()) => {
                    self.metrics.flush_took(began.elapsed());
                    self.flushed.send_replace(target);
                }
                Err(e) => {
                    tracing::error!(error = %e, "flush failed; retrying");
                    self.health.failed(crate::clock::now_ms(), &e);
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }
}

impl FlushGate {
    /// Tries storage, backing off, until it takes a write and its flush
    /// again; then records the two events and, after a reopen, marks the
    /// batches it dropped lost and has every actor rebuilt.
    async fn recover(&self) {
        use crate::storage_health::{self, Recovery, RETRY_FIRST, RETRY_MAX};
        let mut wait = RETRY_FIRST;
        let mut how = Recovery::AsItWas;
        let flushed = *self.flushed.borrow();
        let mut dropped = 0;
        loop {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_MAX);
            // Everything committed before this try is on the handle a
            // reopen would drop; what comes after is on the new one.
            let before = self.committed.load(Ordering::SeqCst);
            let store = self.store.clone();
            let (reopened, outcome) =
                tokio::task::spawn_blocking(move || storage_health::try_storage(&store))
                    .await
                    .unwrap_or_else(|e| {
                        let e = StorageError::Config(format!("storage try did not run: {e}"));
                        (false, Err(e))
                    });
            if reopened {
                how = Recovery::Reopened;
                if before > flushed {
                    dropped = dropped.max(before - flushed);
                    self.lost
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(flushed + 1..=before);
                }
            }
            match outcome {
                Ok(()) => break,
                Err(e) => tracing::debug!(error = %e, "storage still refuses writes"),
            }
        }
        let Some(was) = self.health.cleared() else {
            return;
        };
        let now = crate::clock::now_ms();
        tracing::info!(?how, dropped, "storage recovered");
        let mut b = self.store.batch();
        for e in storage_health::events(&was, now, how, dropped) {
            b.append_event(e);
        }
        self.commit_logged(CommitSite::Event, b);
        if how == Recovery::Reopened {
            self.reopened.send_modify(|n| *n += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_storage::StoreConfig;

    /// Tickets are ordered; waiting for a later one covers the earlier ones,
    /// and a batch is readable as soon as it is committed (before the flush).
    #[test]
    fn a_ticket_is_durable_after_its_group_flush_and_covers_earlier_ones() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        actix_rt::System::new().block_on(async move {
            let gate = FlushGate::start(store.clone(), Default::default());
            let mut tickets = Vec::new();
            for i in 0..3 {
                let mut b = gate.store().batch();
                b.meta_put(&format!("k{i}"), b"v");
                tickets.push(gate.commit(CommitSite::Event, b).unwrap());
            }
            assert!(tickets[0] < tickets[1] && tickets[1] < tickets[2]);
            assert_eq!(store.meta_get("k2").unwrap().as_deref(), Some(&b"v"[..]));
            gate.durable(tickets[2]).await;
            // Already covered by the flush of the third: resolves at once.
            gate.durable(tickets[0]).await;
            assert!(*gate.flushed.borrow() >= tickets[2].0);
        });
    }

    /// A commit refused (here by the test fault) is not applied and hands out
    /// no ticket; the next one is applied again.
    #[test]
    fn a_refused_commit_applies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &StoreConfig::default()).unwrap();
        actix_rt::System::new().block_on(async move {
            let gate = FlushGate::start(store.clone(), Default::default());
            gate.refuse_commits(1);
            let mut b = gate.store().batch();
            b.meta_put("lost", b"v");
            assert!(gate.commit(CommitSite::Event, b).is_err());
            assert_eq!(store.meta_get("lost").unwrap(), None);
            let mut b = gate.store().batch();
            b.meta_put("kept", b"v");
            gate.commit_durable(CommitSite::Event, b).await.unwrap();
            assert!(store.meta_get("kept").unwrap().is_some());
        });
    }
}
