//! Tasks: request resources (submit), status, list, logs, release, scale.
use super::{query_num, query_offset, Query};
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::http::StatusCode;
use actix_web::web;
use caldera_actors::control_plane::TaskQuery;
use caldera_actors::views::TaskView;
use caldera_spec::{codes, TaskRecord, TaskState, TaskType};
use serde_json::{json, Value};

/// POST /v1/tasks — 201 when created, 200 when the identical spec exists, 409 on a different one.
pub async fn submit(
    user: User,
    st: web::Data<AppState>,
    q: Query,
    payload: web::Payload,
) -> Result<Reply<TaskView>, ApiError> {
    let Some(tenant) = tenant_asked(&user, &q, "submits only for its own tenant")? else {
        return Err(ApiError::bad_query(
            "tenant",
            "the operator submits on behalf of a tenant: add ?tenant=NAME",
        ));
    };
    let body = body::read(payload, st.body_limit).await?;
    let spec = caldera_spec::parse_task_spec(&body)?;
    let (rec, created) = st.cp.submit(tenant, spec).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(Reply::with_status(status, TaskView::from(&rec)))
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
async fn visible(
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
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<TaskView>, ApiError> {
    let (_, r) = visible(&user, &st, &q, &id).await?;
    let mut view = TaskView::from(&r);
    if r.state == TaskState::Queued {
        let line = st.cp.queue_positions().await?;
        // Inside the control plane a task's id is its key (`tenant/id`).
        view.queue_position = line.get(&r.spec.task_id).copied();
    }
    Ok(Reply::ok(view))
}

/// GET /v1/tasks?state=&type=&limit=&cursor= — a tenant's tasks ordered by its
/// own ids, `cursor` the last id seen; the operator's: every tenant's, ordered
/// by key (`tenant/id`), `cursor` the last key seen. A page examines a bounded number of tasks, so it may hold
/// fewer than `limit` with a `next_cursor` to go on from.
pub async fn list(user: User, st: web::Data<AppState>, q: Query) -> Result<Reply<Value>, ApiError> {
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
        tenant: user.tenant().map(str::to_string),
        state,
        task_type,
        cursor: q.get("cursor").cloned().unwrap_or_default(),
        limit: query_num(&q, "limit", 100, 1000)? as usize,
    };
    let page = st.cp.tasks(query).await?;
    let line = match page.tasks.iter().any(|t| t.state == TaskState::Queued) {
        true => st.cp.queue_positions().await?,
        false => Default::default(),
    };
    let tasks: Vec<TaskView> = page
        .tasks
        .iter()
        .map(|t| {
            let mut view = TaskView::from(t);
            view.queue_position = line.get(&t.spec.task_id).copied();
            view
        })
        .collect();
    Ok(Reply::ok(
        json!({"tasks": tasks, "next_cursor": page.next_cursor}),
    ))
}

/// POST /v1/tasks/{id}/release?tenant= — stop, free, Released (queued: Cancelled).
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
pub async fn logs(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<Reply<Value>, ApiError> {
    let (_, rec) = visible(&user, &st, &q, &id).await?;
    let tail = query_num(&q, "tail_bytes", 64 * 1024, 16 * 1024 * 1024)?;
    let Some(a) = rec.allocation else {
        return Err(ApiError::new(
            &codes::NO_LOGS_YET,
            "the task has not run yet, so it has no logs",
        ));
    };
    if rec.spec.command.is_empty() {
        // A reservation holds room and runs nothing: say so, rather than
        // answering an empty log as if a process had been silent.
        return Ok(Reply::ok(
            json!({"task_id": *id, "node": a.node, "content": "",
            "truncated": false, "reservation": true,
            "note": "this task is a reservation: it runs no process, so it has no log"}),
        ));
    }
    // From an offset: the next piece of a log being followed (`logs -f`).
    let from = query_offset(&q, "from_byte")?;
    let chunk = st.cp.logs(&a, tail, from).await?;
    Ok(Reply::ok(json!({"task_id": *id, "node": a.node,
        "allocation_id": caldera_spec::local_id(&a.allocation_id),
        "content": chunk.content, "truncated": chunk.truncated, "end_byte": chunk.end_byte})))
}

/// PUT /v1/tasks/{id}/replicas?tenant= {"replicas": N} — scale an inference service.
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
