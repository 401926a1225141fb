//! TenantActor: one per tenant; owns its quota record.
use crate::commit_site::CommitSite;
use crate::errors::{ActorError, Result};
use crate::protocol::lifecycle::Observe;
use crate::protocol::scheduler::SetQuota;
use crate::protocol::tenant::{ChangeQuota, TenantSnapshot};
use crate::protocol::TenantHandle;
use crate::shared::Shared;
use crate::supervision::{reread, Reread, Supervision};
use actix::prelude::*;
use caldera_scheduling::queue::core::TenantLimits;
use caldera_spec::{Event, EventKind, TenantRecord};
use std::sync::Arc;

pub struct TenantActor {
    rec: TenantRecord,
    sh: Arc<Shared>,
    sup: Supervision<TenantActor>,
}

impl TenantActor {
    pub fn new(rec: TenantRecord, sh: Arc<Shared>) -> Self {
        TenantActor {
            rec,
            sh,
            sup: Supervision::default(),
        }
    }

    /// Starts a tenant actor under supervision and returns its handle.
    pub fn spawn(rec: TenantRecord, sh: Arc<Shared>) -> TenantHandle {
        TenantHandle::new(actix::Supervisor::start(move |_| TenantActor::new(rec, sh)))
    }
}

impl Actor for TenantActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.sup.started(ctx);
    }
}

impl actix::Supervised for TenantActor {
    /// The quota record is read back from sled: a change whose commit failed
    /// is gone from memory too.
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.sup.restarted("tenant");
        let read = self.sh.gate.store().tenant(&self.rec.name);
        if let Reread::Found(r) = reread("tenant", &self.rec.name, read) {
            self.rec = r;
        }
    }
}

crate::supervision::rebuild_on_request!(TenantActor);

impl Handler<Observe> for TenantActor {
    type Result = MessageResult<Observe>;
    fn handle(&mut self, _: Observe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.sup.observe("tenant", &self.rec.name, "active"))
    }
}

impl Handler<TenantSnapshot> for TenantActor {
    type Result = MessageResult<TenantSnapshot>;
    fn handle(&mut self, _: TenantSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

/// The scheduler's view of a tenant's limits.
pub fn limits(rec: &TenantRecord) -> TenantLimits {
    TenantLimits {
        guaranteed: rec.quota.clone(),
        borrowing_limit: rec.borrowing_limit.clone(),
    }
}

impl Handler<ChangeQuota> for TenantActor {
    type Result = ResponseFuture<Result<TenantRecord>>;
    fn handle(&mut self, m: ChangeQuota, _: &mut Context<Self>) -> Self::Result {
        let show = |r: &TenantRecord| {
            format!(
                "guarantee {} borrowing limit {}",
                serde_json::to_string(&r.quota).unwrap_or_default(),
                serde_json::to_string(&r.borrowing_limit).unwrap_or_default()
            )
        };
        let before = show(&self.rec);
        // Planned on a copy: memory changes only once sled has it.
        let mut planned = self.rec.clone();
        if let Some(q) = m.quota {
            planned.quota = q;
        }
        if let Some(b) = m.borrowing_limit {
            planned.borrowing_limit = b;
        }
        let after = show(&planned);
        let mut b = self.sh.batch();
        b.put_tenant(&planned);
        b.append_event(
            Event::new(
                self.sh.now_ms(),
                EventKind::QuotaChanged,
                format!(
                    "quota of {} changed from {before} to {after}",
                    self.rec.name
                ),
            )
            .tenant(&self.rec.name),
        );
        let ticket = match self.sh.gate.commit(CommitSite::QuotaChange, b) {
            Ok(t) => t,
            Err(e) => {
                // Memory still holds the old quota, as sled does; the actor
                // is rebuilt from sled all the same (the rule for a failed commit).
                self.sup.fail(format!(
                    "tenant {}: quota change not recorded: {e}",
                    self.rec.name
                ));
                let refused = ActorError::not_recorded("the quota change", e);
                return Box::pin(async move { Err(refused) });
            }
        };
        self.rec = planned;
        let rec = self.rec.clone();
        let sh = self.sh.clone();
        Box::pin(async move {
            sh.gate.durable(ticket).await;
            sh.scheduler.do_send(SetQuota {
                tenant: rec.name.clone(),
                limits: limits(&rec),
            });
            Ok(rec)
        })
    }
}
