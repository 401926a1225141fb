//! `GET /models`: every model version the viewer may see, its state, where
//! it is warm (each node's copy), and the tasks that use it (`GET
//! /v1/models`), the services' model swaps with their progress, and its retirement: the operator's retire form, or the
//! retire order and who still uses the version.
use super::auth::Viewer;
use super::error::PortalError;
use super::layout::{page, Nav};
use super::respond::{Live, PageAnswers, Render};
use crate::api::{self, tasks::TaskListQuery};
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use maud::html;

/// GET /models
#[utoipa::path(
    get,
    path = "/models",
    tag = "portal",
    operation_id = "portal_models",
    description = "The portal's model versions: state, where each is warm, which tasks use it.",
    params(Live),
    responses(PageAnswers,)
)]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let all = api::models::list(&st, &viewer.user()).await;
    let swaps = swaps(&viewer, &st).await?;
    let live = html! {
        (swaps)
        @if all.is_empty() { p.note { "No model version is registered." } }
        table.models {
            thead { tr { th { "version" } th { "state" } th { "size" } th { "warm on" } th { "origin reads now" } th { "used by" } th { "" } } }
            tbody {
                @for m in &all { @for v in &m.versions {
                    tr data-model-version=(format!("{}:{}", v.name, v.version)) data-state=(v.state) {
                        td { (v.name) ":" (v.version) @if v.pinned { " " span.state { "pinned" } }
                            @if let Some(o) = &v.owner { br; small.note { "owner " (o) } } }
                        td { span class=(format!("state {}", v.state)) { (v.state) } }
                        td { (format!("{:.1} GB", v.weights.size_bytes as f64 / 1e9)) }
                        td { @for c in &v.nodes {
                            span.copy data-node=(c.node) data-copy=(c.copy) { (c.node) " (" (c.copy)
                                @if c.copy != "verified" && v.weights.size_bytes > 0 {
                                    " " (format!("{:.0}%", c.bytes_done as f64 / v.weights.size_bytes as f64 * 100.0))
                                } ")" } " "
                        } }
                        td { (v.origin_pulls_now) }
                        td { @for t in v.tasks.iter().take(20) { code { (t) } " " } @if v.tasks.len() > 20 { "…" } }
                        td.retire-slot { (super::model_actions::retire_cell(&viewer, v)) }
                    }
                } }
            }
        }
    };
    Ok(render.page(
        |live| page(&viewer, Nav::Models, "Models", html! {}, live),
        live,
    ))
}

/// Inference services read for the swap table at most (one page of the API's list).
const SERVICES_READ: usize = 1000;

/// The swaps of the viewer's services: those under way first, then the
/// ended ones, each with its phase and how many replicas are through. Read
/// from the records themselves: the table needs no queue positions or views.
async fn swaps(viewer: &Viewer, st: &AppState) -> Result<maud::Markup, PortalError> {
    let query = TaskListQuery {
        task_type: Some(caldera_spec::TaskType::Inference),
        limit: SERVICES_READ,
        ..TaskListQuery::default()
    };
    let services = api::tasks::records(st, &viewer.user(), query).await?;
    let mut swapping: Vec<(Service, caldera_spec::SwapProgress)> = services
        .into_iter()
        .filter_map(|r| {
            let s = r.swap?;
            let task_id = caldera_spec::local_id(&r.spec.task_id).to_string();
            Some((
                Service {
                    task_id,
                    tenant: r.tenant,
                },
                s,
            ))
        })
        .collect();
    swapping.sort_by_key(|(_, s)| (s.phase.is_over(), std::cmp::Reverse(s.started_ms)));
    let now = st.cp.now_ms();
    Ok(html! {
        section #swaps {
            h2 { "Model swaps" }
            @if swapping.is_empty() { p.note { "No service has been swapped." } }
            @else {
                table.swaps {
                    thead { tr { th { "service" } th { "from → to" } th { "phase" } th { "replicas through" } th { "started" } th { "why" } } }
                    tbody { @for (t, s) in swapping.iter().take(50) {
                        tr data-service=(t.task_id) data-phase=(s.phase.as_str()) {
                            td { a href=(super::tasks::task_href(&t.task_id, &t.tenant)) { (t.task_id) } " " small.note { (t.tenant) } }
                            td { (s.from) " → " (s.to) }
                            td { span class=(format!("state {}", s.phase.as_str())) { (s.phase.as_str()) } }
                            td { (s.replicas.iter().filter(|r| r.step == caldera_spec::SwapStep::Done).count()) " / " (s.replicas.len()) }
                            td { (super::layout::age(now.saturating_sub(s.started_ms))) " ago" }
                            td { @if let Some(r) = &s.reason { (r) } }
                        }
                    } }
                }
            }
        }
    })
}

/// A service of the swap table, by its tenant's own id.
struct Service {
    task_id: String,
    tenant: String,
}
