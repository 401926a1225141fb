//! `GET /v1/tasks/{service}/endpoints`: where a service's ready replicas are
//! reached (`api::endpoints`), long-polling with `?wait=S&since=R`.
use super::tasks::find;
use super::{query_offset, Query};
use crate::api::endpoints::{self as api, MAX_WAIT_S};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
pub use caldera_spec::views::{EndpointView, ServiceEndpoints};
use caldera_spec::Envelope;
use std::time::Duration;

/// `?wait=`: seconds from 0 to [`MAX_WAIT_S`] (absent: 0), named when bad.
fn wait_param(q: &Query) -> Result<Duration, ApiError> {
    match q.get("wait") {
        None => Ok(Duration::ZERO),
        Some(v) => match v.parse::<u64>() {
            Ok(s) if s <= MAX_WAIT_S => Ok(Duration::from_secs(s)),
            _ => Err(ApiError::bad_query(
                "wait",
                format!("wait must be a number of seconds from 0 to {MAX_WAIT_S}, not {v:?}"),
            )),
        },
    }
}

/// GET /v1/tasks/{id}/endpoints?wait=&since=&tenant=
#[utoipa::path(get, path = "/v1/tasks/{id}/endpoints", tag = "tasks",
    params(
        ("id" = String, Path, description = "the service's id (the tenant's own)"),
        ("wait" = Option<u64>, Query, description = "seconds (0..=60) to wait for the revision to differ from `since`; at the timeout the current list is answered"),
        ("since" = Option<u64>, Query, description = "the revision the caller has"),
        super::tasks::TenantParam,
    ),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the service's ready replicas", body = Envelope<ServiceEndpoints>),
        (status = 400, description = "wait is not 0..=60 seconds, or since is not a number (the parameter is named)"),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "the operator gave no ?tenant= and several tenants use the id"),
        (status = 422, description = "the task is not an inference service"),
    ))]
pub async fn endpoints(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<ServiceEndpoints>, ApiError> {
    let wait = wait_param(&q)?;
    let since = query_offset(&q, "since")?;
    let task = find(&user, &st, &q, &id).await?;
    Ok(Reply::ok(api::endpoints(&st, &task, wait, since).await?))
}
