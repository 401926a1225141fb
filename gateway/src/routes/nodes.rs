//! Nodes: inventory, health, allocation and live metrics.
use crate::api::nodes as api;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::{Operator, User};
use crate::state::AppState;
use actix_web::web;
use caldera_actors::control_plane::CordonChange;
pub use caldera_spec::views::{Allocations, NodeList, NodeView};
use caldera_spec::Envelope;

/// GET /v1/nodes
#[utoipa::path(get, path = "/v1/nodes", tag = "nodes",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "every node", body = Envelope<NodeList>)))]
pub async fn list(user: User, st: web::Data<AppState>) -> Result<Reply<NodeList>, ApiError> {
    Ok(Reply::ok(api::list(&st, &user).await?))
}

/// GET /v1/nodes/{name}
#[utoipa::path(get, path = "/v1/nodes/{name}", tag = "nodes",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "the node, with its weight cache (a tenant sees the copies of the versions it may use only, `used_bytes` counts those alone and the counters read 0: the node's totals are the operator's)", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
    ))]
pub async fn get(
    user: User,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    Ok(Reply::ok(api::get(&st, &user, &name).await?))
}

/// GET /v1/allocations (operator): the Scheduler's ledger and sled's copy of
/// it, so the ledger can be checked against the tasks' states. Ids as every
/// view shows them (the tenant's own, beside the `tenant` field), so they
/// compare with `GET /v1/tasks/{id}?tenant=`.
#[utoipa::path(get, path = "/v1/allocations", tag = "nodes",
    security(("operator" = [])),
    responses((status = 200, description = "the ledger and its stored copy", body = Envelope<Allocations>)))]
pub async fn allocations(
    op: Operator,
    st: web::Data<AppState>,
) -> Result<Reply<Allocations>, ApiError> {
    Ok(Reply::ok(api::allocations(&st, &op).await?))
}

/// POST /v1/nodes/{name}/revoke (operator): the node's secret stops working
/// and its live session is closed; its tasks are handled as on node loss.
#[utoipa::path(post, path = "/v1/nodes/{name}/revoke", tag = "nodes",
    description = "Revokes the node's secret and closes its session; its tasks are handled as on node loss.",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the node, revoked", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
    ))]
pub async fn revoke(
    op: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    Ok(Reply::ok(api::revoke(&st, &op, &name).await?))
}

/// POST /v1/nodes/{name}/rotate-secret (operator): a new node secret,
/// handed to the agent over its live session; the old one stops opening
/// sessions at once. 409 when the node has no live session (revoke it then).
#[utoipa::path(post, path = "/v1/nodes/{name}/rotate-secret", tag = "nodes",
    description = "Rotates the node's secret over its live session; the old secret stops working at once.",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the node, with its new secret handed over", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
        (status = 409, description = "the node has no live session, or is revoked"),
    ))]
pub async fn rotate_secret(
    op: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    Ok(Reply::ok(api::rotate_secret(&st, &op, &name).await?))
}

/// POST /v1/nodes/{name}/cordon (operator): no new placements on the node;
/// what runs there stays.
#[utoipa::path(post, path = "/v1/nodes/{name}/cordon", tag = "nodes",
    description = "No new placements on the node; what runs there stays.",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the node, cordoned", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
    ))]
pub async fn cordon(
    op: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    let node = api::change_cordon(&st, &op, &name, CordonChange::Cordon).await?;
    Ok(Reply::ok(node))
}

/// POST /v1/nodes/{name}/drain (operator): cordon, and move its work away as
/// a planned stop (training checkpoints and resumes elsewhere, reservations
/// and replicas are placed again; no retry spent).
#[utoipa::path(post, path = "/v1/nodes/{name}/drain", tag = "nodes",
    description = "Cordons the node and moves its work away as a planned stop.",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the node, draining", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
    ))]
pub async fn drain(
    op: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    let node = api::change_cordon(&st, &op, &name, CordonChange::Drain).await?;
    Ok(Reply::ok(node))
}

/// POST /v1/nodes/{name}/uncordon (operator): placements there again.
#[utoipa::path(post, path = "/v1/nodes/{name}/uncordon", tag = "nodes",
    description = "Placements on the node again.",
    params(("name" = String, Path, description = "the node")),
    security(("operator" = [])),
    responses(
        (status = 200, description = "the node, uncordoned", body = Envelope<NodeView>),
        (status = 404, description = "no such node"),
    ))]
pub async fn uncordon(
    op: Operator,
    st: web::Data<AppState>,
    name: web::Path<String>,
) -> Result<Reply<NodeView>, ApiError> {
    let node = api::change_cordon(&st, &op, &name, CordonChange::Uncordon).await?;
    Ok(Reply::ok(node))
}
