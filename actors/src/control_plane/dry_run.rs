//! `POST /v1/tasks?dry_run=true`: where a task would go now, or why not.
//! The request passes the same checks a submission does (same errors,
//! naming the field), then the Scheduler — the one writer of the ledger —
//! answers from its own pool and queue between passes, binding nothing: no
//! task record, no allocation, no event.
use super::ControlPlane;
use crate::errors::{ActorError, Result};
use crate::protocol::scheduler::DryRunPlacement;
use caldera_scheduling::queue::dry_run::DryRun;
use caldera_spec::TaskSpec;
use serde::Serialize;

/// What a dry run answers.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DryRunView {
    /// It would start now.
    pub placeable: bool,
    /// The node it would go to (null unless placeable).
    pub node: Option<String>,
    /// The GPU indices on that node it would hold.
    pub gpu_indices: Vec<u32>,
    /// Why it would wait (the sentence "why pending" shows); null when placeable.
    pub reason: Option<String>,
    /// When it would start, Unix ms: now when placeable, else the queue's
    /// estimate; null when nothing known ends in time for it.
    pub estimated_start_ms: Option<u64>,
    /// The tenant's standing if it were granted: `guaranteed`, `borrowing`
    /// (preemptible) or `over_quota`.
    pub admission: &'static str,
}

impl From<DryRun> for DryRunView {
    fn from(d: DryRun) -> Self {
        DryRunView {
            placeable: d.placeable,
            node: d.node,
            gpu_indices: d.gpu_indices,
            reason: d.reason,
            estimated_start_ms: d.estimated_start_ms,
            admission: d.admission.as_str(),
        }
    }
}

impl ControlPlane {
    /// Where `spec` of `tenant` would go if it were submitted now.
    pub async fn dry_run(&self, tenant: String, spec: TaskSpec) -> Result<DryRunView> {
        let sh = self.sh.clone();
        let (tenant, mut spec) = match tokio::task::spawn_blocking(move || {
            // The model check reads sled: on the blocking pool.
            crate::cluster::check_request(&sh, &tenant, &spec).map(|()| (tenant, spec))
        })
        .await
        {
            Ok(checked) => checked?,
            Err(e) => return Err(ActorError::Unavailable(format!("storage read failed: {e}"))),
        };
        let own_id = caldera_spec::local_id(&spec.task_id).to_string();
        let task_id = caldera_spec::task_key(&tenant, &own_id);
        spec.task_id = task_id.clone();
        let m = DryRunPlacement {
            task_id,
            tenant,
            spec,
        };
        Ok(self.sh.scheduler.send(m).await?.into())
    }
}
