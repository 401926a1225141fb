//! The version view the API shows (`GET /v1/models/...`).
use caldera_spec::{ModelVersionRecord, WeightsSpec};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionView {
    pub name: String,
    pub version: String,
    pub state: &'static str,
    pub weights: WeightsSpec,
    /// The image a swap onto it runs (absent: each service's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub pinned: bool,
    pub registered_at_ms: u64,
    /// The tenant that registered it; absent: the operator (visible to all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub nodes: Vec<CopyView>,
    /// Tasks that have used it: the caller's own ids (the operator sees
    /// `tenant/id`).
    pub tasks: Vec<String>,
    pub origin_pulls_now: u32,
    /// The retire order, once one was given (who asked, when, replace_with).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retire: Option<caldera_spec::RetireOrder>,
    /// While retiring (`GET .../versions/{version}` only): the tasks that
    /// still use it, by tenant — every tenant's for the operator, a tenant's
    /// own otherwise. The version becomes `retired` once this is empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_by: Option<std::collections::BTreeMap<String, Vec<String>>>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CopyView {
    pub node: String,
    /// `verified`, `warming`, `waiting`, `evicted`, `retrying` (a read
    /// failed; the next waits out its backoff) or `failed` (reads kept
    /// failing; no more until a new task or a prewarm asks).
    pub copy: &'static str,
    pub bytes_done: u64,
    pub source: String,
    /// Failed reads in a row (absent: none).
    #[serde(skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// Why the last read failed: its source and the node's words.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// While `retrying`: when the next read is due (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

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
        state: rec.state.as_str(),
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
                copy: c.copy.as_str(),
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
