//! Tasks: request resources (submit), status, list, logs, release, scale.
use super::{query_num, query_offset, Query};
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, Either};
use caldera_actors::control_plane::{DryRun, TaskQuery};
use caldera_spec::views::{LogChunk, Submitted, TaskPage, TaskView};
use caldera_spec::{codes, Envelope, TaskRecord, TaskSpec, TaskState, TaskType};
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
    let Some(tenant) = tenant_asked(&user, &q, "submits only for its own tenant")? else {
        return Err(ApiError::bad_query(
            "tenant",
            "the operator submits on behalf of a tenant: add ?tenant=NAME",
        ));
    };
    let body = body::read(payload, st.body_limit).await?;
    let spec = caldera_spec::parse_task_spec(&body)?;
    if dry_run {
        return Ok(Either::Right(Reply::ok(st.cp.dry_run(tenant, spec).await?)));
    }
    let (rec, created) = st.cp.submit(tenant, spec).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut view = TaskView::from(&rec);
    view.warnings = st.cp.submission_warnings(&rec.spec).await?;
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

/// The tenant a request acts for: a tenant token's own (a `?tenant=` naming
/// another is refused: a tenant token `refused`), or the operator's
/// `?tenant=NAME`; `None` for the operator without one.
fn tenant_asked(user: &User, q: &Query, refused: &str) -> Result<Option<String>, ApiError> {
    match (user.tenant(), q.get("tenant")) {
        (Some(t), None) => Ok(Some(t.to_string())),
        (Some(t), Some(asked)) if asked == t => Ok(Some(t.to_string())),
        (Some(_), Some(_)) => Err(ApiError::forbidden(&format!("a tenant token {refused}"))),
        (None, asked) => Ok(asked.cloned()),
    }
}

/// The key (`tenant/id`, `caldera_spec::task_key`) of the task a request
/// addresses. Task ids are the tenant's own, so the address needs a tenant: a
/// tenant token's own (a `?tenant=` naming another is refused), or the
/// operator's `?tenant=NAME`. An operator without `?tenant=` reaches the id
/// when exactly one tenant holds it; when several do, a 409 asks for the
/// tenant (the operator sees every tenant, so naming them reveals nothing).
async fn address(user: &User, st: &AppState, q: &Query, id: &str) -> Result<String, ApiError> {
    match tenant_asked(user, q, "addresses only its own tenant's tasks")? {
        Some(tenant) => Ok(caldera_spec::task_key(&tenant, id)),
        None => {
            let mut keys = st.cp.task_keys_named(id).await?;
            match keys.len() {
                0 => Err(ApiError::not_found("task", id)),
                1 => Ok(keys.remove(0)),
                _ => {
                    let tenants: Vec<&str> = keys
                        .iter()
                        .filter_map(|k| caldera_spec::tenant_of(k))
                        .collect();
                    Err(ApiError::new(
                        &codes::CONFLICT,
                        format!(
                            "task id {id:?} is used by tenants {}: add ?tenant=NAME",
                            tenants.join(", ")
                        ),
                    ))
                }
            }
        }
    }
}

/// A task the caller may see and its key, or the 404 (another tenant's task
/// is "not found", and the message names only the id the caller gave).
pub(super) async fn visible(
    user: &User,
    st: &AppState,
    q: &Query,
    id: &str,
) -> Result<(String, TaskRecord), ApiError> {
    let key = address(user, st, q, id).await?;
    match st.cp.task(&key).await? {
        Some(r) if user.may_see(&r.tenant) => Ok((key, r)),
        _ => Err(ApiError::not_found("task", id)),
    }
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
    let (_, r) = visible(&user, &st, &q, &id).await?;
    let mut view = TaskView::from(&r);
    if r.state == TaskState::Queued {
        let line = st.cp.queue_positions(vec![r.spec.task_id.clone()]).await?;
        // Inside the control plane a task's id is its key (`tenant/id`).
        view.queue_position = line.get(&r.spec.task_id).copied();
    }
    Ok(Reply::ok(view))
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
    let state = match q.get("state") {
        None => None,
        Some(s) => Some(
            TaskState::parse(s)
                .ok_or_else(|| ApiError::bad_query("state", format!("unknown state {s:?}")))?,
        ),
    };
    let task_type = match q.get("type").map(|s| s.as_str()) {
        None => None,
        Some("training") => Some(TaskType::Training),
        Some("inference") => Some(TaskType::Inference),
        Some(other) => {
            return Err(ApiError::bad_query(
                "type",
                format!("type is training or inference, not {other:?}"),
            ))
        }
    };
    let query = TaskQuery {
        tenant: tenant_asked(&user, &q, "lists only its own tenant's tasks")?,
        state,
        task_type,
        cursor: q.get("cursor").cloned().unwrap_or_default(),
        limit: query_num(&q, "limit", 100, 1000)? as usize,
    };
    let page = st.cp.tasks(query).await?;
    // Places in line of this page's queued tasks only: one pass over the
    // queue, never a copy of it, however long it is.
    let queued: Vec<String> = page
        .tasks
        .iter()
        .filter(|t| t.state == TaskState::Queued)
        .map(|t| t.spec.task_id.clone())
        .collect();
    let line = st.cp.queue_positions(queued).await?;
    let tasks: Vec<TaskView> = page
        .tasks
        .iter()
        .map(|t| {
            let mut view = TaskView::from(t);
            view.queue_position = line.get(&t.spec.task_id).copied();
            view
        })
        .collect();
    Ok(Reply::ok(TaskPage {
        tasks,
        next_cursor: page.next_cursor,
    }))
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
    let (key, rec) = visible(&user, &st, &q, &id).await?;
    let by = match user.tenant() {
        Some(t) => format!("tenant {t}"),
        None => "operator".to_string(),
    };
    // No live actor: already terminal, and releasing again changes nothing.
    let rec = st.cp.release(&key, by).await?.unwrap_or(rec);
    Ok(Reply::ok(TaskView::from(&rec)))
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
    let (_, rec) = visible(&user, &st, &q, &id).await?;
    let tail = query_num(&q, "tail_bytes", 64 * 1024, 16 * 1024 * 1024)?;
    let Some(a) = rec.allocation.clone() else {
        return earlier_logs(
            &st,
            &rec,
            id.into_inner(),
            tail,
            query_offset(&q, "from_byte")?,
        )
        .await;
    };
    if rec.spec.is_reservation() {
        // A reservation holds room and runs nothing: say so, rather than
        // answering an empty log as if a process had been silent.
        return Ok(Reply::ok(LogChunk {
            task_id: id.into_inner(),
            node: a.node,
            allocation_id: None,
            content: String::new(),
            truncated: false,
            end_byte: None,
            reservation: Some(true),
            note: Some(
                "this task is a reservation: it runs no process, so it has no log".to_string(),
            ),
        }));
    }
    // From an offset: the next piece of a log being followed (`logs -f`).
    let from = query_offset(&q, "from_byte")?;
    let chunk = st.cp.logs(&a, tail, from).await?;
    Ok(Reply::ok(LogChunk {
        task_id: id.into_inner(),
        allocation_id: Some(caldera_spec::local_id(&a.allocation_id).to_string()),
        node: a.node,
        content: chunk.content,
        truncated: chunk.truncated,
        end_byte: chunk.end_byte,
        reservation: None,
        note: None,
    }))
}

/// The log of a task that holds no allocation now but ran before (it was
/// preempted or requeued and waits to run again, or ended after that): read
/// from the node it last ran on, with a note saying so. One that never ran
/// has no log (409 `no_logs_yet`).
async fn earlier_logs(
    st: &AppState,
    rec: &TaskRecord,
    task_id: String,
    tail: u64,
    from: Option<u64>,
) -> Result<Reply<LogChunk>, ApiError> {
    let not_yet = || {
        ApiError::new(
            &codes::NO_LOGS_YET,
            "the task has not run yet, so it has no logs",
        )
    };
    if rec.spec.is_reservation() {
        return Err(not_yet());
    }
    let Some(last) = st.cp.last_run(rec).await? else {
        return Err(not_yet());
    };
    let chunk = st
        .cp
        .logs_on(
            &last.node,
            &last.allocation_id,
            &rec.spec.task_id,
            tail,
            from,
        )
        .await?;
    // "preempted by <task key>" would name another tenant's task.
    let why = match last.end_reason.as_deref() {
        Some(r) if r.starts_with("preempted") => "preempted",
        Some(r) => r,
        None => "stopped",
    };
    let when = last
        .ended_ms
        .map(|t| format!(" at {}", caldera_spec::time::rfc3339(t)))
        .unwrap_or_default();
    let next = if rec.state == caldera_spec::TaskState::Queued {
        "; restarting when it is placed again"
    } else {
        ""
    };
    Ok(Reply::ok(LogChunk {
        task_id,
        allocation_id: Some(caldera_spec::local_id(&last.allocation_id).to_string()),
        node: last.node.clone(),
        content: chunk.content,
        truncated: chunk.truncated,
        end_byte: chunk.end_byte,
        reservation: None,
        note: Some(format!(
            "not running now: {why}{when}{next}. This is the log of its earlier run(s) on {}.",
            last.node
        )),
    }))
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
    let (key, _) = visible(&user, &st, &q, &id).await?;
    let body = body::read(payload, st.body_limit).await?;
    let n = caldera_actors::control_plane::parse_replicas(&body)?;
    let rec = st.cp.scale(&key, n).await?;
    Ok(Reply::ok(TaskView::from(&rec)))
}
