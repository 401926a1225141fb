//! The Scheduler's side of the billing records (`b/`): each is opened in
//! the batch that records its grant, re-marked in the batch that re-marks
//! its allocation borrowed or guaranteed, and closed in the batch that
//! frees it, so the billing history and the ledger never disagree about
//! what was held when.
use super::Scheduler;
use caldera_scheduling::queue::core::Core;
use caldera_spec::{Allocation, BillingRecord, BorrowMark, TaskRecord};
use caldera_storage::{Store, WriteBatch};

/// The open record of `a`, granted to `task`: what it holds, each GPU with
/// its total memory as the node reported it.
fn open_record(core: &Core, a: &Allocation, task: &TaskRecord) -> BillingRecord {
    let inv = core.inventory(&a.node);
    BillingRecord::open(a, task.spec.model.clone(), task.service.clone(), |index| {
        inv.and_then(|inv| inv.gpus.iter().find(|g| g.index == index))
            .map(|g| g.memory_total_mb)
    })
}

/// At boot: stages an open record for a kept allocation that has none (it
/// was granted by a build without billing).
pub(super) fn stage_missing_open(
    store: &Store,
    b: &mut WriteBatch,
    core: &Core,
    a: &Allocation,
    task: &TaskRecord,
) {
    if matches!(store.open_billing(&a.allocation_id), Ok(None)) {
        b.put_open_billing(&open_record(core, a, task));
    }
}

impl Scheduler {
    /// The open record of a grant about to be recorded.
    pub(super) fn open_billing(&self, a: &Allocation, task: &TaskRecord) -> BillingRecord {
        open_record(&self.core, a, task)
    }

    /// Stages the close of `a`'s record at `now` with `why`, carrying the
    /// idle time measured since the last persisted sample.
    pub(super) fn stage_billing_close(
        &self,
        b: &mut WriteBatch,
        a: &Allocation,
        now: u64,
        why: &str,
    ) {
        let idle = self.idle.billing.idle_ms(&a.allocation_id);
        stage_close(self.gate.store(), b, a, now, why, idle);
    }

    /// Stages a borrowed mark of `a` (re-marked by a quota change) at `now`.
    pub(super) fn stage_billing_mark(&self, b: &mut WriteBatch, a: &Allocation, now: u64) {
        // A record missing (an allocation older than billing) starts with the other mark.
        let mut r = billing_of(self.gate.store(), a, !a.borrowed);
        r.marks.push(BorrowMark {
            at_ms: now,
            borrowed: a.borrowed,
        });
        b.put_open_billing(&r);
    }
}

/// Stages the close of `a`'s record at `now`: freed because `why`, measured
/// idle for at least `idle_ms`.
pub(super) fn stage_close(
    store: &Store,
    b: &mut WriteBatch,
    a: &Allocation,
    now: u64,
    why: &str,
    idle_ms: u64,
) {
    let mut r = billing_of(store, a, a.borrowed);
    r.end_ms = Some(now.max(r.start_ms));
    r.end_reason = Some(why.trim_start_matches([':', ' ']).to_string());
    r.idle_ms = r.idle_ms.max(idle_ms);
    b.close_billing(&r);
}

/// `a`'s open record; one made from the allocation when it has none (it was
/// granted by a build without billing), marked `borrowed` at its start.
fn billing_of(store: &Store, a: &Allocation, borrowed: bool) -> BillingRecord {
    match store.open_billing(&a.allocation_id) {
        Ok(Some(r)) => r,
        other => {
            if let Err(e) = other {
                tracing::warn!(allocation = %a.allocation_id, error = %e, "billing record unreadable; billing from the allocation");
            }
            let mut r = BillingRecord::open(a, None, None, |_| None);
            r.borrowed = borrowed;
            r
        }
    }
}
