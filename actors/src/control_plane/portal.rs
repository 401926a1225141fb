//! Reads the portal's pages need beyond the API's own: the pool's queue,
//! idle and borrowed figures in one Scheduler turn (what `/metrics` shows),
//! one allocation's use trail (a task page's curve), and where the event
//! log ends (its overview shows the latest events).
use super::ControlPlane;
use crate::errors::Result;
use crate::protocol::scheduler::{QueryPoolMetrics, QueryUseTrail};
use crate::views::{PoolMetrics, UsePoint};

impl ControlPlane {
    /// The pool's utilisation, queue depth by priority, and what borrowed
    /// and idle allocations hold per tenant, read together.
    pub async fn pool_metrics(&self) -> Result<PoolMetrics> {
        Ok(self.sh.scheduler.send(QueryPoolMetrics).await?)
    }

    /// The granted vs measured use of live allocation `allocation_id`
    /// (as the ledger keys it, `tenant/id`), oldest first; empty once freed.
    pub async fn use_trail(&self, allocation_id: String) -> Result<Vec<UsePoint>> {
        Ok(self
            .sh
            .scheduler
            .send(QueryUseTrail { allocation_id })
            .await?)
    }

    /// The seq of the newest event (0: none yet); an atomic read, no I/O.
    pub fn last_event_seq(&self) -> u64 {
        self.store().last_event_seq()
    }
}
