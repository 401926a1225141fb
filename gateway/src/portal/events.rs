//! `GET /events`: the audit trail, newest first, filtered by kind, task,
//! tenant and time, read through `GET /v1/events` (the same tenant checks:
//! a tenant sees only its own events). A page looks at a bounded window of
//! the log ([`WINDOW`] events) and links to the window before it.
use super::auth::Viewer;
use super::error::PortalError;
use super::layout::{page, Nav};
use super::respond::{Live, PageAnswers, Render};
use crate::api::events::{self as api, EventQuery};
use crate::routes::events::EventView;
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_spec::time::rfc3339;
use caldera_spec::EventKind;
use maud::{html, Markup};
use std::collections::HashMap;

/// Events one page examines (one `GET /v1/events` page).
pub const WINDOW: u64 = 1000;
/// Most events a page shows.
pub const SHOWN: usize = 100;

/// An event kind's name as the API writes it (`task_transition`).
pub fn kind_name(k: &EventKind) -> String {
    match serde_json::to_value(k) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{k:?}"),
    }
}

/// The events with seq in `(before - WINDOW, before)` that `query` passes,
/// newest first, at most `shown`, through the API's listing.
async fn window(
    viewer: &Viewer,
    st: &AppState,
    before: u64,
    mut query: EventQuery,
    shown: usize,
) -> Result<Vec<EventView>, PortalError> {
    query.cursor = before.saturating_sub(WINDOW + 1);
    query.limit = WINDOW as usize;
    let page = api::list(st, &viewer.user(), query).await?;
    let mut evs: Vec<EventView> = page
        .events
        .into_iter()
        .filter(|e| e.event.seq < before)
        .collect();
    evs.reverse();
    evs.truncate(shown);
    Ok(evs)
}

/// The newest `n` events the viewer may see (the overview's list).
pub async fn latest_events(
    viewer: &Viewer,
    st: &AppState,
    n: usize,
) -> Result<Vec<EventView>, PortalError> {
    let newest = st.cp.last_event_seq() + 1;
    window(viewer, st, newest, EventQuery::default(), n).await
}

/// Events of one task, newest first (the task page's list).
pub async fn task_events(
    viewer: &Viewer,
    st: &AppState,
    tenant: &str,
    task: &str,
) -> Result<Vec<EventView>, PortalError> {
    let query = EventQuery {
        tenant: Some(tenant.to_string()),
        task: Some(task.to_string()),
        ..EventQuery::default()
    };
    window(viewer, st, st.cp.last_event_seq() + 1, query, 50).await
}

/// A table of events, newest first.
pub fn events_table(events: &[EventView]) -> Markup {
    html! {
        @if events.is_empty() { p.note { "No events." } }
        @else {
            table.events {
                thead { tr { th { "time" } th { "kind" } th { "task" } th { "tenant" } th { "node" } th { "what" } } }
                tbody {
                    @for e in events {
                        tr data-seq=(e.event.seq) {
                            td.time { (e.at) }
                            td { (kind_name(&e.event.kind)) }
                            td { @if let (Some(t), Some(tn)) = (&e.event.task, &e.event.tenant) {
                                a href=(format!("/tasks/{t}?tenant={tn}")) { (t) }
                            } @else { (e.event.task.as_deref().unwrap_or("")) } }
                            td { (e.event.tenant.as_deref().unwrap_or("")) }
                            td { (e.event.node.as_deref().unwrap_or("")) }
                            td { (e.event.message) }
                        }
                    }
                }
            }
        }
    }
}

/// GET /events
#[utoipa::path(get, path = "/events", tag = "portal", operation_id = "portal_events",
    description = "The portal's audit trail, newest first, with filters.",
    params(
        ("kind" = Option<String>, Query, description = "an event kind (task_transition, allocation_granted, …)"),
        ("task" = Option<String>, Query, description = "a task's id"),
        ("tenant" = Option<String>, Query, description = "a tenant (a tenant's session: only its own)"),
        ("since" = Option<String>, Query, description = "only events at or after this time (RFC 3339 or Unix ms)"),
        ("before" = Option<u64>, Query, description = "only events with a seq below this (the older page)"),
        Live),
    responses(
        PageAnswers,
        (status = 400, description = "a bad filter (named)", content_type = "text/html", body = String),
        (status = 403, description = "a tenant's session naming another tenant", content_type = "text/html", body = String),
        (status = 409, description = "the operator named a task id several tenants use", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let mut filters = HashMap::new();
    for key in ["kind", "task", "tenant"] {
        if let Some(v) = q.get(key).filter(|v| !v.is_empty()) {
            filters.insert(key.to_string(), v.clone());
        }
    }
    let since = match q.get("since").filter(|v| !v.is_empty()) {
        None => None,
        Some(s) => Some(caldera_spec::time::parse_instant(s).ok_or_else(|| {
            PortalError::from(crate::ApiError::bad_query(
                "since",
                format!("since is RFC 3339 or Unix ms, not {s:?}"),
            ))
        })?),
    };
    let newest = st.cp.last_event_seq() + 1;
    let before = match q.get("before") {
        None => newest,
        Some(b) => b.parse::<u64>().map_err(|_| {
            PortalError::from(crate::ApiError::bad_query(
                "before",
                "before is an event seq",
            ))
        })?,
    };
    let query = EventQuery::from_query(&st, &viewer.user(), &filters).await?;
    let mut evs = window(&viewer, &st, before, query, SHOWN).await?;
    if let Some(since) = since {
        evs.retain(|e| e.event.at_ms >= since);
    }
    let older = before.saturating_sub(WINDOW + 1);
    let reached_since = since.is_some_and(|s| evs.last().is_some_and(|e| e.event.at_ms <= s));
    let value = |k: &str| q.get(k).cloned().unwrap_or_default();
    let mut older_q = filters.clone();
    older_q.insert("before".into(), (older + 1).to_string());
    if let Some(s) = q.get("since") {
        older_q.insert("since".into(), s.clone());
    }
    let older_href = format!(
        "/events?{}",
        serde_urlencoded::to_string(&older_q).unwrap_or_default()
    );
    let fixed = html! {
        form.filters #events-filter method="get" action="/events" {
            label { "kind " input #filter-kind name="kind" value=(value("kind")) placeholder="task_transition"; }
            label { "task " input #filter-task name="task" value=(value("task")); }
            @if viewer.is_operator() {
                label { "tenant " input #filter-tenant name="tenant" value=(value("tenant")); }
            }
            label { "since " input #filter-since name="since" value=(value("since")) placeholder="2026-12-01T00:00:00Z"; }
            button #filter-apply type="submit" { "Filter" }
        }
    };
    let live = html! {
        p.note { "Events before seq " (before) " (newest " (newest.saturating_sub(1)) "), newest first"
            @if let Some(s) = since { ", since " (rfc3339(s)) } "." }
        (events_table(&evs))
        @if older > 0 && !reached_since {
            p { a #events-older href=(older_href) { "Older events" } }
        }
    };
    Ok(render.page(
        |live| page(&viewer, Nav::Events, "Events", fixed, live),
        live,
    ))
}
