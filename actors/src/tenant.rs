//! TenantActor: one per tenant; owns its quota record.
use crate::clock::now_ms;
use crate::errors::Result;
use crate::scheduler::SetQuota;
use crate::shared::Shared;
use actix::prelude::*;
use caldera_scheduling::queue::core::TenantLimits;
use caldera_spec::{Event, EventKind, Quota, TenantRecord};
use std::sync::Arc;

pub struct TenantActor {
    rec: TenantRecord,
    sh: Arc<Shared>,
}

impl TenantActor {
    pub fn new(rec: TenantRecord, sh: Arc<Shared>) -> Self {
        TenantActor { rec, sh }
    }
}

impl Actor for TenantActor {
    type Context = Context<Self>;
}

/// The tenant record (token hash included; views strip it).
#[derive(Message)]
#[rtype(result = "TenantRecord")]
pub struct TenantSnapshot;

impl Handler<TenantSnapshot> for TenantActor {
    type Result = MessageResult<TenantSnapshot>;
    fn handle(&mut self, _: TenantSnapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.rec.clone())
    }
}

/// An operator changes the quota. Running work is never killed by a lower
/// quota: it keeps running; new work waits until usage is back under it.
#[derive(Message)]
#[rtype(result = "Result<TenantRecord>")]
pub struct ChangeQuota {
    /// New guarantee; `None` keeps the current one.
    pub quota: Option<Quota>,
    /// New borrowing limit; `None` keeps the current one.
    pub borrowing_limit: Option<Quota>,
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
        if let Some(q) = m.quota {
            self.rec.quota = q;
        }
        if let Some(b) = m.borrowing_limit {
            self.rec.borrowing_limit = b;
        }
        let after = show(&self.rec);
        let mut b = self.sh.batch();
        b.put_tenant(&self.rec);
        b.append_event(
            Event::new(
                now_ms(),
                EventKind::QuotaChanged,
                format!(
                    "quota of {} changed from {before} to {after}",
                    self.rec.name
                ),
            )
            .tenant(&self.rec.name),
        );
        let rec = self.rec.clone();
        let sh = self.sh.clone();
        Box::pin(async move {
            sh.gate.commit_durable(b).await?;
            sh.scheduler.do_send(SetQuota {
                tenant: rec.name.clone(),
                limits: limits(&rec),
            });
            Ok(rec)
        })
    }
}
