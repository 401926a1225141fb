//! Usage curves from the persisted, downsampled history: a tenant's
//! (`GET /v1/tenants/{name}/usage`) and the pool's
//! (`GET /v1/utilization/history`, operator). `?from=&to=` default to the
//! last 24 h; the finest tier that still holds `from` answers, and
//! `resolution_ms` says which.
use super::cost_views::{PoolHistoryView, TenantUsageView};
use super::{period, Query};
use crate::api::{tenants, usage};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
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
    let tenant = tenants::find(&st, &user, &name).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    Ok(Reply::ok(
        usage::tenant_history(&st, &tenant, from, to).await?,
    ))
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
    op: Operator,
    st: web::Data<AppState>,
    q: Query,
) -> Result<Reply<PoolHistoryView>, ApiError> {
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    Ok(Reply::ok(usage::pool_history(&st, &op, from, to).await?))
}
