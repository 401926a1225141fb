//! The version view the API shows (`GET /v1/models/...`).
pub use caldera_spec::views::{CopyView, VersionView};
use caldera_spec::ModelVersionRecord;

/// `rec` as `tenant` sees it (`None`: the operator).
pub fn version_view(rec: &ModelVersionRecord, reads: u32, tenant: Option<&str>) -> VersionView {
    let tasks = rec
        .tasks
        .iter()
        .filter_map(|k| match tenant {
            None => Some(k.clone()),
            Some(t) => (caldera_spec::tenant_of(k) == Some(t))
                .then(|| caldera_spec::local_id(k).to_string()),
        })
        .collect();
    VersionView {
        name: rec.spec.name.clone(),
        version: rec.spec.version.clone(),
        state: rec.state.as_str().into(),
        weights: rec.spec.weights.clone(),
        image: rec.spec.image.clone(),
        pinned: rec.pinned,
        registered_at_ms: rec.registered_at_ms,
        owner: rec.owner.clone(),
        nodes: rec
            .nodes
            .iter()
            .map(|(n, c)| CopyView {
                node: n.clone(),
                copy: c.copy.as_str().into(),
                bytes_done: c.bytes_done,
                source: c.source.clone(),
                failures: c.failures,
                reason: c.reason.clone(),
                retry_at_ms: c.retry_at_ms,
            })
            .collect(),
        tasks,
        origin_pulls_now: reads,
        retire: rec.retire.clone(),
        used_by: None,
    }
}

/// Whether `tenant` may see `rec` (`None`: the operator sees all).
pub fn visible_to(rec: &ModelVersionRecord, tenant: Option<&str>) -> bool {
    match (tenant, &rec.owner) {
        (None, _) | (_, None) => true,
        (Some(t), Some(o)) => t == o,
    }
}

/// The tasks of `users` that `tenant` may see (`None`: the operator),
/// by tenant, each by its own id.
pub fn users_by_tenant(
    users: &[caldera_spec::TaskRecord],
    tenant: Option<&str>,
) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut by: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for u in users {
        if tenant.is_some_and(|t| t != u.tenant) {
            continue;
        }
        let id = caldera_spec::local_id(&u.spec.task_id).to_string();
        by.entry(u.tenant.clone()).or_default().push(id);
    }
    by
}
