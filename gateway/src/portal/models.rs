//! `GET /models`: every model version the viewer may see, its state, where
//! it is warm (each node's copy), and the tasks that use it (`GET
//! /v1/models`). The operator's retire button is wired by the swap/retire
//! work after its merge: each row keeps a `.retire-slot` for it.
use super::auth::Viewer;
use super::error::PortalError;
use super::layout::{page, Nav};
use super::respond::{Live, PageAnswers, Render};
use crate::routes::{models, Query};
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
    let all = models::list(viewer.user(), st.clone())
        .await?
        .into_data()
        .unwrap_or_default();
    let live = html! {
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
                        td.retire-slot {}
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
