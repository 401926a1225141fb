//! `GET /tasks/{id}`: one task — its timeline with the time spent in each
//! stage, its allocation topology (node → GPU cards → this task's slice
//! beside the others'), its log (tail, and follow through `GET
//! /tasks/{id}/log`), its events, its tenant's use against allocation over
//! the task's life, its cost so far, and release / scale with a
//! confirmation step. Read through `GET /v1/tasks/{id}`: another tenant's
//! task is the 404 page, as in the API.
use super::auth::{Form, Viewer};
use super::chart::{line_chart, Series};
use super::error::PortalError;
use super::events::{events_table, task_events};
use super::layout::{age, csrf_field, gb, page, raw, Nav};
use super::membar::{gpu_bar, slices_on};
use super::respond::{see_other, Live, PageAnswers, Render};
use super::task_lookup::find;
use super::tasks::{asks, task_href, url_part};
use crate::api;
use crate::api::tasks::{LogRange, VisibleTask};
use crate::routes::Query;
use crate::state::AppState;
use actix_web::http::header::CONTENT_TYPE;
use actix_web::{web, HttpResponse};
use caldera_actors::chargeback::GroupBy;
use caldera_actors::views::TaskView;
use maud::{html, Markup};

/// Log bytes the page shows first (follow reads on from there).
const LOG_TAIL: u64 = 16 * 1024;

/// Each transition with how long the task stayed in it (to the next one,
/// or to `now` for the state it is in).
fn timeline(t: &TaskView, now_ms: u64) -> Markup {
    html! {
        table #timeline.timeline {
            thead { tr { th { "state" } th { "since" } th { "for" } th { "why" } } }
            tbody {
                @for (i, tr_) in t.history.iter().enumerate() {
                    @let until = t.history.get(i + 1).map(|n| n.at_ms).unwrap_or(now_ms);
                    @let last = i + 1 == t.history.len();
                    tr data-state=(tr_.state) {
                        td { span class=(format!("state {}", tr_.state)) { (tr_.state) } }
                        td { (tr_.at) }
                        td.dur { (age(until.saturating_sub(tr_.at_ms))) @if last { " so far" } }
                        td { (tr_.reason.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

/// A failure's code as `docs/reference/errors.md` names it: "10220 image_not_found".
fn failure_code_label(code: u32) -> String {
    match caldera_spec::codes::ALL.iter().find(|c| c.code == code) {
        Some(c) => format!("{} {}", c.code, c.name),
        None => code.to_string(),
    }
}

/// The node this task holds room on, its GPUs as bars with this task's
/// slice marked among the others'.
async fn topology(
    viewer: &Viewer,
    st: &AppState,
    task: &VisibleTask,
    t: &TaskView,
) -> Result<Markup, PortalError> {
    let user = viewer.user();
    let Some(a) = &t.allocation else {
        if t.replicas.is_some() {
            return service_topology(viewer, st, task, t).await;
        }
        return Ok(
            html! { p.note { "No allocation: " (t.pending_reason.as_deref().unwrap_or("it holds no room now")) } },
        );
    };
    let node = api::nodes::find(st, &user, &a.node).await?;
    let ledger = api::nodes::ledger(st, &user).await?;
    let slices = slices_on(&a.node, &ledger, viewer.tenant(), Some(&task.key));
    let held: Vec<u32> = a.gpus.iter().map(|g| g.index).collect();
    Ok(html! {
        p { "Node " a href="/nodes" { strong { (a.node) } } " (epoch " (a.epoch) ") · "
            (format!("{:.1}", a.cpu_milli as f64 / 1000.0)) " cores · " (gb(a.memory_mb as f64)) " memory · " (gb(a.disk_mb as f64)) " disk"
            @if a.borrowed { " · " span.warning { "borrowed (preempted first)" } }
            @if let Some(d) = &a.image_digest { " · image " code { (d) } } }
        @match node {
            None => { p.note { "The node is no longer registered." } }
            Some(n) => {
                @for g in n.gpus.iter().filter(|g| held.contains(&g.index)) {
                    (gpu_bar(g.index, &g.model, g.memory_total_mb, slices.get(&g.index).map(Vec::as_slice).unwrap_or(&[])))
                }
                @if held.is_empty() { p.note { "It holds no GPU." } }
            }
        }
    })
}

/// A service holds no room itself: its replicas do. Each replica that
/// holds an allocation now, with its node, its GPUs as bars (its slice
/// marked) and its state.
async fn service_topology(
    viewer: &Viewer,
    st: &AppState,
    service: &VisibleTask,
    t: &TaskView,
) -> Result<Markup, PortalError> {
    let user = viewer.user();
    let mut replicas = api::tasks::replicas(st, service).await?;
    replicas.sort_by(|a, b| a.spec.task_id.cmp(&b.spec.task_id));
    if replicas.is_empty() {
        return Ok(
            html! { p.note #replicas-none { "No replica holds an allocation now"
            @if let Some(r) = &t.pending_reason { ": " (r) } "." } },
        );
    }
    let ledger = api::nodes::ledger(st, &user).await?;
    let mut out = Vec::new();
    for r in &replicas {
        let Some(a) = &r.allocation else { continue };
        let node = api::nodes::find(st, &user, &a.node).await?;
        let slices = slices_on(&a.node, &ledger, viewer.tenant(), Some(&r.spec.task_id));
        let held: Vec<u32> = a.gpus.iter().map(|g| g.index).collect();
        let id = caldera_spec::local_id(&r.spec.task_id).to_string();
        out.push(html! {
            div.replica data-replica=(id) {
                p { a href=(task_href(&id, &t.tenant)) { strong { (id) } } " · "
                    span class=(format!("state {}", r.state.as_str())) { (r.state.as_str()) }
                    " · node " a href="/nodes" { strong { (a.node) } }
                    " · " (format!("{:.1}", a.cpu_milli as f64 / 1000.0)) " cores · " (gb(a.memory_mb as f64)) " memory"
                    @if let Some(m) = &r.serving_model { " · serves " (m) }
                    @if a.borrowed { " · " span.warning { "borrowed (preempted first)" } } }
                @if let Some(n) = &node {
                    @for g in n.gpus.iter().filter(|g| held.contains(&g.index)) {
                        (gpu_bar(g.index, &g.model, g.memory_total_mb, slices.get(&g.index).map(Vec::as_slice).unwrap_or(&[])))
                    }
                }
            }
        });
    }
    Ok(html! {
        p { (replicas.len()) " replica(s) hold room:" }
        @for m in out { (m) }
    })
}

/// The task's allocation: what it was granted vs what its node measured,
/// from the Scheduler's trail of that allocation (one sample per idle
/// inspector pass, `usage-sample-ms`; the latest 60).
async fn use_curve(st: &AppState, task: &VisibleTask) -> Result<Markup, PortalError> {
    let on_gpus = task
        .record
        .allocation
        .as_ref()
        .is_some_and(|a| !a.gpus.is_empty());
    let trail = api::tasks::use_trail(st, task).await?;
    let Some(first) = trail.first() else {
        return Ok(html! {
            p.note #task-use-none { "No measured use: the task holds no allocation now, or its node has not reported one yet." }
        });
    };
    let from = first.at_ms;
    let to = st.cp.now_ms().max(from + 1);
    let unit = if on_gpus { "GPUs" } else { "CPU cores" };
    let series = [
        Series {
            label: "allocated",
            class: "allocated",
            points: trail
                .iter()
                .map(|p| (p.at_ms, f64::from(p.allocated)))
                .collect(),
        },
        Series {
            label: "used",
            class: "used",
            points: trail.iter().map(|p| (p.at_ms, f64::from(p.used))).collect(),
        },
    ];
    Ok(html! {
        figure { figcaption { "This task's allocation: " (unit) " allocated vs measured use (the node's report, each inspector pass)" }
            (raw(line_chart("chart-task-use", &series, from, to, None, unit))) }
    })
}

/// The cost of this task's allocations so far.
async fn cost(viewer: &Viewer, st: &AppState, t: &TaskView) -> Result<Markup, PortalError> {
    let from = t.history.first().map(|h| h.at_ms).unwrap_or(0);
    let to = st.cp.now_ms().max(from + 1);
    let tenant = api::tenants::find(st, &viewer.user(), &t.tenant).await?;
    let (_, rep) = api::usage::cost(st, &tenant, from, to, GroupBy::Task).await?;
    let key = caldera_spec::task_key(&t.tenant, &t.task_id);
    let line = rep
        .groups
        .iter()
        .find(|g| g.key == key || g.key == t.task_id);
    let currency = st.cp.prices().currency;
    Ok(html! {
        p #task-cost { @match line {
            Some(l) => { strong { (l.allocated.decimal()) " " (currency) } " so far (idle " (l.idle.decimal()) ", "
                (format!("{:.2}", l.gpu_hours)) " GPU-hours, " (l.allocations) " allocations)" }
            None => { "0 " (currency) " so far (it has held no room)" }
        } }
    })
}

/// Release, scale and (a service) swap, each behind a confirmation step.
fn actions(viewer: &Viewer, t: &TaskView) -> Markup {
    let base = format!("/tasks/{}", url_part(&t.task_id));
    let tq = format!("?tenant={}", url_part(&t.tenant));
    html! {
        section #actions {
            h2 { "Actions" }
            details.confirm {
                summary #release { "Release" }
                form method="post" action=(format!("{base}/release{tq}")) {
                    (csrf_field(viewer))
                    p { "Release " strong { (t.task_id) } "? Its room is freed and its workload stopped." }
                    button.danger #release-confirm type="submit" { "Yes, release it" }
                }
            }
            @if t.replicas.is_some() {
                details.confirm {
                    summary #scale { "Scale" }
                    form method="post" action=(format!("{base}/scale{tq}")) {
                        (csrf_field(viewer))
                        label { "replicas " input #scale-replicas name="replicas" type="number" min="1" value=(t.replicas.unwrap_or(1)); }
                        " "
                        button #scale-confirm type="submit" { "Yes, scale it" }
                    }
                }
            }
            (super::model_actions::swap_form(viewer, t))
        }
    }
}

/// GET /tasks/{id}
#[utoipa::path(get, path = "/tasks/{id}", tag = "portal", operation_id = "portal_task",
    description = "The portal's task page: timeline, topology, log, events, use against allocation, cost, release and scale.",
    params(("id" = String, Path, description = "the task's id (the tenant's own)"),
        ("tenant" = Option<String>, Query, description = "the task's tenant (the operator)"),
        Live),
    responses(
        PageAnswers,
        (status = 403, description = "a tenant's session naming another tenant", content_type = "text/html", body = String),
        (status = 404, description = "no such task (or another tenant's)", content_type = "text/html", body = String),
        (status = 409, description = "the operator named an id several tenants use, without a tenant", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let task = find(&viewer, &st, &id, &q).await?;
    let t = api::tasks::view(&st, &task).await?;
    let now = st.cp.now_ms();
    let topo = topology(&viewer, &st, &task, &t).await?;
    let evs = task_events(&viewer, &st, &t.tenant, &t.task_id).await?;
    let curve = use_curve(&st, &task).await?;
    let cost = cost(&viewer, &st, &t).await?;
    let live = html! {
        p { "State " span #task-state class=(format!("state {}", t.state)) { (t.state) }
            " · " (t.task_type) " · priority " (t.priority) " · tenant " (t.tenant) " · asks " (asks(&t))
            @if let Some(p) = t.queue_position { " · " strong { "#" (p) } " in line" }
            @if let Some(s) = &t.estimated_start { " · estimated start " (s) } }
        p #task-runtime { "Runs as " strong { (t.runtime) }
            @if let Some(i) = &t.image {
                @if t.runtime == "container" { " of image " code { (i) } }
                @else { " (image " code { (i) } " recorded, not run)" }
            } }
        @if let Some(r) = &t.pending_reason { p.reason { "Why pending: " (r) } }
        @if let Some(p) = &t.pull { p.reason #image-pull { "Image: " (p.describe()) } }
        @if let Some(f) = &t.failure { p.field-error { (f)
            @if let Some(c) = t.failure_code { " " span.code { "[" (failure_code_label(c)) "]" } } } }
        (cost)
        @if let Some(s) = &t.swap { (super::model_actions::swap_progress(s, now)) }
        section { h2 { "Timeline" } (timeline(&t, now)) }
        section #topology { h2 { "Allocation" } (topo) }
        section { h2 { "Use" } (curve) }
        section { h2 { "Events" } (events_table(&evs)) }
    };
    let log = log_section(&viewer, &st, &t).await;
    let fixed = html! { (actions(&viewer, &t)) (log) };
    let title = format!("Task {}", t.task_id);
    Ok(render.page(|live| page(&viewer, Nav::Tasks, &title, fixed, live), live))
}

/// The log's tail and its follow switch; a task with no log says why.
async fn log_section(viewer: &Viewer, st: &AppState, t: &TaskView) -> Markup {
    let range = LogRange {
        tail_bytes: LOG_TAIL,
        from_byte: None,
    };
    let chunk = match api::tasks::find(st, &viewer.user(), Some(&t.tenant), &t.task_id).await {
        Ok(task) => api::tasks::logs(st, &task, range).await,
        Err(e) => Err(e),
    };
    let follow = format!(
        "/tasks/{}/log?tenant={}",
        url_part(&t.task_id),
        url_part(&t.tenant)
    );
    html! {
        section #logs {
            h2 { "Log" }
            @match chunk {
                Ok(c) => {
                    @if let Some(n) = c.note { p.note { (n) } }
                    @if c.reservation != Some(true) {
                        label { input #log-follow type="checkbox" checked; " follow" }
                        pre #log data-follow=(follow) data-end=(c.end_byte.unwrap_or(0)) { (c.content) }
                    }
                }
                Err(e) => { p.note #log-missing { (e.message()) } }
            }
        }
    }
}

/// GET /tasks/{id}/log — the log from `from_byte`, as text
#[utoipa::path(get, path = "/tasks/{id}/log", tag = "portal", operation_id = "portal_task_log",
    description = "The next piece of a task's log from from_byte, as text (what the page's follow appends); X-Log-End: the offset after it.",
    params(("id" = String, Path, description = "the task's id"),
        ("tenant" = Option<String>, Query, description = "the task's tenant"),
        ("from_byte" = Option<u64>, Query, description = "read from this offset")),
    responses(
        (status = 200, description = "the log text", content_type = "text/plain", body = String),
        (status = 303, description = "no session: on to the login page"),
        (status = 401, description = "fragment=live without a session (the script then goes to the login)", content_type = "text/html", body = String),
        (status = 400, description = "a bad from_byte", content_type = "text/html", body = String),
        (status = 403, description = "a tenant's session naming another tenant", content_type = "text/html", body = String),
        (status = 404, description = "no such task (or another tenant's)", content_type = "text/html", body = String),
        (status = 409, description = "the task has not run yet", content_type = "text/html", body = String),
    ))]
pub async fn log_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let task = find(&viewer, &st, &id, &q).await?;
    let range = LogRange::with_tail(&task, &q, LOG_TAIL)?;
    let c = api::tasks::logs(&st, &task, range).await?;
    let (text, end) = (c.content, c.end_byte);
    let mut reply = HttpResponse::Ok();
    reply.insert_header((CONTENT_TYPE, "text/plain; charset=utf-8"));
    if let Some(e) = end {
        reply.insert_header(("X-Log-End", e.to_string()));
    }
    Ok(reply.body(text))
}

/// POST /tasks/{id}/release
#[utoipa::path(post, path = "/tasks/{id}/release", tag = "portal", operation_id = "portal_release",
    description = "Releases the task after its confirmation step (POST /v1/tasks/{id}/release), then shows it again.",
    params(("id" = String, Path, description = "the task's id"),
        ("tenant" = Option<String>, Query, description = "the task's tenant")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "csrf"),
    responses(
        (status = 303, description = "released (or no session): on to the task's page (or the login)"),
        (status = 400, description = "not a form", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token: nothing was released", content_type = "text/html", body = String),
        (status = 404, description = "no such task (or another tenant's)", content_type = "text/html", body = String),
        (status = 409, description = "several tenants use the id", content_type = "text/html", body = String),
    ))]
pub async fn release(
    viewer: Viewer,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    let task = find(&form.viewer, &st, &id, &q).await?;
    let t = api::tasks::release(&st, &form.viewer.user(), task).await?;
    let tenant = t.tenant;
    Ok(see_other(&task_href(&id, &tenant)))
}

/// POST /tasks/{id}/scale
#[utoipa::path(post, path = "/tasks/{id}/scale", tag = "portal", operation_id = "portal_scale",
    description = "Scales an inference service after its confirmation step (PUT /v1/tasks/{id}/replicas).",
    params(("id" = String, Path, description = "the service's id"),
        ("tenant" = Option<String>, Query, description = "the service's tenant")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded", description = "csrf, replicas"),
    responses(
        (status = 303, description = "scaled (or no session): on to the service's page (or the login)"),
        (status = 400, description = "not a form, or replicas out of range", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token: nothing changed", content_type = "text/html", body = String),
        (status = 404, description = "no such task (or another tenant's)", content_type = "text/html", body = String),
        (status = 409, description = "not a running service", content_type = "text/html", body = String),
    ))]
pub async fn scale(
    viewer: Viewer,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    let task = find(&form.viewer, &st, &id, &q).await?;
    // Not a whole number: 0, which the API refuses naming the field.
    let n: u32 = form
        .field("replicas")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let t = api::tasks::scale(&st, &task, n).await?;
    Ok(see_other(&task_href(&t.task_id, &t.tenant)))
}
