//! `POST /v1/tasks/{id}/model`: a hot swap of a service's model version in
//! place.
use super::tasks::{find, TenantParam};
use super::Query;
use crate::api::swap as api;
use crate::body;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_spec::{Envelope, SwapAnswer};
use utoipa::ToSchema;

/// `POST /v1/tasks/{id}/model`.
#[derive(ToSchema)]
#[allow(dead_code)] // a schema only: `parse_swap` reads the body
pub struct SwapBody {
    /// The version to serve, `name:version`: registered, visible to the
    /// tenant, and neither retiring nor retired.
    #[schema(example = "llama:v4")]
    model: String,
    /// A 1-replica service may be swapped with a gap in service (default false).
    allow_downtime: Option<bool>,
    /// 0 or 1 (default 0). 1, for a 1-replica service without
    /// `allow_downtime`: NOT in place — one extra replica of the service's
    /// shape is allocated on the new version for the swap's duration, on
    /// free capacity checked now (none: 409 swap_no_surge_room); once it
    /// is ready the old replica is released, else it is released and the
    /// old one keeps serving. Ignored for 2 or more replicas (in place).
    #[schema(minimum = 0, maximum = 1)]
    max_surge: Option<u32>,
}

/// POST /v1/tasks/{id}/model?tenant= {"model": "name:v4"} — swap a service's model in place.
#[utoipa::path(post, path = "/v1/tasks/{id}/model", tag = "tasks",
    description = "Swaps an inference service to another model version IN PLACE: replica by replica, the new version is warmed into the replica's node cache while the old process serves, then the process is restarted on the new version on the same allocation (same allocation id, same GPUs, no new placement, no quota change), and the next replica goes once this one passes its readiness probe. \
The rule: with 2 or more replicas a replica is swapped only while another is ready, so the service never has zero ready replicas; with 1 replica the swap is refused (409 swap_needs_replicas) unless `allow_downtime` is true, or `max_surge` is 1 and free capacity holds one extra replica now. \
`max_surge: 1` (1 replica, no `allow_downtime`) is not in place: the swap allocates one extra replica of the service's shape, on the new version, for its duration. Free capacity for it is checked on the request with the Scheduler's read-only dry run (no room: 409 swap_no_surge_room naming what is missing, nothing recorded); the swap is then recorded with a `surge: true` replica entry and the surge replica started; once it runs and is ready the swap is done and the old replica released; if it ends, cannot be placed, or is not ready within the probe's `ready_timeout_s`, it is released, the old replica keeps serving, and the swap is rolled_back with the reason. \
A replica not ready on the new version within its probe's `ready_timeout_s` (default 300), a failed swap, or a replica that stops after its swap rolls the swap back: every replica already swapped returns to the old version, and an event names the replica and why. Progress: the task's `swap` object, `caldera status`, and `service.model_swap` events.",
    params(("id" = String, Path, description = "the service's id"), TenantParam),
    request_body = SwapBody,
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 202, description = "the swap is recorded and runs replica by replica", body = Envelope<SwapAnswer>),
        (status = 200, description = "the service already serves that version: nothing to do", body = Envelope<SwapAnswer>),
        (status = 400, description = "the body is not {\"model\": \"name:version\", ...}; the field is named"),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 404, description = "no such task (or another tenant's)"),
        (status = 409, description = "not a live service, a swap already running (swap_in_progress), 1 replica without allow_downtime or max_surge (swap_needs_replicas), max_surge 1 with no free room for the surge replica (swap_no_surge_room), or a replica not running (swap_not_ready)"),
        (status = 422, description = "the version is not registered or not visible (unknown_model), or retiring/retired (model_not_accepting)"),
    ))]
pub async fn swap(
    user: User,
    st: web::Data<AppState>,
    id: web::Path<String>,
    q: Query,
    payload: web::Payload,
) -> Result<Reply<SwapAnswer>, ApiError> {
    let task = find(&user, &st, &q, &id).await?;
    let body = body::read(payload, st.body_limit).await?;
    let req = caldera_actors::control_plane::swap::parse_swap(&body)?;
    Ok(match api::swap(&st, &user, &task, req).await? {
        a @ SwapAnswer::Started { .. } => {
            Reply::with_status(actix_web::http::StatusCode::ACCEPTED, a)
        }
        a => Reply::ok(a),
    })
}
