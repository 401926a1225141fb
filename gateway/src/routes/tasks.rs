//! Tasks: request resources (submit), status, list, logs, release, scale.
use super::Query;
use crate::api::tasks as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, Either};
use caldera_actors::control_plane::DryRun;
use caldera_spec::views::{LogChunk, Submitted, TaskPage, TaskView};
use caldera_spec::{Envelope, TaskSpec, TaskState, TaskType};
use utoipa::ToSchema;

/// `?tenant=`: the tenant a request acts for (the operator's; a tenant token's own).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TenantParam {
    /// The tenant the operator acts for; a tenant token may name only its own.
    pub tenant: Option<String>,
}

/// `GET /v1/tasks` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// `training` or `inference`.
    #[param(rename = "type")]
    pub task_type: Option<TaskType>,
    /// Tasks per page (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page, passed back as it came.
    pub cursor: Option<String>,
    /// The operator: only this tenant's tasks. A tenant token may name only its own.
    pub tenant: Option<String>,
}

/// `GET /v1/tasks/{id}/logs` options.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// Bytes from the end (1..=16 MiB, default 64 KiB).
    #[param(minimum = 1, maximum = 16777216)]
    pub tail_bytes: Option<u64>,
    /// Read from this offset (following a log: the last `end_byte`).
    #[param(minimum = 0)]
    pub from_byte: Option<u64>,
    /// The tenant the operator acts for.
    pub tenant: Option<String>,
}

/// `PUT /v1/tasks/{id}/replicas`.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only: `parse_replicas` reads the body
pub struct ReplicasBody {
    /// 1..=`MAX_REPLICAS`.
    #[schema(minimum = 1, maximum = 1000)]
    replicas: u32,
}

/// `POST /v1/tasks` options.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SubmitParams {
    /// The tenant the operator acts for; a tenant token may name only its own.
    pub tenant: Option<String>,
    /// `true`: validate, admit and place against the live pool without
    /// binding anything (no task, no allocation, no event), and answer where
    /// it would go now, or why not and its estimated start.
    pub dry_run: Option<bool>,
}

/// POST /v1/tasks — 201 when created, 200 when the identical spec exists, 409 on a different one.
#[utoipa::path(post, path = "/v1/tasks", tag = "tasks",
    description = "Requests resources: a training job, an inference service or a reservation. With `?dry_run=true` nothing is created: the answer says where it would go now, or why not and when it should start.",
    params(SubmitParams),
    request_body = TaskSpec,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the identical spec exists already; with ?dry_run=true, the dry run's answer", body = Envelope<Submitted>),
        (status = 201, description = "created; `data.warnings` lists what it succeeded despite (a deprecated model version)", body = Envelope<TaskView>),
        (status = 400, description = "the body is not a task spec (the field is named), or the operator gave no ?tenant="),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such tenant"),
        (status = 409, description = "the task_id is taken by a different spec"),
        (status = 422, description = "no node could ever hold it, a reserved id, a model version it may not use, a host process where the operator requires images (`image_required`, field `image` or `runtime`), or a data volume the operator does not offer the tenant (`volume_not_allowed`, field `volumes[i].name` or `volumes[i].read_write`)"),
    ))]
pub async fn submit(
    user: User,
    st: web::Data<AppState>,
    q: Query,
    payload: web::Payload,
) -> Result<Either<Reply<TaskView>, Reply<DryRun>>, ApiError> {
    let dry_run = dry_run_asked(&q)?;
    // Who it is for is settled before the body is read.
    let tenant = api::submitting_tenant(&user, tenant_of(&q))?;
    let body = body::read(payload, st.body_limit).await?;
    let spec = caldera_spec::parse_task_spec(&body)?;
    if dry_run {
        let answer = api::dry_run(&st, &user, Some(&tenant), spec).await?;
        return Ok(Either::Right(Reply::ok(answer)));
    }
    let (view, created) = api::submit(&st, &user, Some(&tenant), spec).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(Either::Left(Reply::with_status(status, view)))
}

/// `?dry_run=`: `true` or `false` (absent: false); anything else is named.
fn dry_run_asked(q: &Query) -> Result<bool, ApiError> {
    match q.get("dry_run").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_query(
            "dry_run",
            format!("dry_run is true or false, not {other:?}"),
        )),
    }
}

/// `?tenant=`: the tenant a request names, if any.
pub(super) fn tenant_of(q: &Query) -> Option<&str> {
    q.get("tenant").map(String::as_str)
}

/// The task `id` the request addresses, if the caller may see it.
pub(super) async fn find(
    user: &User,
    st: &AppState,
    q: &Query,
    id: &str,
) -> Result<api::VisibleTask, ApiError> {
    api::find(st, user, tenant_of(q), id).await
}

/// GET /v1/tasks/{id}?tenant=
#[utoipa::path(get, path = "/v1/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "the task's id (the tenant's own)"), TenantParam),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the task", body = Envelope<TaskView>),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "the operator gave no ?tenant= and several tenants use the id"),
    ))]
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<TaskView>, ApiError> {
    let task = find(&user, &st, &q, &id).await?;
    Ok(Reply::ok(api::view(&st, &task).await?))
}

/// GET /v1/tasks?state=&type=&tenant=&limit=&cursor= — a tenant's tasks
/// ordered by its own ids, `cursor` the last id seen; the operator's: every
/// tenant's (or `?tenant=`'s), ordered by key (`tenant/id`), `cursor` the
/// last key seen. With `state` a page reads only the tasks it returns (sled's
/// task index); with `type` alone a page examines a bounded number of tasks,
/// so it may hold fewer than `limit` with a `next_cursor` to go on from.
#[utoipa::path(get, path = "/v1/tasks", tag = "tasks",
    params(TaskFilter),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "a page of tasks", body = Envelope<TaskPage>),
        (status = 400, description = "a bad filter (the parameter is named)"),
        (status = 403, description = "a tenant token naming another tenant"),
    ))]
pub async fn list(
    user: User,
    st: web::Data<AppState>,
    q: Query,
) -> Result<Reply<TaskPage>, ApiError> {
    let query = api::TaskListQuery::from_query(&user, &q)?;
    Ok(Reply::ok(api::list(&st, &user, query).await?))
}

/// POST /v1/tasks/{id}/release?tenant= — stop, free, Released (queued: Cancelled).
#[utoipa::path(post, path = "/v1/tasks/{id}/release", tag = "tasks",
    params(("id" = String, Path, description = "the task's id"), TenantParam),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the task, released (or as it ended)", body = Envelope<TaskView>),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "the operator gave no ?tenant= and several tenants use the id"),
    ))]
pub async fn release(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<TaskView>, ApiError> {
    let task = find(&user, &st, &q, &id).await?;
    Ok(Reply::ok(api::release(&st, &user, task).await?))
}

/// GET /v1/tasks/{id}/logs?tail_bytes=N&tenant= — fetched from the node that ran it.
#[utoipa::path(get, path = "/v1/tasks/{id}/logs", tag = "tasks",
    params(("id" = String, Path, description = "the task's id"), LogQuery),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the log's tail", body = Envelope<LogChunk>),
        (status = 400, description = "a bad tail_bytes or from_byte"),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "the task has not run yet, or several tenants use the id"),
    ))]
pub async fn logs(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<LogChunk>, ApiError> {
    let task = find(&user, &st, &q, &id).await?;
    let range = api::LogRange::from_query(&task, &q)?;
    Ok(Reply::ok(api::logs(&st, &task, range).await?))
}

/// PUT /v1/tasks/{id}/replicas?tenant= {"replicas": N} — scale an inference service.
#[utoipa::path(put, path = "/v1/tasks/{id}/replicas", tag = "tasks",
    params(("id" = String, Path, description = "the service's id"), TenantParam),
    request_body = ReplicasBody,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the service, scaled", body = Envelope<TaskView>),
        (status = 400, description = "the body is not {\"replicas\": N} with N in range"),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "not a running service, or several tenants use the id"),
    ))]
pub async fn scale(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
    payload: web::Payload,
) -> Result<Reply<TaskView>, ApiError> {
    let task = find(&user, &st, &q, &id).await?;
    let body = body::read(payload, st.body_limit).await?;
    let n = caldera_actors::control_plane::parse_replicas(&body)?;
    Ok(Reply::ok(api::scale(&st, &task, n).await?))
}
