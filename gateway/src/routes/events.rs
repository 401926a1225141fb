//! GET /v1/events: the allocation history and audit trail, paged by sequence.
//! A page examines a bounded number of events; `next_cursor` is set whenever
//! there may be more (a full page, or a read that stopped at its budget).
use super::Query;
use crate::api::events as api;
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
pub use caldera_spec::views::{EventPage, EventView};
use caldera_spec::Envelope;

/// `GET /v1/events` filters.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventFilterQuery {
    /// A task's id (the operator: `tenant/id`, or an id one tenant holds).
    pub task: Option<String>,
    /// A tenant (a tenant token: only its own).
    pub tenant: Option<String>,
    /// A node.
    pub node: Option<String>,
    /// An event kind (`task_transition`, `allocation_granted`, …).
    pub kind: Option<caldera_spec::EventKind>,
    /// The `seq` of the last event seen.
    #[param(minimum = 0)]
    pub cursor: Option<u64>,
    /// Events per page (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

#[utoipa::path(get, path = "/v1/events", tag = "events",
    description = "The allocation history and audit trail, paged by sequence.",
    params(EventFilterQuery),
    security(("operator" = []), ("tenant" = [])),
    responses(
        (status = 200, description = "a page of events", body = Envelope<EventPage>),
        (status = 400, description = "a bad cursor, limit or kind"),
        (status = 403, description = "a tenant token naming another tenant"),
        (status = 409, description = "the operator named a task id several tenants use"),
    ))]
pub async fn list(
    user: User,
    st: web::Data<AppState>,
    q: Query,
) -> Result<Reply<EventPage>, ApiError> {
    let query = api::EventQuery::from_query(&st, &user, &q).await?;
    Ok(Reply::ok(api::list(&st, &user, query).await?))
}
