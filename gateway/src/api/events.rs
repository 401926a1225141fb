//! The allocation history and audit trail, paged by sequence. A tenant
//! reads only its own tenant's events; a page examines a bounded number of
//! events, and `next_cursor` is set whenever there may be more (a full
//! page, or a read that stopped at its budget).
use super::query::query_page;
use crate::error::ApiError;
use crate::principal::User;
use crate::state::AppState;
use caldera_actors::control_plane::EventFilter;
use caldera_spec::time::rfc3339;
use caldera_spec::views::{EventPage, EventView};
use caldera_spec::EventKind;
use std::collections::HashMap;

/// Which events a page wants, and where it starts.
#[derive(Debug, Clone, Default)]
pub struct EventQuery {
    /// A task's id (the caller's own; the operator: `tenant/id`, or an id
    /// one tenant holds).
    pub task: Option<String>,
    /// A tenant (a tenant token may name only its own; [`list`] checks it).
    pub tenant: Option<String>,
    pub node: Option<String>,
    pub kind: Option<EventKind>,
    /// The seq of the last event seen (0: from the start).
    pub cursor: u64,
    /// 1..=1000.
    pub limit: usize,
}

impl EventQuery {
    /// `?task=&tenant=&node=&kind=&cursor=&limit=` of `GET /v1/events`,
    /// each bad one named, checked in this order: the kind, the tenant (for
    /// `caller`), the task (an operator's id several tenants hold is a
    /// 409), then the page.
    pub async fn from_query(
        st: &AppState,
        caller: &User,
        q: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let kind = match q.get("kind") {
            None => None,
            Some(k) => Some(parse_kind(k)?),
        };
        let tenant = own_tenant(caller, q.get("tenant").cloned())?;
        let task = match (q.get("task"), &tenant) {
            // The operator's id without a tenant: its key, which [`list`]
            // takes as it is.
            (Some(id), None) if !id.contains('/') => Some(operator_task_key(st, id).await?),
            (task, _) => task.cloned(),
        };
        let (cursor, limit) = query_page(q, "cursor", "cursor is the seq of the last event seen")?;
        Ok(EventQuery {
            task,
            tenant,
            node: q.get("node").cloned(),
            kind,
            cursor,
            limit,
        })
    }
}

/// `?kind=`: an event kind by its JSON name.
fn parse_kind(k: &str) -> Result<EventKind, ApiError> {
    serde_json::from_value(serde_json::Value::String(k.to_string()))
        .map_err(|_| ApiError::bad_query("kind", format!("unknown event kind {k:?}")))
}

/// The tenant whose events a caller reads: a tenant token's own (naming
/// another is refused), or the one the operator names, if any.
fn own_tenant(caller: &User, asked: Option<String>) -> Result<Option<String>, ApiError> {
    match caller.tenant() {
        None => Ok(asked),
        Some(t) if asked.as_deref().is_some_and(|a| a != t) => Err(ApiError::forbidden(
            "a tenant token reads only its own tenant's events",
        )),
        Some(t) => Ok(Some(t.to_string())),
    }
}

/// A page of the events the caller may see, each with its time in RFC 3339
/// and its task by the tenant's own id.
pub async fn list(st: &AppState, caller: &User, query: EventQuery) -> Result<EventPage, ApiError> {
    let tenant = own_tenant(caller, query.tenant)?;
    // Events are indexed by task key (`tenant/id`); the caller names its own id.
    let task = match (query.task, &tenant) {
        (None, _) => None,
        (Some(id), Some(t)) => Some(caldera_spec::task_key(t, &id)),
        (Some(key), None) if key.contains('/') => Some(key),
        (Some(id), None) => Some(operator_task_key(st, &id).await?),
    };
    let filter = EventFilter {
        task,
        tenant,
        node: query.node,
        kind: query.kind,
    };
    let limit = query.limit;
    let page = st.cp.events(filter, query.cursor, limit).await?;
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
    Ok(EventPage {
        events,
        next_cursor: next,
    })
}

/// The operator's task id without a tenant: the key of the one tenant's
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
