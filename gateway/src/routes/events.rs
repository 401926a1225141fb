//! GET /v1/events: the allocation history and audit trail, paged by sequence.
//! A page examines a bounded number of events; `next_cursor` is set whenever
//! there may be more (a full page, or a read that stopped at its budget).
use super::{query_page, Query};
use crate::envelope::Reply;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use actix_web::web;
use caldera_actors::control_plane::EventFilter;
use caldera_spec::time::rfc3339;
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
    let mut filter = EventFilter {
        task: q.get("task").cloned(),
        tenant: q.get("tenant").cloned(),
        node: q.get("node").cloned(),
        kind: match q.get("kind") {
            None => None,
            Some(k) => Some(parse_kind(k)?),
        },
    };
    if let Some(t) = user.tenant() {
        if filter.tenant.as_ref().is_some_and(|asked| asked != t) {
            return Err(ApiError::forbidden(
                "a tenant token reads only its own tenant's events",
            ));
        }
        filter.tenant = Some(t.to_string());
    }
    // Events are indexed by task key (`tenant/id`); the caller names its own id.
    filter.task = match (filter.task.take(), &filter.tenant) {
        (None, _) => None,
        (Some(id), Some(t)) => Some(caldera_spec::task_key(t, &id)),
        (Some(key), None) if key.contains('/') => Some(key),
        (Some(id), None) => Some(operator_task_key(&st, &id).await?),
    };
    let (cursor, limit) = query_page(&q, "cursor", "cursor is the seq of the last event seen")?;
    let page = st.cp.events(filter, cursor, limit).await?;
    let next = match page.resume_after {
        Some(seq) => Some(seq),
        None if page.events.len() == limit => page.events.last().map(|e| e.seq),
        None => None,
    };
    let events = page
        .events
        .into_iter()
        .map(|e| EventView {
            at: rfc3339(e.at_ms),
            event: e.for_its_tenant(),
        })
        .collect();
    Ok(Reply::ok(EventPage {
        events,
        next_cursor: next,
    }))
}

/// `?kind=`: an event kind by its JSON name.
fn parse_kind(k: &str) -> Result<caldera_spec::EventKind, ApiError> {
    serde_json::from_value(serde_json::Value::String(k.to_string()))
        .map_err(|_| ApiError::bad_query("kind", format!("unknown event kind {k:?}")))
}

/// The operator's `?task=ID` without `?tenant=`: the key of the one tenant's
/// task with that id; a 409 when several tenants hold it; the id as it is
/// when none does (the page is then empty).
async fn operator_task_key(st: &AppState, id: &str) -> Result<String, ApiError> {
    let mut keys = st.cp.task_keys_named(id).await?;
    match keys.len() {
        0 => Ok(id.to_string()),
        1 => Ok(keys.remove(0)),
        _ => Err(ApiError::new(
            &caldera_spec::codes::CONFLICT,
            format!("task id {id:?} is used by several tenants: add &tenant=NAME"),
        )),
    }
}
