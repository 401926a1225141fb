//! Usage curves from the persisted, downsampled history: a tenant's
//! (`GET /v1/tenants/{name}/usage`) and the pool's
//! (`GET /v1/utilization/history`, operator). `?from=&to=` default to the
//! last 24 h; the finest tier that still holds `from` answers, and
//! `resolution_ms` says which.
use super::{period, Query};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_actors::control_plane::Curve;
use caldera_spec::time::rfc3339;
use serde_json::{json, Value};

const DAY_MS: u64 = 86_400_000;

fn frame<T: serde::Serialize>(c: &Curve<T>) -> Value {
    json!({"from": rfc3339(c.from_ms), "to": rfc3339(c.to_ms), "from_ms": c.from_ms, "to_ms": c.to_ms,
        "resolution_ms": c.resolution_ms})
}

/// GET /v1/tenants/{name}/usage — allocated vs measured use over time. The
/// shape of before (`current`, `samples[].{at, at_ms, allocated, used}`),
/// each sample now the mean over its bucket, with `max` and `samples` added.
pub async fn tenant(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
    q: Query,
) -> Result<Reply<Value>, ApiError> {
    super::tenants::visible_tenant(&user, &st, &name).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    let c = st.cp.usage_history(&name, from, to).await?;
    let points: Vec<Value> = c
        .points
        .iter()
        .map(|p| json!({"at": rfc3339(p.at_ms), "at_ms": p.at_ms, "allocated": p.mean.allocated, "used": p.mean.used,
            "max": {"allocated": p.max.allocated, "used": p.max.used}, "samples": p.samples}))
        .collect();
    let current = c
        .points
        .last()
        .map(|p| json!({"allocated": p.mean.allocated, "used": p.mean.used}));
    let mut v = frame(&c);
    v["tenant"] = json!(*name);
    v["current"] = json!(current);
    v["samples"] = json!(points);
    v["note"] = json!("used on simulated GPUs is the CPU use of the workload's process tree");
    Ok(Reply::ok(v))
}

/// GET /v1/utilization/history (operator) — the pool's capacity, allocated,
/// used, idle and borrowed per dimension over time.
pub async fn pool(
    _: Operator,
    st: web::Data<AppState>,
    q: Query,
) -> Result<Reply<Value>, ApiError> {
    let (from, to) = period::parse(&q, st.cp.now_ms(), |to| to.saturating_sub(DAY_MS))?;
    let c = st.cp.pool_history(from, to).await?;
    let points: Vec<Value> = c
        .points
        .iter()
        .map(|p| json!({"at": rfc3339(p.at_ms), "at_ms": p.at_ms, "mean": p.mean, "max": p.max, "samples": p.samples}))
        .collect();
    let mut v = frame(&c);
    v["points"] = json!(points);
    Ok(Reply::ok(v))
}
