//! A task as the API shows it (`GET /v1/tasks/{id}`, the listing, submit,
//! release, scale), and a page of its log.
use crate::time::rfc3339;
use crate::{Allocation, TaskRecord, TaskSpec};
use serde::{Deserialize, Serialize};

/// One step of a task's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransitionView {
    pub state: String,
    pub at: String,
    pub at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskView {
    pub task_id: String,
    pub tenant: String,
    pub task_type: String,
    pub priority: String,
    /// What runs it: `container` (the image) or `process` (on the host).
    pub runtime: String,
    /// The image it names, if any (with `runtime: process`, only recorded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub state: String,
    pub history: Vec<TransitionView>,
    pub allocation: Option<Allocation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The failure's number in the error code table, where it has one (a
    /// start that failed: 10220 `image_not_found`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<u32>,
    /// Its image's pull: layers and bytes done (while Preparing, and what
    /// the pull came to after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull: Option<crate::container::PullProgress>,
    pub attempts: u32,
    /// Retries spent by failures (lost nodes), out of `max_retries`;
    /// planned stops (drain, preemption, shutdown) never count.
    pub retries_used: u32,
    /// Its node was lost and it waits for the node's lease to run out
    /// (`on_node_loss: fence`) until this time (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced_until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// While queued: the expected start (RFC 3339), from declared durations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_start_ms: Option<u64>,
    /// While queued: its place in line (1 = considered first), as the
    /// scheduler orders the queue now. Filled by the listing and task views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<u32>,
    pub preemptions: u32,
    /// A replica: its service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// A service: the replicas it should run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// Where its running process is reached (the node's address and the
    /// port its agent gave it, CALDERA_PORT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<crate::Endpoint>,
    /// Its running process passed its readiness probe (or has none and
    /// started): it is listed in its service's endpoints.
    pub ready: bool,
    /// Generation of the process now running (0: the first start; a swap's after one).
    pub generation: u32,
    /// The `name:version` its running process serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serving_model: Option<String>,
    pub created_at: String,
    /// A service: its latest hot swap (under way, or how it ended), step
    /// by step per replica.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap: Option<crate::SwapProgress>,
    pub spec: TaskSpec,
    /// What the submission succeeded despite, e.g. a deprecated model
    /// version (only in the answer to `POST /v1/tasks`; absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An allocation as the API shows it: its `task_id` and `allocation_id` in
/// the tenant's own terms (`train.2`, not `alpha/train.2`); its `tenant` field
/// says whose. The workload sees the same id (`CALDERA_ALLOCATION_ID`).
pub fn allocation_view(a: &Allocation) -> Allocation {
    let mut a = a.clone();
    a.task_id = crate::local_id(&a.task_id).to_string();
    a.allocation_id = crate::local_id(&a.allocation_id).to_string();
    a
}

/// A view shows the tenant's own ids: the record is keyed `tenant/id`
/// (`crate::task_key`), and the tenant is its own field.
impl From<&TaskRecord> for TaskView {
    fn from(r: &TaskRecord) -> Self {
        let local = |k: &str| crate::local_id(k).to_string();
        let mut spec = r.spec.clone();
        spec.task_id = local(&spec.task_id);
        TaskView {
            task_id: local(&r.spec.task_id),
            tenant: r.tenant.clone(),
            task_type: r.spec.task_type.as_str().into(),
            priority: r.spec.priority.label(),
            runtime: r.spec.runtime_kind().as_str().into(),
            image: r.spec.image.clone(),
            state: r.state.as_str().into(),
            history: r
                .history
                .iter()
                .map(|t| TransitionView {
                    state: t.state.as_str().into(),
                    at: rfc3339(t.at_ms),
                    at_ms: t.at_ms,
                    reason: t.reason.clone(),
                })
                .collect(),
            allocation: r.allocation.as_ref().map(allocation_view),
            pending_reason: r.pending_reason.clone(),
            exit_code: r.exit_code,
            failure: r.failure.clone(),
            failure_code: r.failure_code,
            pull: r.pull.clone(),
            attempts: r.attempts,
            retries_used: r.node_losses,
            fenced_until: r.fenced_until_ms.map(rfc3339),
            checkpoint: r.checkpoint.clone(),
            estimated_start: r.estimated_start_ms.map(rfc3339),
            estimated_start_ms: r.estimated_start_ms,
            queue_position: None,
            preemptions: r.preemptions,
            service: r.service.as_deref().map(local),
            replicas: if r.spec.task_type == crate::TaskType::Inference && r.service.is_none() {
                Some(r.desired_replicas.or(r.spec.replicas).unwrap_or(1))
            } else {
                None
            },
            endpoint: r.endpoint.clone(),
            ready: r.ready,
            generation: r.generation,
            serving_model: r.serving_model.clone(),
            created_at: rfc3339(r.created_ms),
            swap: r.swap.clone(),
            spec,
            warnings: Vec::new(),
        }
    }
}

/// `GET /v1/tasks`: a page of tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TaskPage {
    pub tasks: Vec<TaskView>,
    /// Pass as `cursor` for the next page; null: no more.
    pub next_cursor: Option<String>,
}

/// `GET /v1/tasks/{id}/logs`: the tail of a task's log (a reservation: none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LogChunk {
    pub task_id: String,
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_id: Option<String>,
    pub content: String,
    pub truncated: bool,
    /// The offset after `content`: the next `from_byte` when following.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_byte: Option<u64>,
    /// Set (true) for a reservation, which runs no process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<bool>,
    /// What the content is when it is not simply the running process's
    /// log: a reservation's, or the earlier run's of a task waiting to run
    /// again ("preempted at …, restarting when placed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What `POST /v1/tasks` answers with 200: the existing task, or (with
/// `?dry_run=true`) the dry run's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum Submitted {
    Task(Box<TaskView>),
    DryRun(crate::views::DryRun),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GpuGrant, TaskState, Transition};

    fn seed_record() -> TaskRecord {
        let spec = crate::parse_task_spec(
            br#"{"task_id":"train_20240716_001","task_type":"training","priority":"high",
            "resources":{"gpu":{"count":4,"memory_gb":80,"model":"A100"},"cpu":{"cores":32},
            "memory":{"size_gb":256},"disk":{"size_gb":200}},"duration":"01:00:00",
            "image":"registry.internal/deeplearning/pytorch:2.1-cu12.1"}"#,
        )
        .expect("the seed's spec");
        let mut spec = spec;
        spec.task_id = crate::task_key("alpha", &spec.task_id);
        let mut r = TaskRecord::new(spec, "alpha".into(), 1_000, 1);
        r.state = TaskState::Running;
        r.history.push(Transition {
            state: TaskState::Running,
            at_ms: 2_000,
            reason: Some("started".into()),
        });
        r.allocation = Some(Allocation {
            allocation_id: "alpha/train_20240716_001.1".into(),
            task_id: "alpha/train_20240716_001".into(),
            tenant: "alpha".into(),
            node: "node-1".into(),
            gpus: vec![GpuGrant {
                index: 0,
                uuid: "GPU-0".into(),
                model: "A100-80GB".into(),
                memory_mb: 81_920,
                simulated: true,
            }],
            cpu_milli: 32_000,
            memory_mb: 262_144,
            disk_mb: 204_800,
            exclusive: false,
            epoch: 3,
            created_ms: 2_000,
            borrowed: false,
            priority: 900,
            image_digest: None,
        });
        r
    }

    #[test]
    fn a_view_shows_the_tenants_own_ids() {
        let v = TaskView::from(&seed_record());
        assert_eq!(v.task_id, "train_20240716_001");
        assert_eq!(v.spec.task_id, "train_20240716_001");
        let a = v.allocation.as_ref().expect("allocated");
        assert_eq!(
            (a.task_id.as_str(), a.allocation_id.as_str()),
            ("train_20240716_001", "train_20240716_001.1")
        );
        assert_eq!(
            (v.state.as_str(), v.task_type.as_str()),
            ("running", "training")
        );
    }

    #[test]
    fn a_task_view_reads_back_as_the_server_wrote_it() {
        let mut v = TaskView::from(&seed_record());
        v.queue_position = Some(3);
        v.warnings = vec!["model llama:v1 is deprecated".into()];
        let wire = serde_json::to_value(&v).expect("serializes");
        let back: TaskView = serde_json::from_value(wire.clone()).expect("reads back");
        assert_eq!(back, v);
        // What the server leaves out reads as absent, not as an error.
        assert!(wire.get("exit_code").is_none());
        assert_eq!(back.exit_code, None);
    }

    #[test]
    fn a_reader_passes_over_fields_it_does_not_know() {
        let mut wire = serde_json::to_value(TaskView::from(&seed_record())).expect("serializes");
        wire["added_by_a_newer_server"] = serde_json::json!({"x": 1});
        let back: TaskView = serde_json::from_value(wire).expect("reads past it");
        assert_eq!(back.task_id, "train_20240716_001");
    }

    #[test]
    fn a_page_and_a_log_chunk_read_back_as_written() {
        let page = TaskPage {
            tasks: vec![TaskView::from(&seed_record())],
            next_cursor: Some("train_20240716_001".into()),
        };
        let wire = serde_json::to_value(&page).expect("serializes");
        assert_eq!(serde_json::from_value::<TaskPage>(wire).ok(), Some(page));
        let chunk = LogChunk {
            task_id: "t".into(),
            node: "node-1".into(),
            allocation_id: None,
            content: "step 1\n".into(),
            truncated: false,
            end_byte: Some(7),
            reservation: None,
            note: None,
        };
        let wire = serde_json::to_value(&chunk).expect("serializes");
        assert_eq!(
            wire,
            serde_json::json!({"task_id": "t", "node": "node-1", "content": "step 1\n",
                "truncated": false, "end_byte": 7})
        );
        assert_eq!(serde_json::from_value::<LogChunk>(wire).ok(), Some(chunk));
    }

    #[test]
    fn a_submit_answer_reads_as_the_task_or_as_the_dry_run() {
        let task = TaskView::from(&seed_record());
        let wire = serde_json::to_value(&task).expect("serializes");
        assert_eq!(
            serde_json::from_value::<Submitted>(wire).ok(),
            Some(Submitted::Task(Box::new(task)))
        );
        let dry = serde_json::json!({"placeable": false, "node": null, "gpu_indices": [],
            "reason": "waits", "estimated_start_ms": null, "admission": "borrowing",
            "preempts": []});
        assert!(matches!(
            serde_json::from_value::<Submitted>(dry),
            Ok(Submitted::DryRun(_))
        ));
    }
}
