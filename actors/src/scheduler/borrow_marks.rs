//! Borrowed marks after a quota change: the Scheduler re-marks a tenant's
//! allocations under its new limits, records the marks, and only then tells
//! their tasks (a rebuilt Scheduler marks them again from sled's limits).
use super::Scheduler;
use crate::commit_site::CommitSite;
use crate::protocol::scheduler::SetQuota;
use crate::protocol::task::Remarked;
use actix::prelude::*;
use caldera_spec::{Event, EventKind};

impl Handler<SetQuota> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: SetQuota, ctx: &mut Context<Self>) {
        self.core.set_limits(&m.tenant, m.limits);
        self.remark(&m.tenant);
        self.request_cycle(ctx);
    }
}

impl Scheduler {
    /// Marks `tenant`'s allocations borrowed or guaranteed under its current
    /// limits: recorded first, and only then are their tasks told. Not
    /// recorded: the next pass stops the Scheduler, whose rebuild marks them
    /// again from sled's limits.
    pub(super) fn remark(&mut self, tenant: &str) {
        let changed = self.core.remark_borrowed(tenant);
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
        let msg = if now_borrowed.is_empty() {
            format!(
                "quota of {tenant} changed: {} allocation(s) back within the guarantee",
                changed.len()
            )
        } else {
            format!(
                "quota of {tenant} changed: allocations {} keep running but are now borrowed (preemptible)",
                now_borrowed.join(", ")
            )
        };
        b.append_event(Event::new(now, EventKind::QuotaChanged, msg).tenant(tenant));
        if let Err(e) = self.gate.commit(CommitSite::BorrowMarks, b) {
            tracing::error!(error = %e, "could not record borrowed marks; restarting the scheduler");
            self.fatal = true;
            return;
        }
        for a in changed {
            if let Some(t) = self.registry.task(&a.task_id) {
                t.do_send(Remarked { allocation: a });
            }
        }
    }
}
