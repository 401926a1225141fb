//! Tasks: request resources (submit), status, list, logs, release.
use super::query_num;
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::cluster::Submit;
use caldera_actors::errors::ActorError;
use caldera_actors::node::FetchLogs;
use caldera_actors::task::{snapshot, Release};
use caldera_actors::tokens::Principal;
use caldera_actors::views::TaskView;
use caldera_spec::{TaskRecord, TaskState, TaskType};
use std::collections::HashMap;

/// POST /v1/tasks — 201 when created, 200 when the identical spec exists, 409 on a different one.
pub async fn submit(
    req: HttpRequest,
    st: web::Data<AppState>,
    q: web::Query<HashMap<String, String>>,
    payload: web::Payload,
) -> HttpResponse {
    let p = match auth::user(&req, &st) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let tenant = match (&p, q.get("tenant")) {
        (Principal::Tenant(t), None) => t.clone(),
        (Principal::Tenant(t), Some(asked)) if asked == t => t.clone(),
        (Principal::Tenant(_), Some(_)) => {
            return envelope::forbidden("a tenant token submits only for its own tenant")
        }
        (_, Some(asked)) => asked.clone(),
        (_, None) => {
            return envelope::bad_query(
                "tenant",
                "the operator submits on behalf of a tenant: add ?tenant=NAME",
            )
        }
    };
    let body = match crate::body::read(payload, st.max_body_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let spec = match caldera_spec::parse_task_spec(&body) {
        Ok(s) => s,
        Err(e) => return envelope::err(&ActorError::Invalid(e)),
    };
    match st
        .cluster
        .send(Submit { tenant, spec })
        .await
        .map_err(ActorError::from)
        .and_then(|r| r)
    {
        Ok((rec, created)) => envelope::ok(if created { 201 } else { 200 }, TaskView::from(&rec)),
        Err(e) => envelope::err(&e),
    }
}

/// The freshest record of a task: its live actor's, else sled's.
pub async fn load(st: &AppState, id: &str) -> Result<Option<TaskRecord>, ActorError> {
    if let Some(a) = st.shared.registry.task(id) {
        if let Ok(r) = snapshot(&a).await {
            return Ok(Some(r));
        }
    }
    Ok(caldera_actors::cluster::store(&st.shared).task(id)?)
}

/// A task the caller may see, or the 404 (another tenant's task is "not found").
async fn visible(req: &HttpRequest, st: &AppState, id: &str) -> Result<TaskRecord, HttpResponse> {
    let p = auth::user(req, st)?;
    match load(st, id).await {
        Ok(Some(r)) if auth::may_see(&p, &r.tenant) => Ok(r),
        Ok(_) => Err(envelope::not_found("task", id)),
        Err(e) => Err(envelope::err(&e)),
    }
}

/// GET /v1/tasks/{id}
pub async fn get(req: HttpRequest, st: web::Data<AppState>, id: web::Path<String>) -> HttpResponse {
    match visible(&req, &st, &id).await {
        Ok(r) => envelope::ok(200, TaskView::from(&r)),
        Err(r) => r,
    }
}

/// GET /v1/tasks?state=&type=&limit=&cursor= — ordered by task id; `cursor` is the last id seen.
pub async fn list(
    req: HttpRequest,
    st: web::Data<AppState>,
    q: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let p = match auth::user(&req, &st) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let state = match q.get("state").map(|s| TaskState::parse(s).ok_or(s)) {
        Some(Err(s)) => return envelope::bad_query("state", &format!("unknown state {s:?}")),
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let ttype = match q.get("type").map(|s| s.as_str()) {
        None => None,
        Some("training") => Some(TaskType::Training),
        Some("inference") => Some(TaskType::Inference),
        Some(other) => {
            return envelope::bad_query(
                "type",
                &format!("type is training or inference, not {other:?}"),
            )
        }
    };
    let limit = match query_num(&q, "limit", 100, 1000) {
        Ok(n) => n as usize,
        Err(r) => return r,
    };
    let cursor = q.get("cursor").cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut next = None;
    for r in caldera_actors::cluster::store(&st.shared).tasks_after(&cursor) {
        let r = match r {
            Ok(r) => r,
            Err(e) => return envelope::err(&e.into()),
        };
        if r.spec.task_id <= cursor || !auth::may_see(&p, &r.tenant) {
            continue;
        }
        if state.is_some_and(|s| s != r.state) || ttype.is_some_and(|t| t != r.spec.task_type) {
            continue;
        }
        if out.len() == limit {
            next = out.last().map(|v: &TaskView| v.task_id.clone());
            break;
        }
        out.push(TaskView::from(&r));
    }
    envelope::ok(200, serde_json::json!({"tasks": out, "next_cursor": next}))
}

/// POST /v1/tasks/{id}/release — stop, free, Released (queued: Cancelled).
pub async fn release(
    req: HttpRequest,
    st: web::Data<AppState>,
    id: web::Path<String>,
) -> HttpResponse {
    let rec = match visible(&req, &st, &id).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let by = match auth::user(&req, &st) {
        Ok(Principal::Tenant(t)) => format!("tenant {t}"),
        _ => "operator".to_string(),
    };
    match st.shared.registry.task(&id) {
        None => envelope::ok(200, TaskView::from(&rec)), // already terminal: releasing again changes nothing
        Some(a) => match a
            .send(Release { by })
            .await
            .map_err(ActorError::from)
            .and_then(|r| r)
        {
            Ok(r) => envelope::ok(200, TaskView::from(&r)),
            Err(e) => envelope::err(&e),
        },
    }
}

/// GET /v1/tasks/{id}/logs?tail_bytes=N — fetched from the node that ran it.
pub async fn logs(
    req: HttpRequest,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let rec = match visible(&req, &st, &id).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let tail = match query_num(&q, "tail_bytes", 64 * 1024, 16 * 1024 * 1024) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let Some(a) = rec.allocation else {
        return envelope::fail(
            &caldera_spec::codes::NO_LOGS_YET,
            "the task has not run yet, so it has no logs",
            None,
        );
    };
    let Some(node) = st.shared.registry.node(&a.node) else {
        return envelope::not_found("node", &a.node);
    };
    match node
        .send(FetchLogs {
            allocation_id: a.allocation_id,
            tail_bytes: tail,
        })
        .await
        .map_err(ActorError::from)
        .and_then(|r| r)
    {
        Ok((content, truncated)) => envelope::ok(
            200,
            serde_json::json!({"task_id": *id, "node": a.node, "content": content, "truncated": truncated}),
        ),
        Err(e) => envelope::err(&e),
    }
}

/// PUT /v1/tasks/{id}/replicas {"replicas": N} — scale an inference service.
pub async fn scale(
    req: HttpRequest,
    st: web::Data<AppState>,
    id: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    if let Err(r) = visible(&req, &st, &id).await {
        return r;
    }
    let body = match crate::body::read(payload, st.max_body_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let n = match caldera_actors::service::parse_replicas(&body) {
        Ok(n) => n,
        Err(e) => return envelope::err(&e),
    };
    let Some(a) = st.shared.registry.task(&id) else {
        return envelope::fail(
            &caldera_spec::codes::CONFLICT,
            "the service has ended",
            None,
        );
    };
    match a
        .send(caldera_actors::service::Scale { replicas: n })
        .await
        .map_err(ActorError::from)
        .and_then(|r| r)
    {
        Ok(r) => envelope::ok(200, TaskView::from(&r)),
        Err(e) => envelope::err(&e),
    }
}
