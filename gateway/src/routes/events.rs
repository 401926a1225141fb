//! GET /v1/events: the allocation history and audit trail, paged by sequence.
use super::query_num;
use crate::auth;
use crate::envelope;
use crate::state::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use caldera_actors::tokens::Principal;
use caldera_spec::time::rfc3339;
use caldera_storage::EventFilter;
use std::collections::HashMap;

pub async fn list(
    req: HttpRequest,
    st: web::Data<AppState>,
    q: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let p = match auth::user(&req, &st) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let mut filter = EventFilter {
        task: q.get("task").cloned(),
        tenant: q.get("tenant").cloned(),
        node: q.get("node").cloned(),
        kind: None,
    };
    if let Principal::Tenant(t) = &p {
        if filter.tenant.as_ref().is_some_and(|asked| asked != t) {
            return envelope::forbidden("a tenant token reads only its own tenant's events");
        }
        filter.tenant = Some(t.clone());
    }
    let cursor = match q.get("cursor") {
        None => 0,
        Some(c) => match c.parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                return envelope::bad_query("cursor", "cursor is the seq of the last event seen")
            }
        },
    };
    let limit = match query_num(&q, "limit", 100, 1000) {
        Ok(n) => n as usize,
        Err(r) => return r,
    };
    match caldera_actors::cluster::store(&st.shared).events(&filter, cursor, limit) {
        Ok(events) => {
            let next = if events.len() == limit {
                events.last().map(|e| e.seq)
            } else {
                None
            };
            let out: Vec<serde_json::Value> = events
                .iter()
                .map(|e| {
                    let mut v = serde_json::to_value(e).unwrap_or_default();
                    v["at"] = serde_json::Value::String(rfc3339(e.at_ms));
                    v
                })
                .collect();
            envelope::ok(200, serde_json::json!({"events": out, "next_cursor": next}))
        }
        Err(e) => envelope::err(&e.into()),
    }
}
