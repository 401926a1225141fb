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

    /// The granted vs measured use of the allocation task `key`
    /// (`tenant/id`) holds now, oldest first, and whether its figures are
    /// GPUs (else CPU cores); empty when it holds none.
    pub async fn use_trail(&self, key: &str) -> Result<(bool, Vec<UsePoint>)> {
        let Some(a) = self.task(key).await?.and_then(|r| r.allocation) else {
            return Ok((false, Vec::new()));
        };
        let on_gpus = !a.gpus.is_empty();
        let allocation_id = a.allocation_id;
        let trail = self
            .sh
            .scheduler
            .send(QueryUseTrail { allocation_id })
            .await?;
        Ok((on_gpus, trail))
    }

    /// The seq of the newest event (0: none yet); an atomic read, no I/O.
    pub fn last_event_seq(&self) -> u64 {
        self.store().last_event_seq()
    }
}
