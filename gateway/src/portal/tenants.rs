//! `GET /tenants`: per tenant its guarantee, borrowing limit, allocated,
//! used and idle per dimension, its idle warnings, and its cost for a chosen
//! period; `GET /tenants/{name}/cost.csv` is that cost as CSV (the same
//! report and CSV as `GET /v1/tenants/{name}/cost`). A tenant sees its own;
//! the operator also sees the total across every tenant (`GET /v1/cost`).
use super::auth::Viewer;
use super::error::PortalError;
use super::events::kind_name;
use super::layout::{gb, page, Nav};
use super::respond::{Live, PageAnswers, Render};
use super::tasks::url_part;
use crate::api::events::{self, EventQuery};
use crate::api::{period, tenants, usage};
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_actors::chargeback::GroupBy;
use caldera_actors::views::{Dims, Keyed};
use caldera_spec::{EventKind, Quota};
use maud::{html, Markup};

/// Tenants a page shows at most (each costs a read of its billing records).
pub const SHOWN: usize = 30;

/// A quota figure, `—` when unlimited.
fn limit(v: Option<f64>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_else(|| "—".into())
}

/// The dims line of `tenant` among `rows`, if it has one.
fn line<'a>(rows: &'a [Keyed<Dims>], tenant: &str) -> Option<&'a Dims> {
    rows.iter().find(|k| k.key == tenant).map(|k| &k.dims)
}

/// The five dimensions of one tenant: guarantee, borrowing limit,
/// allocated, used, idle (MB figures in GB, as the quota is).
fn dims_table(quota: &Quota, borrow: &Quota, alloc: Option<&Dims>, idle: Option<&Dims>) -> Markup {
    let d = alloc.copied().unwrap_or_default();
    let i = idle.copied().unwrap_or_default();
    let rows = [
        (
            "GPUs",
            quota.gpus,
            borrow.gpus,
            d.gpus.allocated,
            d.gpus.used,
            i.gpus.allocated,
        ),
        (
            "GPU memory GB",
            quota.gpu_memory_gb,
            borrow.gpu_memory_gb,
            d.gpu_memory_mb.allocated / 1024.0,
            d.gpu_memory_mb.used / 1024.0,
            i.gpu_memory_mb.allocated / 1024.0,
        ),
        (
            "CPU cores",
            quota.cpu_cores,
            borrow.cpu_cores,
            d.cpu_cores.allocated,
            d.cpu_cores.used,
            i.cpu_cores.allocated,
        ),
        (
            "Memory GB",
            quota.memory_gb,
            borrow.memory_gb,
            d.memory_mb.allocated / 1024.0,
            d.memory_mb.used / 1024.0,
            i.memory_mb.allocated / 1024.0,
        ),
        (
            "Disk GB",
            quota.disk_gb,
            borrow.disk_gb,
            d.disk_mb.allocated / 1024.0,
            d.disk_mb.used / 1024.0,
            i.disk_mb.allocated / 1024.0,
        ),
    ];
    html! {
        table.dims {
            thead { tr { th { "" } th { "guarantee" } th { "borrowing limit" } th { "allocated" } th { "used" } th { "idle" } } }
            tbody { @for (label, q, b, a, u, idle) in rows {
                tr { th { (label) } td { (limit(q)) } td { (limit(b)) } td { (format!("{a:.1}")) } td { (format!("{u:.1}")) }
                     td.idle[idle > 0.0] { (format!("{idle:.1}")) } }
            } }
        }
    }
}

/// GET /tenants
#[utoipa::path(get, path = "/tenants", tag = "portal", operation_id = "portal_tenants",
    description = "The portal's tenants: guarantee, borrowing limit, allocated, used and idle per dimension, idle warnings, cost for a period.",
    params(
        ("from" = Option<String>, Query, description = "the cost period's start (default: this month)"),
        ("to" = Option<String>, Query, description = "the cost period's end (default: now)"),
        ("tenant" = Option<String>, Query, description = "only this tenant"),
        Live),
    responses(
        PageAnswers,
        (status = 400, description = "a bad from or to (named)", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let user = viewer.user();
    let views = match user.operator() {
        Some(op) => tenants::list(&st, &op).await?.tenants,
        None => match viewer.tenant() {
            Some(t) => vec![tenants::get(&st, &user, t).await?],
            None => Vec::new(),
        },
    };
    let mut views = views;
    if let Some(only) = q.get("tenant").filter(|t| !t.is_empty()) {
        views.retain(|t| &t.name == only);
    }
    let all = views.len();
    views.truncate(SHOWN);
    let util = usage::utilization(&st, &user).await?;
    let pool = usage::pool_metrics(&st, &user).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), caldera_spec::time::month_start_ms)?;
    let warn_q = EventQuery {
        kind: Some(EventKind::IdleWarning),
        cursor: st.cp.last_event_seq().saturating_sub(5_000),
        limit: 1000,
        ..EventQuery::default()
    };
    let warnings = events::list(&st, &user, warn_q).await?.events;
    let mut cards = Vec::new();
    for t in &views {
        let tenant = tenants::find(&st, &user, &t.name).await?;
        let (_, rep) = usage::cost(&st, &tenant, from, to, GroupBy::Task).await?;
        let total = crate::routes::cost_views::cost_line(&rep.total);
        let mine: Vec<_> = warnings
            .iter()
            .rev()
            .filter(|e| e.event.tenant.as_deref() == Some(t.name.as_str()))
            .take(5)
            .collect();
        let csv_href = format!(
            "/tenants/{}/cost.csv?from={from}&to={to}",
            url_part(&t.name)
        );
        cards.push(html! {
            section.tenant data-tenant=(t.name) {
                h2 { (t.name) }
                (dims_table(&t.quota, &t.borrowing_limit, line(&util.by_tenant, &t.name), line(&pool.idle, &t.name)))
                @if let Some(b) = line(&pool.borrowed, &t.name) {
                    @if b.gpus.allocated > 0.0 || b.cpu_cores.allocated > 0.0 {
                        p.note { "Borrowed now: " (format!("{:.1}", b.gpus.allocated)) " GPUs, " (gb(b.gpu_memory_mb.allocated)) " GPU memory" }
                    }
                }
                @for w in &mine { p.warning data-seq=(w.event.seq) { (kind_name(&EventKind::IdleWarning)) ": " (w.event.message) } }
                p.cost { "Cost " (caldera_spec::time::rfc3339(from)) " – " (caldera_spec::time::rfc3339(to)) ": "
                    strong { (total.allocated_cost) " " (st.cp.prices().currency) }
                    " (idle " (total.idle_cost) ", borrowed " (total.borrowed_cost) "; " (format!("{:.2}", total.gpu_hours)) " GPU-hours) · "
                    a.cost-csv href=(csv_href) { "CSV" } }
            }
        });
    }
    let fixed = html! {
        form.filters #cost-period method="get" action="/tenants" {
            label { "cost from " input #cost-from name="from" value=(caldera_spec::time::rfc3339(from)); }
            label { "to " input #cost-to name="to" value=(caldera_spec::time::rfc3339(to)); }
            button #cost-show type="submit" { "Show" }
            " "
            @if let Some(t) = viewer.tenant() {
                a #cost-csv href=(format!("/tenants/{}/cost.csv?from={from}&to={to}", url_part(t))) { "CSV of this period" }
            }
        }
    };
    let overall = match user.operator() {
        None => html! {},
        Some(op) => {
            let (_, total) = usage::cost_all(&st, &op, from, to).await?;
            let total = crate::routes::cost_views::cost_line(&total);
            html! {
                p.cost #cost-total { "All tenants, " (caldera_spec::time::rfc3339(from)) " – " (caldera_spec::time::rfc3339(to)) ": "
                    strong { (total.allocated_cost) " " (st.cp.prices().currency) }
                    " (idle " (total.idle_cost) ", borrowed " (total.borrowed_cost) "; " (format!("{:.2}", total.gpu_hours)) " GPU-hours, "
                    (total.allocations) " allocations)" }
            }
        }
    };
    let live = html! {
        (overall)
        @for c in cards { (c) }
        @if all > SHOWN { p.note { "Showing " (SHOWN) " of " (all) " tenants: pick one with ?tenant=NAME." } }
    };
    Ok(render.page(
        |live| page(&viewer, Nav::Tenants, "Tenants", fixed, live),
        live,
    ))
}

/// GET /tenants/{name}/cost.csv
#[utoipa::path(get, path = "/tenants/{name}/cost.csv", tag = "portal", operation_id = "portal_cost_csv",
    description = "A tenant's cost over a period as CSV (the same report as GET /v1/tenants/{name}/cost with Accept: text/csv).",
    params(("name" = String, Path, description = "the tenant"),
        ("from" = Option<String>, Query, description = "start (default: this month)"),
        ("to" = Option<String>, Query, description = "end (default: now)")),
    responses(
        (status = 200, description = "the CSV", content_type = "text/csv", body = String),
        (status = 303, description = "no session: on to the login page"),
        (status = 401, description = "fragment=live without a session (the script then goes to the login)", content_type = "text/html", body = String),
        (status = 400, description = "a bad from or to", content_type = "text/html", body = String),
        (status = 404, description = "no such tenant (or another tenant's)", content_type = "text/html", body = String),
    ))]
pub async fn cost_csv(
    viewer: Viewer,
    st: web::Data<AppState>,
    name: web::Path<String>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let tenant = tenants::find(&st, &viewer.user(), &name).await?;
    let (from, to) = period::parse(&q, st.cp.now_ms(), caldera_spec::time::month_start_ms)?;
    let csv = usage::cost_csv(&st, &tenant, from, to, GroupBy::Task).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            actix_web::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"cost-{}.csv\"", url_part(&name)),
        ))
        .body(csv))
}
