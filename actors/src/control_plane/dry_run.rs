//! `POST /v1/tasks?dry_run=true`: where a task would go now, or why not.
//! The request passes the same checks a submission does (same errors,
//! naming the field), then the Scheduler — the one writer of the ledger —
//! answers from its own pool and queue between passes, binding nothing: no
//! task record, no allocation, no event.
use super::ControlPlane;
use crate::errors::{ActorError, Result};
use crate::protocol::scheduler::DryRunPlacement;
pub use caldera_scheduling::queue::dry_run::DryRun;
use caldera_spec::TaskSpec;

impl ControlPlane {
    /// Where `spec` of `tenant` would go if it were submitted now.
    pub async fn dry_run(&self, tenant: String, spec: TaskSpec) -> Result<DryRun> {
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
        Ok(self.sh.scheduler.send(m).await?)
    }
}
