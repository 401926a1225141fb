//! REST routes under /v1, the node WebSocket and health.
pub mod events;
#[cfg(feature = "failpoints")]
pub mod failpoints;
pub mod health;
pub mod models;
pub mod nodes;
pub mod stats;
pub mod tasks;
pub mod tenants;
pub mod utilization;
pub mod webhooks;
pub mod whoami;

use crate::error::ApiError;
use actix_web::http::Method;
use actix_web::{web, Resource, Route};
use caldera_spec::codes;
use std::collections::HashMap;

pub fn configure(cfg: &mut web::ServiceConfig) {
    use actix_web::http::Method as M;
    let on = |m: M, route: Route| (m, route);
    let paths = [
        ("/healthz", vec![on(M::GET, web::to(health::healthz))]),
        ("/metrics", vec![on(M::GET, web::to(health::metrics))]),
        (
            "/v1/tasks",
            vec![
                on(M::GET, web::to(tasks::list)),
                on(M::POST, web::to(tasks::submit)),
            ],
        ),
        ("/v1/tasks/{id}", vec![on(M::GET, web::to(tasks::get))]),
        (
            "/v1/tasks/{id}/release",
            vec![on(M::POST, web::to(tasks::release))],
        ),
        (
            "/v1/tasks/{id}/logs",
            vec![on(M::GET, web::to(tasks::logs))],
        ),
        (
            "/v1/tasks/{id}/replicas",
            vec![on(M::PUT, web::to(tasks::scale))],
        ),
        (
            "/v1/nodes/connect",
            vec![on(M::GET, web::to(crate::ws::connect))],
        ),
        ("/v1/nodes", vec![on(M::GET, web::to(nodes::list))]),
        ("/v1/nodes/{name}", vec![on(M::GET, web::to(nodes::get))]),
        (
            "/v1/nodes/{name}/revoke",
            vec![on(M::POST, web::to(nodes::revoke))],
        ),
        (
            "/v1/nodes/{name}/cordon",
            vec![on(M::POST, web::to(nodes::cordon))],
        ),
        (
            "/v1/nodes/{name}/drain",
            vec![on(M::POST, web::to(nodes::drain))],
        ),
        (
            "/v1/nodes/{name}/uncordon",
            vec![on(M::POST, web::to(nodes::uncordon))],
        ),
        (
            "/v1/utilization",
            vec![on(M::GET, web::to(utilization::get))],
        ),
        (
            "/v1/tenants",
            vec![
                on(M::GET, web::to(tenants::list)),
                on(M::POST, web::to(tenants::create)),
            ],
        ),
        (
            "/v1/tenants/{name}",
            vec![on(M::GET, web::to(tenants::get))],
        ),
        (
            "/v1/tenants/{name}/quota",
            vec![on(M::PUT, web::to(tenants::set_quota))],
        ),
        (
            "/v1/tenants/{name}/usage",
            vec![on(M::GET, web::to(tenants::usage))],
        ),
        (
            "/v1/models",
            vec![
                on(M::GET, web::to(models::list)),
                on(M::POST, web::to(models::register)),
            ],
        ),
        ("/v1/models/{name}", vec![on(M::GET, web::to(models::get))]),
        (
            "/v1/models/{name}/versions/{version}",
            vec![on(M::GET, web::to(models::version))],
        ),
        (
            "/v1/models/{name}/versions/{version}/prewarm",
            vec![on(M::POST, web::to(models::prewarm))],
        ),
        (
            "/v1/models/{name}/versions/{version}/pin",
            vec![on(M::PUT, web::to(models::pin))],
        ),
        (
            "/v1/models/{name}/versions/{version}/deprecate",
            vec![on(M::POST, web::to(models::deprecate))],
        ),
        ("/v1/events", vec![on(M::GET, web::to(events::list))]),
        ("/v1/whoami", vec![on(M::GET, web::to(whoami::get))]),
        (
            "/v1/stats/estimates",
            vec![on(M::GET, web::to(stats::estimates))],
        ),
        (
            "/v1/allocations",
            vec![on(M::GET, web::to(nodes::allocations))],
        ),
        (
            "/v1/webhooks",
            vec![
                on(M::GET, web::to(webhooks::list)),
                on(M::POST, web::to(webhooks::create)),
            ],
        ),
        (
            "/v1/webhooks/{id}",
            vec![
                on(M::GET, web::to(webhooks::get)),
                on(M::DELETE, web::to(webhooks::delete)),
            ],
        ),
        (
            "/v1/webhooks/{id}/deliveries",
            vec![on(M::GET, web::to(webhooks::deliveries))],
        ),
    ];
    for (path, routes) in paths {
        cfg.service(resource(path, routes));
    }
    #[cfg(feature = "failpoints")]
    {
        cfg.service(resource(
            "/v1/test/failpoints",
            vec![
                on(M::GET, web::to(failpoints::get)),
                on(M::DELETE, web::to(failpoints::clear)),
            ],
        ));
        cfg.service(resource(
            "/v1/test/failpoints/{site}",
            vec![on(M::PUT, web::to(failpoints::arm))],
        ));
    }
    cfg.default_service(web::to(|| async {
        Err::<actix_web::HttpResponse, _>(ApiError::new(
            &codes::NOT_FOUND,
            "no such path; see the API table in the README",
        ))
    }));
}

/// `path` answering each `(method, route)`; any other method is answered
/// 405 with an `Allow` header naming the methods it does answer.
fn resource(path: &str, routes: Vec<(Method, Route)>) -> Resource {
    let allow: Vec<&str> = routes.iter().map(|(m, _)| m.as_str()).collect();
    let allow = allow.join(", ");
    let mut r = web::resource(path);
    for (m, route) in routes {
        r = r.route(route.method(m));
    }
    r.default_service(web::to(move || {
        let allow = allow.clone();
        async move { Err::<actix_web::HttpResponse, _>(ApiError::method_not_allowed(&allow)) }
    }))
}

/// The query string of a request, as names to values.
pub type Query = web::Query<HashMap<String, String>>;

/// A page by event seq: `cursor` (the seq after which to start; 0 when
/// absent; `why` says what it is when it is not a number) and `limit`
/// (1..=1000, default 100).
pub fn query_page(
    q: &HashMap<String, String>,
    cursor: &str,
    why: &str,
) -> Result<(u64, usize), ApiError> {
    let after = match q.get(cursor) {
        None => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::bad_query(cursor, why))?,
    };
    Ok((after, query_num(q, "limit", 100, 1000)? as usize))
}

/// Parses an optional numeric query parameter in `1..=max`, naming it when it is bad.
/// An optional byte offset (0 allowed): absent is None.
pub fn query_offset(q: &HashMap<String, String>, key: &str) -> Result<Option<u64>, ApiError> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            ApiError::bad_query(
                key,
                format!("{key} must be a byte offset (0 or more), not {v:?}"),
            )
        }),
    }
}

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
