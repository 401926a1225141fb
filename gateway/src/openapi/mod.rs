//! `GET /openapi.json`: the OpenAPI 3.1 document of every route
//! [`crate::routes::configure`] serves, generated from the handlers'
//! `#[utoipa::path]` annotations and the API types' `ToSchema` derives, then
//! completed from the error registry ([`errors`]): one error envelope per HTTP
//! status with exactly the codes of `caldera_spec::codes::ALL` it may carry,
//! and the statuses every authenticated operation can answer.
//!
//! The document is built once per process and served as bytes.
pub mod docs;
pub mod errors;
pub mod links;
pub mod paths;
#[cfg(test)]
mod tests;

use actix_web::HttpResponse;
use paths::{failpoints_doc, ApiPaths};
use serde_json::Value;
use std::sync::OnceLock;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The document's frame: title, tags and the three bearer tokens. The
/// operations come from [`ApiPaths`], the route table's list.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Caldera",
        description = "Pools GPUs and CPUs across machines for training jobs and inference services. \
Every JSON answer is the one envelope: `{code: 0, msg: \"ok\", data, request_id}` on success, \
`{code, error, msg, field?, data: null, request_id}` on failure, `code` a registered error (see the Error* schemas). \
Any path answers 404 (`not_found`) when unknown and 405 (`method_not_allowed`, with `Allow`) for a method it does not serve.",
        license(name = "Apache-2.0")
    ),
    // Named by query parameters (`?state=`, `?type=`), which utoipa does not collect.
    components(schemas(caldera_spec::TaskState, caldera_spec::TaskType)),
    modifiers(&Tokens),
    tags(
        (name = "tasks", description = "training jobs, inference services and reservations"),
        (name = "nodes", description = "the pool: nodes, allocations, utilisation, the agents' WebSocket"),
        (name = "tenants", description = "tenants, quotas and usage (creating and changing them: the operator)"),
        (name = "models", description = "model versions and their weights on the nodes"),
        (name = "events", description = "the allocation history and audit trail"),
        (name = "stats", description = "start-estimate accuracy"),
        (name = "auth", description = "who a token belongs to"),
        (name = "health", description = "liveness, metrics"),
        (name = "docs", description = "this document and its viewer"),
        (name = "portal", description = "the web portal's pages (HTML for a person; a session cookie from /login, not a bearer token)"),
    )
)]
struct Frame;

/// The security schemes an operation names: `operator` (the operator token),
/// `tenant` (a tenant's token, from `POST /v1/tenants`), `join` (the cluster
/// join token, for node agents only).
struct Tokens;

impl Modify for Tokens {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let bearer = |what: &str| {
            let mut h = Http::new(HttpAuthScheme::Bearer);
            h.description = Some(what.to_string());
            SecurityScheme::Http(h)
        };
        let components = api.components.get_or_insert_with(Default::default);
        for (name, what) in [
            ("operator", "the operator token (CALDERA_OPERATOR_TOKEN, or shown once at the first start)"),
            ("tenant", "a tenant's token (shown once by POST /v1/tenants); it sees and acts for its own tenant only"),
            ("join", "the cluster join token: node agents only"),
        ] {
            components.add_security_scheme(name, bearer(what));
        }
    }
}

/// The whole document, as served.
pub fn document() -> Value {
    let mut api = Frame::openapi();
    api.merge(ApiPaths::openapi());
    if let Some(test_routes) = failpoints_doc() {
        api.merge(test_routes);
    }
    let mut doc = serde_json::to_value(&api).unwrap_or_default();
    errors::complete(&mut doc);
    unique_operation_ids(&mut doc);
    links::add(&mut doc);
    doc
}

/// A handler's name is its operation id where no other handler has that
/// name; `list`, `get`... are prefixed with their tag (`tasks_list`), so
/// generated clients get one method name per operation.
fn unique_operation_ids(doc: &mut Value) {
    let ops = || ["get", "put", "post", "delete", "patch"];
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    for item in doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for op in ops().iter().filter_map(|m| item.get(*m)) {
            if let Some(id) = op["operationId"].as_str() {
                *seen.entry(id.to_string()).or_default() += 1;
            }
        }
    }
    for item in doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        for m in ops() {
            let Some(op) = item.get_mut(m) else { continue };
            let (Some(id), Some(tag)) = (op["operationId"].as_str(), op["tags"][0].as_str()) else {
                continue;
            };
            if seen.get(id).copied().unwrap_or(0) > 1 {
                op["operationId"] = Value::String(format!("{tag}_{id}"));
            }
        }
    }
}

/// The document's bytes, built on first use.
fn bytes() -> &'static [u8] {
    static DOC: OnceLock<Vec<u8>> = OnceLock::new();
    DOC.get_or_init(|| serde_json::to_vec(&document()).unwrap_or_default())
}

/// GET /openapi.json
#[utoipa::path(get, path = "/openapi.json", tag = "docs", operation_id = "openapi",
    description = "This document (OpenAPI 3.1). No token needed.",
    responses((status = 200, description = "the OpenAPI 3.1 document", content_type = "application/json", body = Object)))]
pub async fn spec() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(bytes())
}
