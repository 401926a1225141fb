//! Usage curves from the persisted, downsampled history: a tenant's
//! (`GET /v1/tenants/{name}/usage`) and the pool's
//! (`GET /v1/utilization/history`, operator). `?from=&to=` default to the
//! last 24 h; the finest tier that still holds `from` answers, and
//! `resolution_ms` says which.
use super::cost_views::{PoolHistoryView, PoolPoint, TenantUsagePoint, TenantUsageView, UsagePair};
use super::{period, Query};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_spec::time::rfc3339;
use caldera_spec::Envelope;

const DAY_MS: u64 = 86_400_000;

/// `?from=&to=` of the curves.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Range {
    /// Unix ms or RFC 3339 (default: 24 h before `to`).
    pub from: Option<String>,
    /// Unix ms or RFC 3339, exclusive (default: now).
    pub to: Option<String>,
}

/// GET /v1/tenants/{name}/usage — allocated vs measured use over time. The
/// shape of before (`current`, `samples[].{at, at_ms, allocated, used}`),
/// each sample now the mean over its bucket, with `max` and `samples` added.
#[utoipa::path(get, path = "/v1/tenants/{name}/usage", tag = "tenants", operation_id = "tenant_usage",
    description = "A tenant's allocated vs measured use over time, from the persisted, downsampled history (the finest tier that holds `from` answers).",
    params(("name" = String, Path, description = "the tenant"), Range),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the curve", body = Envelope<TenantUsageView>),
        (status = 400, description = "a bad from or to (named)"),
        (status = 404, description = "no such tenant (or another tenant's)"),
    ))]
pub async fn tenant(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
    q: Query,
) -> Result<Reply<TenantUsageView>, ApiError> {
    super::tenants::visible_tenant(&user, &st, &name).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    let c = st.cp.usage_history(&name, from, to).await?;
    let samples: Vec<TenantUsagePoint> = c
        .points
        .iter()
        .map(|p| TenantUsagePoint {
            at: rfc3339(p.at_ms),
            at_ms: p.at_ms,
            allocated: p.mean.allocated,
            used: p.mean.used,
            max: UsagePair {
                allocated: p.max.allocated,
                used: p.max.used,
            },
            samples: p.samples,
        })
        .collect();
    let current = c.points.last().map(|p| UsagePair {
        allocated: p.mean.allocated,
        used: p.mean.used,
    });
    Ok(Reply::ok(TenantUsageView {
        tenant: name.into_inner(),
        from: rfc3339(c.from_ms),
        to: rfc3339(c.to_ms),
        from_ms: c.from_ms,
        to_ms: c.to_ms,
        resolution_ms: c.resolution_ms,
        current,
        samples,
        note: "used on simulated GPUs is the CPU use of the workload's process tree".into(),
    }))
}

/// GET /v1/utilization/history (operator) — the pool's capacity, allocated,
/// used, idle and borrowed per dimension over time.
#[utoipa::path(get, path = "/v1/utilization/history", tag = "nodes", operation_id = "utilization_history",
    description = "The pool's capacity, allocated, used, idle and borrowed per dimension over time, from the persisted, downsampled history.",
    params(Range),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the curve", body = Envelope<PoolHistoryView>),
        (status = 400, description = "a bad from or to (named)"),
    ))]
pub async fn pool(
    _: Operator,
    st: web::Data<AppState>,
    q: Query,
) -> Result<Reply<PoolHistoryView>, ApiError> {
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    let c = st.cp.pool_history(from, to).await?;
    let points = c
        .points
        .iter()
        .map(|p| PoolPoint {
            at: rfc3339(p.at_ms),
            at_ms: p.at_ms,
            mean: p.mean,
            max: p.max,
            samples: p.samples,
        })
        .collect();
    Ok(Reply::ok(PoolHistoryView {
        from: rfc3339(c.from_ms),
        to: rfc3339(c.to_ms),
        from_ms: c.from_ms,
        to_ms: c.to_ms,
        resolution_ms: c.resolution_ms,
        points,
    }))
}
