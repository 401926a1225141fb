//! A service's endpoints: where its ready replicas are reached, for a load
//! balancer or client to route to, and the list's revision. A caller may
//! wait (up to [`MAX_WAIT_S`]) until the revision differs from the one it
//! has, so a router hears of a change at once.
//!
//! The revision changes whenever the list changes, and only grows: a change
//! is numbered `max(previous + 1, now in unix ms)`, and the first list a
//! server computes for a service after it starts is numbered with its time,
//! so a revision after a control-plane restart is larger than any before it
//! (a restart counts as a change, even if the list is the same).
use super::tasks::VisibleTask;
use crate::error::ApiError;
use crate::state::AppState;
use caldera_spec::views::{EndpointView, ServiceEndpoints};
use caldera_spec::{codes, TaskRecord, TaskState, TaskType};
use std::time::{Duration, Instant};

/// The longest wait accepted, seconds.
pub const MAX_WAIT_S: u64 = 60;
/// How often a waiting request looks at the replicas again.
const WAIT_POLL: Duration = Duration::from_millis(200);

/// Only ready, running replicas with a port are listed, by replica id.
fn ready_endpoints(replicas: &[TaskRecord]) -> Vec<EndpointView> {
    let local = |k: &str| caldera_spec::local_id(k).to_string();
    let mut list: Vec<EndpointView> = replicas
        .iter()
        .filter(|r| r.state == TaskState::Running && r.ready)
        .filter_map(|r| {
            let (a, e) = (r.allocation.as_ref()?, r.endpoint.as_ref()?);
            Some(EndpointView {
                replica: local(&r.spec.task_id),
                node: a.node.clone(),
                address: e.address.clone(),
                port: e.port,
                model: r.serving_model.clone(),
                allocation_id: local(&a.allocation_id),
                gpu_indices: a.gpus.iter().map(|g| g.index).collect(),
            })
        })
        .collect();
    list.sort_by(|a, b| a.replica.cmp(&b.replica));
    list
}

/// The service's ready replicas and the list's revision: at once when
/// `since` is not the current revision, else when it changes or `wait` has
/// passed (then the current list). A task that is not an inference service
/// has none (422 `not_a_service`).
pub async fn endpoints(
    st: &AppState,
    service: &VisibleTask,
    wait: Duration,
    since: Option<u64>,
) -> Result<ServiceEndpoints, ApiError> {
    let rec = &service.record;
    if rec.spec.task_type != TaskType::Inference || rec.service.is_some() {
        return Err(ApiError::new(
            &codes::NOT_A_SERVICE,
            format!(
                "task {:?} is not an inference service, so it has no endpoints",
                service.id
            ),
        ));
    }
    let deadline = Instant::now() + wait;
    loop {
        let replicas = st.cp.service_replicas(&service.key).await?;
        let endpoints = ready_endpoints(&replicas);
        let revision = st.endpoint_revisions.observe(&service.key, &endpoints);
        if since != Some(revision) || Instant::now() >= deadline {
            return Ok(ServiceEndpoints {
                service: service.id.clone(),
                revision,
                endpoints,
            });
        }
        tokio::time::sleep(WAIT_POLL.min(deadline - Instant::now())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::endpoint_revisions::EndpointRevisions;

    fn view(replica: &str, port: u16) -> EndpointView {
        EndpointView {
            replica: replica.into(),
            node: "n1".into(),
            address: "127.0.0.1".into(),
            port,
            model: None,
            allocation_id: format!("{replica}.1"),
            gpu_indices: vec![],
        }
    }

    #[test]
    fn the_revision_changes_with_the_list_only_and_only_grows() {
        let revs = EndpointRevisions::default();
        let first = revs.observe("t/s", &[]);
        assert_eq!(
            revs.observe("t/s", &[]),
            first,
            "unchanged list, same revision"
        );
        let one = revs.observe("t/s", &[view("s.r0", 20000)]);
        assert!(one > first);
        let other_port = revs.observe("t/s", &[view("s.r0", 20001)]);
        assert!(other_port > one);
        let empty = revs.observe("t/s", &[]);
        assert!(empty > other_port, "a removal is a change too");
        assert_eq!(revs.observe("t/s", &[]), empty);
    }
}
