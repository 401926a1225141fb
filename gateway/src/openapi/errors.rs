//! The error half of the document, from the one registry
//! (`caldera_spec::codes::ALL`): a schema `Error{status}` per HTTP status
//! whose `code` and `error` are exactly the registered entries of that
//! status, every error response of an operation pointing at its status's
//! schema, and the statuses any authenticated operation can answer added to
//! each (a handler's annotation lists only those of its own logic).
use caldera_spec::codes;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Paths the per-client cap never refuses (`client_limit::EXEMPT`).
use crate::client_limit::EXEMPT;

/// The statuses every operation with a token can answer, and why.
const AUTHENTICATED: &[(u16, &str)] = &[
    (401, "no bearer token, or one that is not valid"),
    (403, "a valid token of a kind that may not call this"),
    (500, "storage failed (sled I/O, a corrupt record)"),
    (
        503,
        "a control-plane actor is not answering, or the change could not be recorded; retry",
    ),
];

/// The statuses every operation that reads a body can answer.
const WITH_BODY: &[(u16, &str)] = &[
    (
        400,
        "the body is not what the schema says; `field` names the place",
    ),
    (
        408,
        "the body did not arrive within limits.client-request-timeout-ms",
    ),
    (413, "the body is larger than limits.max-body-bytes"),
];

/// API errors by HTTP status (process errors, status 0, are never answers).
fn by_status() -> BTreeMap<u16, Vec<&'static codes::ErrorCode>> {
    let mut m: BTreeMap<u16, Vec<_>> = BTreeMap::new();
    for e in codes::ALL.iter().filter(|e| e.http_status != 0) {
        m.entry(e.http_status).or_default().push(e);
    }
    m
}

/// The envelope of a failure with `status`: `code` one of its entries.
fn error_schema(status: u16, entries: &[&codes::ErrorCode]) -> Value {
    let table: Vec<String> = entries
        .iter()
        .map(|e| format!("- {} `{}`: {}", e.code, e.name, e.meaning))
        .collect();
    json!({
        "type": "object",
        "description": format!("A {status} answer. Its codes:\n{}", table.join("\n")),
        "required": ["code", "error", "msg", "data", "request_id"],
        "properties": {
            "code": {"type": "integer", "enum": entries.iter().map(|e| e.code).collect::<Vec<_>>()},
            "error": {"type": "string", "enum": entries.iter().map(|e| e.name).collect::<Vec<_>>()},
            "msg": {"type": "string", "description": "a sentence a person can act on"},
            "field": {"type": "string", "description": "the offending field's path or query parameter, where there is one"},
            "data": {"type": "null"},
            "request_id": {"type": "string"},
        },
    })
}

/// Who may call an operation, from the schemes its security names.
fn principal(op: &Value) -> &'static str {
    let names: Vec<&str> = op["security"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys().map(String::as_str))
        .collect();
    match (
        names.contains(&"operator"),
        names.contains(&"tenant"),
        names.contains(&"join"),
    ) {
        (true, true, _) => "operator or tenant",
        (true, false, _) => "operator",
        (_, _, true) => "node join token",
        _ => "none",
    }
}

/// Completes `doc` (the document utoipa built) with the error schemas and
/// responses, and marks each operation with `x-caldera-principal`.
pub fn complete(doc: &mut Value) {
    let statuses = by_status();
    let schemas = &mut doc["components"]["schemas"];
    for (status, entries) in &statuses {
        schemas[format!("Error{status}")] = error_schema(*status, entries);
    }
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for op in item.values_mut().filter(|op| op.get("responses").is_some()) {
            let who = principal(op);
            let reads_body = op.get("requestBody").is_some();
            op["x-caldera-principal"] = json!(who);
            let Some(responses) = op["responses"].as_object_mut() else {
                continue;
            };
            if who != "none" {
                add_all(responses, AUTHENTICATED);
            }
            if reads_body {
                add_all(responses, WITH_BODY);
            }
            if !EXEMPT.contains(&path.as_str()) {
                add_all(
                    responses,
                    &[(
                        429,
                        "this client has limits.max-requests-per-client requests in flight",
                    )],
                );
            }
            for (status, response) in responses.iter_mut() {
                let Ok(status) = status.parse::<u16>() else {
                    continue;
                };
                if status >= 400 && response.get("content").is_none() {
                    response["content"] = json!({"application/json": {"schema":
                        {"$ref": format!("#/components/schemas/Error{status}")}}});
                }
            }
        }
    }
}

/// Adds each `(status, why)` the operation does not list yet.
fn add_all(responses: &mut Map<String, Value>, more: &[(u16, &str)]) {
    for (status, why) in more {
        responses
            .entry(status.to_string())
            .or_insert_with(|| json!({"description": why}));
    }
}

/// The HTTP statuses the registry has errors for.
pub fn error_statuses() -> Vec<u16> {
    by_status().into_keys().collect()
}
