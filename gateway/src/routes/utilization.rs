//! GET /v1/utilization: capacity, allocated and measured use per dimension.
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::views::Utilization;
use caldera_spec::Envelope;

/// GET /v1/utilization
#[utoipa::path(get, path = "/v1/utilization", tag = "nodes", operation_id = "utilization",
    description = "Capacity, allocated and measured use per dimension (a tenant sees only its own line per tenant).",
    security(("operator" = []), ("tenant" = [])),
    responses((status = 200, description = "the pool's use", body = Envelope<Utilization>)))]
pub async fn get(user: User, st: web::Data<AppState>) -> Result<Reply<Utilization>, ApiError> {
    Ok(Reply::ok(crate::api::usage::utilization(&st, &user).await?))
}
