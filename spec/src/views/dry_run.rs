//! A dry run's answer (`POST /v1/tasks?dry_run=true`): where a task would
//! go now, or why not and when it should start. The scheduling crate
//! computes it; it is declared here because it is what the API answers.

/// What a dry run found: what `POST /v1/tasks?dry_run=true` answers.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DryRun {
    /// It would start now.
    pub placeable: bool,
    /// The node it would go to (placeable, or where it would preempt).
    pub node: Option<String>,
    /// The GPU indices on that node it would hold.
    pub gpu_indices: Vec<u32>,
    /// Why it would wait: the same sentence a waiting task is told ("why
    /// pending"); null when placeable.
    pub reason: Option<String>,
    /// When it would start (Unix ms): now when placeable, else the queue's
    /// estimate; `None` when nothing known ends in time for it.
    pub estimated_start_ms: Option<u64>,
    /// The tenant's standing if it were granted.
    pub admission: Admission,
    /// Running work it would stop to make room (its priority outranks
    /// them, or it reclaims its guarantee from borrowed room), on `node`:
    /// submitting it preempts these. Empty when it preempts nothing.
    pub preempts: Vec<WouldPreempt>,
}

/// One running task a submission would preempt.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WouldPreempt {
    /// The task as the asking tenant may see it: its own id, or
    /// "another tenant's task" (a tenant never learns another's ids).
    pub task: String,
    /// Whole GPUs it holds (a share counts as the GPU it is on).
    pub gpus: u32,
    /// Its priority (high, medium, low or the number).
    pub priority: String,
    /// Why it would be stopped, as it would be told.
    pub reason: String,
}

/// The tenant's standing if the task were granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// Within the tenant's guarantee.
    Guaranteed,
    /// Past the guarantee, within the borrowing limit: preemptible.
    Borrowing,
    /// Past guarantee + borrowing limit (a dimension or a GPU model's).
    OverQuota,
}
