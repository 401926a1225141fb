//! REST routes under /v1, the node WebSocket, health, `/openapi.json` and `/docs`.
//!
//! [`table`] is the one list of what the server serves; each entry takes its
//! method and path from the handler's `#[utoipa::path]` annotation, so a
//! route cannot be served under another path than the one documented.
//!
//! To add a route:
//! 1. annotate the handler with `#[utoipa::path(METHOD, path = "/v1/...",
//!    tag, params, request_body, security, responses)]` (its own error
//!    statuses only: `crate::openapi::errors` adds 401/403/500/503 where a
//!    token is needed, 400/408/413 where a body is read, 429, and points
//!    every error at its registry schema), and derive `utoipa::ToSchema` on
//!    its body and answer types (`Envelope<Answer>` in `responses`);
//! 2. add `at::<module::__path_handler>(web::to(module::handler))` to
//!    [`table`];
//! 3. add `module::handler` to [`ApiPaths`]'s `paths(...)`.
//!
//! The test `registered_routes_are_exactly_the_documented_ones` fails when 2
//! and 3 disagree, and `tests/it/api_fuzz.rs` calls every documented operation
//! on the real binary.
pub mod cost;
pub mod cost_views;
pub mod endpoints;
pub mod events;
#[cfg(feature = "failpoints")]
pub mod failpoints;
pub mod health;
pub mod history;
pub mod images;
pub mod model_retire;
pub mod models;
pub mod nodes;
pub use crate::api::period;
pub mod registry_credentials;
pub mod stats;
pub mod swap;
pub mod tasks;
pub mod tenants;
pub mod utilization;
pub(crate) mod webhook_views;
pub mod webhooks;
pub mod whoami;

use crate::error::ApiError;
use crate::openapi;
use crate::portal;
use actix_web::http::Method;
use actix_web::{web, Resource, Route};
use caldera_spec::codes;
use std::collections::HashMap;

/// One served operation: the method and path of its handler's
/// `#[utoipa::path]` annotation (written once, there), and the handler.
pub struct Endpoint {
    pub method: Method,
    pub path: String,
    route: Route,
}

/// The endpoint of the handler whose annotation generated `P`
/// (`#[utoipa::path]` on `fn list` makes `__path_list`). An annotation names
/// one method: a second one would be documented and not served, which
/// `registered_routes_are_exactly_the_documented_ones` reports.
fn at<P: utoipa::Path>(route: Route) -> Endpoint {
    use utoipa::openapi::path::HttpMethod as H;
    let method = match P::methods().first() {
        Some(H::Post) => Method::POST,
        Some(H::Put) => Method::PUT,
        Some(H::Delete) => Method::DELETE,
        Some(H::Patch) => Method::PATCH,
        Some(H::Head) => Method::HEAD,
        Some(H::Options) => Method::OPTIONS,
        Some(H::Trace) => Method::TRACE,
        Some(H::Get) | None => Method::GET,
    };
    Endpoint {
        method,
        path: P::path(),
        route,
    }
}

/// Every route the server serves, in matching order (a literal path before
/// a pattern that would also match it: `/v1/nodes/connect` before
/// `/v1/nodes/{name}`).
fn table() -> Vec<Endpoint> {
    let t = vec![
        at::<health::__path_healthz>(web::to(health::healthz)),
        at::<health::__path_metrics>(web::to(health::metrics)),
        at::<openapi::__path_spec>(web::to(openapi::spec)),
        at::<openapi::docs::__path_page>(web::to(openapi::docs::page)),
        at::<openapi::docs::__path_asset>(web::to(openapi::docs::asset)),
        at::<tasks::__path_list>(web::to(tasks::list)),
        at::<tasks::__path_submit>(web::to(tasks::submit)),
        at::<tasks::__path_get>(web::to(tasks::get)),
        at::<tasks::__path_release>(web::to(tasks::release)),
        at::<tasks::__path_logs>(web::to(tasks::logs)),
        at::<tasks::__path_scale>(web::to(tasks::scale)),
        at::<swap::__path_swap>(web::to(swap::swap)),
        at::<endpoints::__path_endpoints>(web::to(endpoints::endpoints)),
        at::<crate::ws::__path_connect>(web::to(crate::ws::connect)),
        at::<nodes::__path_list>(web::to(nodes::list)),
        at::<nodes::__path_get>(web::to(nodes::get)),
        at::<nodes::__path_revoke>(web::to(nodes::revoke)),
        at::<nodes::__path_rotate_secret>(web::to(nodes::rotate_secret)),
        at::<nodes::__path_cordon>(web::to(nodes::cordon)),
        at::<nodes::__path_drain>(web::to(nodes::drain)),
        at::<nodes::__path_uncordon>(web::to(nodes::uncordon)),
        at::<images::__path_prepull>(web::to(images::prepull)),
        at::<utilization::__path_get>(web::to(utilization::get)),
        at::<tenants::__path_list>(web::to(tenants::list)),
        at::<tenants::__path_create>(web::to(tenants::create)),
        at::<tenants::__path_get>(web::to(tenants::get)),
        at::<tenants::__path_set_quota>(web::to(tenants::set_quota)),
        at::<registry_credentials::__path_set>(web::to(registry_credentials::set)),
        at::<registry_credentials::__path_list>(web::to(registry_credentials::list)),
        at::<registry_credentials::__path_delete>(web::to(registry_credentials::delete)),
        at::<models::__path_list>(web::to(models::list)),
        at::<models::__path_register>(web::to(models::register)),
        at::<models::__path_get>(web::to(models::get)),
        at::<models::__path_version>(web::to(models::version)),
        at::<models::__path_prewarm>(web::to(models::prewarm)),
        at::<models::__path_pin>(web::to(models::pin)),
        at::<models::__path_deprecate>(web::to(models::deprecate)),
        at::<model_retire::__path_retire>(web::to(model_retire::retire)),
        at::<events::__path_list>(web::to(events::list)),
        at::<whoami::__path_get>(web::to(whoami::get)),
        at::<stats::__path_estimates>(web::to(stats::estimates)),
        at::<nodes::__path_allocations>(web::to(nodes::allocations)),
        at::<history::__path_tenant>(web::to(history::tenant)),
        at::<cost::__path_get>(web::to(cost::get)),
        at::<cost::__path_total>(web::to(cost::total)),
        at::<history::__path_pool>(web::to(history::pool)),
        at::<webhooks::__path_list>(web::to(webhooks::list)),
        at::<webhooks::__path_create>(web::to(webhooks::create)),
        at::<webhooks::__path_get>(web::to(webhooks::get)),
        at::<webhooks::__path_delete>(web::to(webhooks::delete)),
        at::<webhooks::__path_deliveries>(web::to(webhooks::deliveries)),
        // The portal's pages (gateway/src/portal).
        at::<portal::login::__path_page>(web::to(portal::login::page)),
        at::<portal::login::__path_login>(web::to(portal::login::login)),
        at::<portal::login::__path_logout>(web::to(portal::login::logout)),
        at::<portal::assets::__path_asset>(web::to(portal::assets::asset)),
        at::<portal::overview::__path_page_handler>(web::to(portal::overview::page_handler)),
        at::<portal::events::__path_page_handler>(web::to(portal::events::page_handler)),
        at::<portal::submit::__path_page_handler>(web::to(portal::submit::page_handler)),
        at::<portal::submit::__path_submit>(web::to(portal::submit::submit)),
        at::<portal::submit::__path_dry_run_handler>(web::to(portal::submit::dry_run_handler)),
        at::<portal::tasks::__path_page_handler>(web::to(portal::tasks::page_handler)),
        at::<portal::task_page::__path_page_handler>(web::to(portal::task_page::page_handler)),
        at::<portal::task_page::__path_log_handler>(web::to(portal::task_page::log_handler)),
        at::<portal::task_page::__path_release>(web::to(portal::task_page::release)),
        at::<portal::task_page::__path_scale>(web::to(portal::task_page::scale)),
        at::<portal::nodes::__path_page_handler>(web::to(portal::nodes::page_handler)),
        at::<portal::nodes::__path_cordon>(web::to(portal::nodes::cordon)),
        at::<portal::tenants::__path_page_handler>(web::to(portal::tenants::page_handler)),
        at::<portal::tenants::__path_cost_csv>(web::to(portal::tenants::cost_csv)),
        at::<portal::models::__path_page_handler>(web::to(portal::models::page_handler)),
        at::<portal::model_actions::__path_swap>(web::to(portal::model_actions::swap)),
        at::<portal::model_actions::__path_retire>(web::to(portal::model_actions::retire)),
    ];
    #[cfg(feature = "failpoints")]
    let t = {
        let mut t = t;
        t.extend([
            at::<failpoints::__path_get>(web::to(failpoints::get)),
            at::<failpoints::__path_clear>(web::to(failpoints::clear)),
            at::<failpoints::__path_arm>(web::to(failpoints::arm)),
        ]);
        t
    };
    t
}

/// `(method, path)` of every route the server serves, from the one table.
pub fn registered() -> Vec<(Method, String)> {
    table().into_iter().map(|e| (e.method, e.path)).collect()
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    // Extractor failures answer in the envelope too, like every error.
    cfg.app_data(web::PathConfig::default().error_handler(|e, _| {
        ApiError::new(
            &codes::BAD_FORMAT,
            format!("a path segment is not readable: {e}"),
        )
        .into()
    }));
    cfg.app_data(web::QueryConfig::default().error_handler(|e, _| {
        ApiError::bad_query("?", format!("the query string is not readable: {e}")).into()
    }));
    // Grouped by path in first-appearance order, so each path's resource
    // answers 405 naming all its methods.
    let mut paths: Vec<(String, Vec<(Method, Route)>)> = Vec::new();
    for e in table() {
        match paths.iter_mut().find(|(p, _)| *p == e.path) {
            Some((_, routes)) => routes.push((e.method, e.route)),
            None => paths.push((e.path, vec![(e.method, e.route)])),
        }
    }
    for (path, routes) in paths {
        cfg.service(resource(&path, routes));
    }
    cfg.default_service(web::to(|| async {
        Err::<actix_web::HttpResponse, _>(ApiError::new(
            &codes::NOT_FOUND,
            "no such path; see /docs or /openapi.json",
        ))
    }));
}

/// `path` answering each `(method, route)`; any other method is answered
/// 405 with an `Allow` header naming the methods it does answer. The
/// resource is named after its pattern: the HTTP metrics label requests by
/// it (`metrics::http`), never by the raw path.
fn resource(path: &str, routes: Vec<(Method, Route)>) -> Resource {
    let allow: Vec<&str> = routes.iter().map(|(m, _)| m.as_str()).collect();
    let allow = allow.join(", ");
    let mut r = web::resource(path).name(path);
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

pub use crate::api::query::{query_num, query_offset, query_page};
