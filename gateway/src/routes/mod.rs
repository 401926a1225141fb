//! REST routes under /v1, the node WebSocket and health.
pub mod events;
pub mod health;
pub mod nodes;
pub mod tasks;
pub mod tenants;
pub mod utilization;

use crate::error::ApiError;
use actix_web::web;
use caldera_spec::codes;
use std::collections::HashMap;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/metrics", web::get().to(health::metrics))
        .route("/v1/tasks", web::post().to(tasks::submit))
        .route("/v1/tasks", web::get().to(tasks::list))
        .route("/v1/tasks/{id}", web::get().to(tasks::get))
        .route("/v1/tasks/{id}/release", web::post().to(tasks::release))
        .route("/v1/tasks/{id}/logs", web::get().to(tasks::logs))
        .route("/v1/nodes/connect", web::get().to(crate::ws::connect))
        .route("/v1/nodes", web::get().to(nodes::list))
        .route("/v1/nodes/{name}", web::get().to(nodes::get))
        .route("/v1/nodes/{name}/revoke", web::post().to(nodes::revoke))
        .route("/v1/utilization", web::get().to(utilization::get))
        .route("/v1/tenants", web::post().to(tenants::create))
        .route("/v1/tenants", web::get().to(tenants::list))
        .route("/v1/tenants/{name}", web::get().to(tenants::get))
        .route(
            "/v1/tenants/{name}/quota",
            web::put().to(tenants::set_quota),
        )
        .route("/v1/tenants/{name}/usage", web::get().to(tenants::usage))
        .route("/v1/tasks/{id}/replicas", web::put().to(tasks::scale))
        .route("/v1/events", web::get().to(events::list))
        .route("/v1/allocations", web::get().to(nodes::allocations))
        .default_service(web::to(|| async {
            Err::<actix_web::HttpResponse, _>(ApiError::new(
                &codes::NOT_FOUND,
                "no such path; see the API table in the README",
            ))
        }));
}

/// The query string of a request, as names to values.
pub type Query = web::Query<HashMap<String, String>>;

/// Parses an optional numeric query parameter in `1..=max`, naming it when it is bad.
pub fn query_num(
    q: &HashMap<String, String>,
    key: &str,
    default: u64,
    max: u64,
) -> Result<u64, ApiError> {
    match q.get(key) {
        None => Ok(default),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= 1 && n <= max => Ok(n),
            _ => Err(ApiError::bad_query(
                key,
                format!("{key} must be a number from 1 to {max}, not {v:?}"),
            )),
        },
    }
}
