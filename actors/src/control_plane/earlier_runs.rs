//! A task's earlier runs, for a task that holds no allocation now (it was
//! preempted or requeued and waits to run again): where it last ran, read
//! from the billing history (one record per allocation it held), so its
//! log can still be fetched from that node. The agent keeps one log file
//! per task, appended by every run, so the last node's file holds the
//! output of the runs there.
use super::{blocking, ControlPlane};
use crate::errors::Result;
use caldera_spec::{BillingRecord, TaskRecord};

/// Where and until when a task last held room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRun {
    pub node: String,
    pub allocation_id: String,
    /// When it was freed; `None` while still held.
    pub ended_ms: Option<u64>,
    /// Why it was freed ("preempted by …", "node n lost").
    pub end_reason: Option<String>,
}

/// The latest of `task_key`'s records among `records`.
pub fn last_run(records: &[BillingRecord], task_key: &str) -> Option<LastRun> {
    records
        .iter()
        .filter(|r| r.task_id == task_key)
        .max_by_key(|r| (r.start_ms, r.allocation_id.clone()))
        .map(|r| LastRun {
            node: r.node.clone(),
            allocation_id: r.allocation_id.clone(),
            ended_ms: r.end_ms,
            end_reason: r.end_reason.clone(),
        })
}

impl ControlPlane {
    /// Where `rec` last ran, if it ever did and its billing record is
    /// still kept (retention).
    pub async fn last_run(&self, rec: &TaskRecord) -> Result<Option<LastRun>> {
        if rec.attempts == 0 {
            return Ok(None);
        }
        let store = self.store();
        let (tenant, key) = (rec.tenant.clone(), rec.spec.task_id.clone());
        let (from, to) = (rec.created_ms, self.now_ms().saturating_add(1));
        let records = blocking(move || store.billing_between(&tenant, from, to)).await?;
        Ok(last_run(&records, &key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(task: &str, alloc: &str, node: &str, start: u64, end: Option<u64>) -> BillingRecord {
        BillingRecord {
            allocation_id: alloc.into(),
            task_id: task.into(),
            node: node.into(),
            start_ms: start,
            end_ms: end,
            end_reason: end.map(|_| "preempted".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_last_run_is_the_latest_allocation_of_that_task() {
        let records = [
            rec("t/a", "t/a.1", "n1", 10, Some(20)),
            rec("t/a", "t/a.2", "n2", 30, Some(40)),
            rec("t/b", "t/b.1", "n3", 50, None),
        ];
        let last = last_run(&records, "t/a").unwrap();
        assert_eq!(
            (last.node.as_str(), last.allocation_id.as_str()),
            ("n2", "t/a.2")
        );
        assert_eq!(last.ended_ms, Some(40));
        assert_eq!(last_run(&records, "t/c"), None);
    }
}
