//! A service's replicas as the endpoints API lists them.
use super::ControlPlane;
use crate::errors::Result;
use crate::protocol::scheduler::LedgerAllocations;
use caldera_spec::{replica_index, TaskRecord};

impl ControlPlane {
    /// The records of the replicas of service `service` (its key) that hold
    /// an allocation now (the Scheduler's ledger, in memory): only those
    /// can be serving.
    pub async fn service_replicas(&self, service: &str) -> Result<Vec<TaskRecord>> {
        let ledger = self.sh.scheduler.send(LedgerAllocations).await?;
        let mut replicas = Vec::new();
        for a in ledger {
            if replica_index(service, &a.task_id).is_none() {
                continue;
            }
            if let Some(r) = self.task(&a.task_id).await? {
                replicas.push(r);
            }
        }
        Ok(replicas)
    }
}
