//! `GET /nodes`: a card per node — its GPUs as memory bars split into the
//! slices held (fragmentation visible), health, epoch, isolation, the
//! runtime that runs its workloads (and what is missing where one is down),
//! cached model versions, the images it holds (the operator's view: an
//! image's name can tell one tenant's work to another) — and, for the
//! operator, cordon, drain and uncordon
//! (`POST /nodes/{name}/cordon`, through the API's own handlers).
use super::auth::{Form, Viewer};
use super::error::PortalError;
use super::layout::{csrf_field, gb, page, Nav};
use super::membar::{free_mb, gpu_bar, slices_on, spread};
use super::respond::{see_other, Live, PageAnswers, Render};
use crate::api::{self, query::query_num};
use crate::routes::Query;
use crate::state::AppState;
use actix_web::{web, HttpResponse};
use caldera_actors::control_plane::CordonChange;
use caldera_actors::views::NodeView;
use caldera_spec::Allocation;
use maud::{html, Markup};
use std::collections::BTreeMap;

/// Node cards a page shows: 100 nodes of 8 GPUs would pass 200 KB on one page.
pub const PAGE: usize = 20;

/// Node name -> the model versions with a copy there, and its state.
type Copies = BTreeMap<String, Vec<(String, String)>>;

fn card(viewer: &Viewer, n: &NodeView, ledger: &[Allocation], copies: &Copies) -> Markup {
    let slices = slices_on(&n.name, ledger, viewer.tenant(), None);
    let free: Vec<u64> = n
        .gpus
        .iter()
        .map(|g| {
            free_mb(
                g.memory_total_mb,
                slices.get(&g.index).map(Vec::as_slice).unwrap_or(&[]),
            )
        })
        .collect();
    let (free_total, pieces, largest) = spread(&free);
    html! {
        div.card data-node=(n.name) data-state=(n.state) {
            h3 { (n.name) " " span class=(format!("state {}", n.state)) { (n.state) }
                @if let Some(c) = &n.cordon { " " span.state.cordon { (c) } }
                @if !n.connected { " " span.state.lost { "disconnected" } } }
            p.note { "epoch " (n.epoch) " · " (n.allocations) " allocations · isolation: " (n.isolation)
                @if n.simulated { " · simulated GPUs" } }
            p.note.runtime { "Runtime: " strong { (n.runtime) }
                @for r in n.runtimes.iter().filter(|r| !r.up) {
                    " · " (r.engine) " down"
                    @if !r.detail.is_empty() { ": " (r.detail) }
                }
            }
            p.note { "CPU " (format!("{:.1}", n.cpu_free_milli as f64 / 1000.0)) " of " (n.cpu_cores) " cores free · memory "
                (gb(n.memory_free_mb as f64)) " of " (gb(n.memory_total_mb as f64)) " free · disk "
                (gb(n.disk_free_mb as f64)) " of " (gb(n.disk_offered_mb as f64)) " free" }
            @if !n.gpus.is_empty() {
                p.note.fragmentation { "GPU memory free: " (gb(free_total as f64)) " on " (pieces) " GPUs, at most " (gb(largest as f64)) " on one" }
            }
            @for g in &n.gpus {
                (gpu_bar(g.index, &g.model, g.memory_total_mb, slices.get(&g.index).map(Vec::as_slice).unwrap_or(&[])))
            }
            p.note.models { "Cached model versions: "
                @match copies.get(&n.name) {
                    None => { "none" }
                    Some(vs) => { @for (i, (v, state)) in vs.iter().enumerate() { @if i > 0 { ", " } (v) " (" (state) ")" } }
                }
            }
            @if let Some(r) = n.images.as_ref().filter(|r| r.known) { (images_line(r)) }
            @if viewer.is_operator() {
                form.node-actions method="post" action=(format!("/nodes/{}/cordon", super::tasks::url_part(&n.name))) {
                    (csrf_field(viewer))
                    button.secondary id=(format!("cordon-{}", n.name)) name="action" value="cordon" type="submit" { "Cordon" }
                    " "
                    button.danger id=(format!("drain-{}", n.name)) name="action" value="drain" type="submit" { "Drain" }
                    " "
                    button.secondary id=(format!("uncordon-{}", n.name)) name="action" value="uncordon" type="submit" { "Uncordon" }
                }
            }
        }
    }
}

/// The images a node holds: each name with its size, and whether a
/// container uses it; then the managed bytes against the cap.
fn images_line(r: &caldera_spec::images::ImageReport) -> Markup {
    let mib = |b: u64| match b as f64 / 1_048_576.0 {
        mb if mb < 1024.0 => format!("{mb:.1} MB"),
        mb => gb(mb),
    };
    html! {
        p.note.images { "Images: "
            @if r.images.is_empty() { "none" }
            @for (i, e) in r.images.iter().enumerate() {
                @if i > 0 { ", " }
                @match e.names.first() {
                    Some(name) => { (name) },
                    None => { "<none> " (e.id.get(..12).unwrap_or(&e.id)) },
                }
                " (" (mib(e.size_bytes)) @if e.in_use > 0 { ", in use" } ")"
            }
            " · " (mib(r.managed_bytes)) " pulled here"
            @if r.capacity_bytes > 0 { " of " (mib(r.capacity_bytes)) } @else { ", no cap" }
            @if r.evictions > 0 { " · " (r.evictions) " evicted" }
        }
    }
}

/// Each node's model copies, from the versions the viewer may see.
pub async fn copies(viewer: &Viewer, st: &web::Data<AppState>) -> Result<Copies, PortalError> {
    let all = api::models::list(st, &viewer.user()).await;
    let mut by_node: Copies = BTreeMap::new();
    for m in &all {
        for v in &m.versions {
            for c in &v.nodes {
                by_node
                    .entry(c.node.clone())
                    .or_default()
                    .push((format!("{}:{}", v.name, v.version), c.copy.clone()));
            }
        }
    }
    Ok(by_node)
}

/// GET /nodes
#[utoipa::path(get, path = "/nodes", tag = "portal", operation_id = "portal_nodes",
    description = "The portal's node cards: GPU memory bars split into the slices held, health, epoch, isolation, cached model versions, images held (the operator's view).",
    params(
        ("node" = Option<String>, Query, description = "only this node's card"),
        ("page" = Option<u32>, Query, description = "which page of cards (from 1; 20 a page)"),
        Live),
    responses(
        PageAnswers,
        (status = 400, description = "a page out of range", content_type = "text/html", body = String),
    ))]
pub async fn page_handler(
    viewer: Viewer,
    st: web::Data<AppState>,
    q: Query,
) -> Result<HttpResponse, PortalError> {
    let render = Render::start(&q);
    let mut nodes = api::nodes::list(&st, &viewer.user()).await?.nodes;
    if let Some(only) = q.get("node").filter(|n| !n.is_empty()) {
        nodes.retain(|n| &n.name == only);
    }
    let pages = nodes.len().div_ceil(PAGE).max(1);
    let at = query_num(&q, "page", 1, pages as u64)? as usize;
    let shown = &nodes[(at - 1) * PAGE..(at * PAGE).min(nodes.len())];
    let ledger = api::nodes::ledger(&st, &viewer.user()).await?;
    let copies = copies(&viewer, &st).await?;
    let live = html! {
        @if nodes.is_empty() { p.note { "No node has joined yet." } }
        div.cards { @for n in shown { (card(&viewer, n, &ledger, &copies)) } }
        @if pages > 1 {
            p.pager { "Page " (at) " of " (pages) " (" (nodes.len()) " nodes) "
                @if at > 1 { a #nodes-prev href=(format!("/nodes?page={}", at - 1)) { "Previous" } }
                @if at < pages { a #nodes-next href=(format!("/nodes?page={}", at + 1)) { "Next" } } }
        }
    };
    Ok(render.page(
        |live| page(&viewer, Nav::Nodes, "Nodes", html! {}, live),
        live,
    ))
}

/// POST /nodes/{name}/cordon — `action=cordon|drain|uncordon`
#[utoipa::path(post, path = "/nodes/{name}/cordon", tag = "portal", operation_id = "portal_cordon",
    description = "The operator cordons, drains or uncordons a node from its card (POST /v1/nodes/{name}/cordon|drain|uncordon).",
    params(("name" = String, Path, description = "the node")),
    request_body(content = String, content_type = "application/x-www-form-urlencoded",
        description = "csrf, and action: cordon, drain or uncordon"),
    responses(
        (status = 303, description = "done (or no session): on to the nodes page (or the login)"),
        (status = 400, description = "not a form, or an unknown action", content_type = "text/html", body = String),
        (status = 403, description = "no or a wrong CSRF token, or a tenant's session", content_type = "text/html", body = String),
        (status = 404, description = "no such node", content_type = "text/html", body = String),
    ))]
pub async fn cordon(
    viewer: Viewer,
    st: web::Data<AppState>,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, PortalError> {
    let form = Form::checked(viewer, &st, payload).await?;
    let Some(op) = form.viewer.user().operator() else {
        return Err(PortalError::operator_only(
            "cordon, drain or uncordon a node",
        ));
    };
    let how = match form.field("action") {
        Some("cordon") => CordonChange::Cordon,
        Some("drain") => CordonChange::Drain,
        Some("uncordon") => CordonChange::Uncordon,
        other => {
            return Err(crate::ApiError::bad_query(
                "action",
                format!(
                    "action is cordon, drain or uncordon, not {:?}",
                    other.unwrap_or("")
                ),
            )
            .into())
        }
    };
    api::nodes::change_cordon(&st, &op, &name, how).await?;
    Ok(see_other("/nodes"))
}

#[cfg(test)]
mod image_tests {
    use super::images_line;
    use caldera_spec::images::{ImageEntry, ImageReport};

    #[test]
    fn a_card_lists_each_image_with_its_size_and_use_and_the_room_taken() {
        let r = ImageReport {
            known: true,
            capacity_bytes: 100 << 30,
            managed_bytes: 2 << 20,
            images: vec![
                ImageEntry {
                    id: "12f22dfac50100e1".into(),
                    names: vec!["registry.internal/a:1".into()],
                    size_bytes: 2 << 20,
                    in_use: 1,
                    managed: true,
                    ..ImageEntry::default()
                },
                ImageEntry {
                    id: "2a965f17ee80b786".into(),
                    size_bytes: 1 << 20,
                    ..ImageEntry::default()
                },
            ],
            evictions: 3,
        };
        let html = images_line(&r).into_string();
        assert!(
            html.contains("registry.internal/a:1 (2.0 MB, in use)"),
            "{html}"
        );
        assert!(
            html.contains("&lt;none&gt; 2a965f17ee80 (1.0 MB)"),
            "{html}"
        );
        assert!(html.contains("2.0 MB pulled here of 100.0 GB"), "{html}");
        assert!(html.contains("3 evicted"), "{html}");
    }
}
