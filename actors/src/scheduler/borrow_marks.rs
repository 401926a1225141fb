//! Borrowed marks kept true: the Scheduler derives a tenant's marks again
//! (`Core::remark_borrowed`) whenever what the tenant may hold changes (a
//! quota is saved) or what it holds changes (a grant is recorded, an
//! allocation is freed: released, ended, preempted, moved). It records the
//! marks that changed, and only then tells their tasks; a rebuilt Scheduler
//! marks them again from sled.
use super::Scheduler;
use crate::commit_site::CommitSite;
use crate::protocol::scheduler::SetQuota;
use crate::protocol::task::Remarked;
use actix::prelude::*;
use caldera_spec::{Event, EventKind};

/// Why a tenant's marks are derived again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Remark {
    /// An operator saved its quota.
    QuotaSaved,
    /// An allocation of its was granted or freed.
    HoldingsChanged,
    /// The Scheduler was rebuilt from sled (a change whose marks were not
    /// recorded is marked now).
    Rebuilt,
}

impl Remark {
    /// What the task's event says the mark changed after.
    fn after(self) -> &'static str {
        match self {
            Remark::QuotaSaved => "a quota change",
            Remark::HoldingsChanged => "a change in its tenant's holdings",
            Remark::Rebuilt => "the scheduler was rebuilt",
        }
    }

    /// The tenant's event: what changed, and which allocations are marked how.
    fn message(self, tenant: &str, changed: usize, now_borrowed: &[String]) -> String {
        let what = match self {
            Remark::QuotaSaved => format!("quota of {tenant} changed"),
            Remark::HoldingsChanged => format!("holdings of {tenant} changed"),
            Remark::Rebuilt => format!("marks of {tenant} derived again at a scheduler rebuild"),
        };
        if now_borrowed.is_empty() {
            format!("{what}: {changed} allocation(s) back within the guarantee")
        } else {
            format!(
                "{what}: allocations {} keep running but are now borrowed (preemptible)",
                now_borrowed.join(", ")
            )
        }
    }
}

impl Handler<SetQuota> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: SetQuota, ctx: &mut Context<Self>) {
        self.core.set_limits(&m.tenant, m.limits);
        self.remark(&m.tenant, Remark::QuotaSaved);
        self.request_cycle(ctx);
    }
}

impl Scheduler {
    /// Marks `tenant`'s allocations borrowed or guaranteed under its current
    /// limits and holdings: recorded first (with each mark's billing), and
    /// only then are their tasks told. Grants offered and not yet recorded
    /// keep their marks until they are; a change in holdings only brings
    /// allocations back within the guarantee (a lower quota alone makes
    /// guaranteed ones borrowed). Not recorded: the next pass stops
    /// the Scheduler, whose rebuild marks them again from sled's limits.
    pub(super) fn remark(&mut self, tenant: &str, why: Remark) {
        let may_borrow = why != Remark::HoldingsChanged;
        let changed = self
            .core
            .remark_borrowed(tenant, &self.unrecorded, may_borrow);
        if changed.is_empty() {
            return;
        }
        let mut b = self.gate.store().batch();
        let mut now_borrowed = Vec::new();
        let now = self.clock.now_ms();
        for a in &changed {
            b.put_allocation(a);
            self.stage_billing_mark(&mut b, a, now);
            if a.borrowed {
                now_borrowed.push(a.allocation_id.clone());
            }
        }
        let msg = why.message(tenant, changed.len(), &now_borrowed);
        b.append_event(Event::new(now, EventKind::QuotaChanged, msg).tenant(tenant));
        if let Err(e) = self.gate.commit(CommitSite::BorrowMarks, b) {
            tracing::error!(error = %e, "could not record borrowed marks; restarting the scheduler");
            self.fatal = true;
            return;
        }
        for a in changed {
            if let Some(t) = self.registry.task(&a.task_id) {
                t.do_send(Remarked {
                    allocation: a,
                    after: why.after(),
                });
            }
        }
    }
}
