//! `GET /tasks`: the task list with filters (state, type, tenant, model),
//! each task's queue position, estimated start, why it is pending and
//! whether it runs on borrowed room; [`PAGE`] tasks a page, with a link to
//! the next (read through `GET /v1/tasks`, so the same bounded scan and the
//! same tenant checks: a tenant lists only its own).
use super::auth::Viewer;
use super::error::PortalError;
use super::layout::{page, Nav};
use super::respond::{Live, PageAnswers, Render};
use crate::api::tasks as api;
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_actors::views::TaskView;
use maud::{html, Markup};
use std::collections::HashMap;

/// Tasks a page lists (the page stays well under 200 KB).
pub const PAGE: usize = 50;
/// Longest "why pending" shown in a row (the task page has all of it).
const REASON_CHARS: usize = 140;

/// `s` percent-encoded for a path segment or query value.
pub fn url_part(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A task page's address.
pub fn task_href(id: &str, tenant: &str) -> String {
    format!("/tasks/{}?tenant={}", url_part(id), url_part(tenant))
}

/// What a task asks for, in a few words: `4×A100 80 GB`, `0.5 GPU`, `8 cores`.
pub fn asks(t: &TaskView) -> String {
    let r = &t.spec.resources;
    let mut parts = Vec::new();
    if let Some(g) = &r.gpu {
        let model = g.model.as_deref().unwrap_or("GPU");
        match (g.share, g.memory_gb) {
            (Some(s), _) => parts.push(format!("{s} {model}")),
            (None, Some(m)) => parts.push(format!("{}×{model} {m} GB", g.count)),
            (None, None) => parts.push(format!("{}×{model}", g.count)),
        }
    }
    if let Some(c) = &r.cpu {
        parts.push(format!("{} cores", c.cores));
    }
    parts.join(", ")
}

fn row(t: &TaskView) -> Markup {
    let reason: String = t
        .pending_reason
        .as_deref()
        .unwrap_or("")
        .chars()
        .take(REASON_CHARS)
        .collect();
    html! {
        tr data-task-id=(t.task_id) data-tenant=(t.tenant) data-state=(t.state) {
            td { a.task-link href=(task_href(&t.task_id, &t.tenant)) { (t.task_id) } }
            td { (t.tenant) }
            td { (t.task_type) }
            td { (t.priority) }
            td { span class=(format!("state {}", t.state)) { (t.state) } }
            td { (asks(t)) }
            td { (t.allocation.as_ref().map(|a| a.node.as_str()).unwrap_or("")) }
            td { @if let Some(p) = t.queue_position { (p) } }
            td { (t.estimated_start.as_deref().unwrap_or("")) }
            td.reason { (reason) }
            td { @if t.allocation.as_ref().is_some_and(|a| a.borrowed) { "borrowed" } }
        }
    }
}

/// GET /tasks
#[utoipa::path(get, path = "/tasks", tag = "portal", operation_id = "portal_tasks",
    description = "The portal's task list with filters, queue positions, estimated starts and why each waits.",
    params(
        ("state" = Option<String>, Query, description = "only tasks in this state"),
        ("type" = Option<String>, Query, description = "training or inference"),
        ("tenant" = Option<String>, Query, description = "the operator: only this tenant's"),
        ("model" = Option<String>, Query, description = "only tasks naming this model version or GPU model"),
        ("cursor" = Option<String>, Query, description = "where the page starts (the next link's)"),
        Live),
    responses(
        PageAnswers,
        (status = 400, description = "a bad filter (named)", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let get = |k: &str| q.get(k).filter(|v| !v.is_empty()).cloned();
    let filters: HashMap<String, String> = ["state", "type", "cursor"]
        .iter()
        .filter_map(|k| get(k).map(|v| (k.to_string(), v)))
        .collect();
    let user = viewer.user();
    let mut query = api::TaskListQuery::from_query(&user, &filters)?;
    query.limit = PAGE;
    // The operator filtering by tenant lists as that tenant would: the
    // API's listing reads only that tenant's run of keys.
    if viewer.is_operator() {
        query.tenant = get("tenant");
    }
    let listing = api::list(&st, &user, query).await?;
    let (mut rows, next) = (listing.tasks, listing.next_cursor);
    if let Some(m) = get("model") {
        rows.retain(|t| {
            t.spec.model.as_deref() == Some(m.as_str())
                || t.spec
                    .resources
                    .gpu
                    .as_ref()
                    .and_then(|g| g.model.as_deref())
                    == Some(m.as_str())
        });
    }
    let value = |k: &str| get(k).unwrap_or_default();
    let next_href = next.map(|c| {
        let mut nq: Vec<(String, String)> = ["state", "type", "tenant", "model"]
            .iter()
            .filter_map(|k| get(k).map(|v| (k.to_string(), v)))
            .collect();
        nq.push(("cursor".into(), c));
        format!(
            "/tasks?{}",
            serde_urlencoded::to_string(&nq).unwrap_or_default()
        )
    });
    let fixed = html! {
        form.filters #tasks-filter method="get" action="/tasks" {
            label { "state " select #filter-state name="state" {
                option value="" { "any" }
                @for s in ["queued", "scheduled", "preparing", "warming", "ready", "running", "finished", "failed", "preempted", "cancelled", "released"] {
                    option value=(s) selected[value("state") == s] { (s) }
                }
            } }
            label { "type " select #filter-type name="type" {
                option value="" { "any" }
                @for s in ["training", "inference"] { option value=(s) selected[value("type") == s] { (s) } }
            } }
            @if viewer.is_operator() {
                label { "tenant " input #filter-tenant name="tenant" value=(value("tenant")); }
            }
            label { "model " input #filter-model name="model" value=(value("model")) placeholder="A100 or llama-7b:v3"; }
            button #filter-apply type="submit" { "Filter" }
        }
    };
    let live = html! {
        @if rows.is_empty() { p.note { "No tasks on this page." } }
        table.tasks {
            thead { tr { th { "task" } th { "tenant" } th { "type" } th { "priority" } th { "state" } th { "asks" } th { "node" } th { "in line" } th { "estimated start" } th { "why pending" } th { "room" } } }
            tbody { @for t in &rows { (row(t)) } }
        }
        @if let Some(h) = &next_href { p.pager { a #tasks-next href=(h) { "Next page" } } }
    };
    Ok(render.page(|live| page(&viewer, Nav::Tasks, "Tasks", fixed, live), live))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts_escape_what_a_path_or_query_would_misread() {
        assert_eq!(url_part("train_2024.1-a~"), "train_2024.1-a~");
        assert_eq!(url_part("a/b c&d"), "a%2Fb%20c%26d");
    }
}
