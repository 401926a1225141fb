//! Nodes: inventory, health, allocation and live metrics.
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::errors::ActorError;
use caldera_actors::protocol::node::NodeSnapshot;
use caldera_actors::protocol::scheduler::AllocatedByNode;
use caldera_actors::views::NodeView;

async fn views(st: &AppState, only: Option<&str>) -> Result<Vec<NodeView>, ActorError> {
    let mut nodes = st.shared.registry.nodes();
    nodes.retain(|(name, _)| only.is_none_or(|o| o == name));
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    // All snapshots are asked at once: a thousand nodes cost one round of
    // mailbox turns, not a thousand in a row.
    let snapshots = futures_util::future::join_all(nodes.iter().map(|(_, a)| a.send(NodeSnapshot)));
    let (allocated, snapshots) =
        futures_util::future::join(st.shared.scheduler.send(AllocatedByNode), snapshots).await;
    let allocated = allocated?;
    let mut out = Vec::with_capacity(nodes.len());
    for ((name, _), snap) in nodes.iter().zip(snapshots) {
        let (rec, connected, metrics) = snap?;
        let alloc = allocated.get(name).cloned().unwrap_or_default();
        out.push(NodeView::build(&rec, connected, &metrics, &alloc));
    }
    Ok(out)
}

/// GET /v1/nodes
pub async fn list(req: HttpRequest, st: web::Data<AppState>) -> HttpResponse {
    if let Err(r) = auth::user(&req, &st) {
        return r;
    }
    match views(&st, None).await {
        Ok(v) => envelope::ok(200, serde_json::json!({"nodes": v})),
        Err(e) => envelope::err(&e),
    }
}

/// GET /v1/nodes/{name}
pub async fn get(
    req: HttpRequest,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> HttpResponse {
    if let Err(r) = auth::user(&req, &st) {
        return r;
    }
    match views(&st, Some(&name)).await {
        Ok(mut v) if !v.is_empty() => envelope::ok(200, v.remove(0)),
        Ok(_) => envelope::not_found("node", &name),
        Err(e) => envelope::err(&e),
    }
}
