//! Nodes: inventory, health, allocation and live metrics.
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::errors::ActorError;
use caldera_actors::node::NodeSnapshot;
use caldera_actors::scheduler::AllocatedByNode;
use caldera_actors::views::NodeView;

async fn views(st: &AppState, only: Option<&str>) -> Result<Vec<NodeView>, ActorError> {
    let allocated = st.shared.scheduler.send(AllocatedByNode).await?;
    let mut out = Vec::new();
    let mut nodes = st.shared.registry.nodes();
    nodes.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, addr) in nodes {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let (rec, connected, metrics) = addr.send(NodeSnapshot).await?;
        let alloc = allocated.get(&name).cloned().unwrap_or_default();
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
