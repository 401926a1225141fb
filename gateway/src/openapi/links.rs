//! OpenAPI links: what a creation answers feeds the operations on the thing
//! created (a submitted task's id and tenant into `GET /v1/tasks/{id}`, a
//! registered version into its prewarm, pin, deprecate...). Clients and
//! stateful fuzzers (schemathesis) follow them instead of guessing ids.
use serde_json::{json, Map, Value};

/// A creation's answer and the operations on what it created.
struct Link {
    /// `(path, method, status)` of the creation's answer.
    from: (&'static str, &'static str, &'static str),
    /// `(parameter, runtime expression)`: what the answer supplies.
    supplies: &'static [(&'static str, &'static str)],
    /// The operation ids it feeds.
    to: &'static [&'static str],
}

const LINKS: &[Link] = &[
    Link {
        from: ("/v1/tasks", "post", "201"),
        supplies: &[
            ("id", "$response.body#/data/task_id"),
            ("tenant", "$response.body#/data/tenant"),
        ],
        to: &["tasks_get", "logs", "release", "scale"],
    },
    Link {
        from: ("/v1/tenants", "post", "201"),
        supplies: &[("name", "$response.body#/data/name")],
        to: &["tenants_get", "tenant_usage", "tenant_cost", "set_quota"],
    },
    Link {
        from: ("/v1/models", "post", "201"),
        supplies: &[
            ("name", "$response.body#/data/name"),
            ("version", "$response.body#/data/version"),
        ],
        to: &["version", "prewarm", "pin", "deprecate"],
    },
    Link {
        from: ("/v1/models", "post", "201"),
        supplies: &[("name", "$response.body#/data/name")],
        to: &["models_get"],
    },
    Link {
        from: ("/v1/webhooks", "post", "201"),
        supplies: &[("id", "$response.body#/data/id")],
        to: &["webhooks_get", "webhook_deliveries", "webhooks_delete"],
    },
];

/// The parameter names an operation declares.
fn params_of(doc: &Value, id: &str) -> Vec<String> {
    let ops = doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values());
    ops.flat_map(|item| item.as_object().into_iter().flat_map(|m| m.values()))
        .find(|op| op["operationId"] == id)
        .map(|op| {
            op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Adds [`LINKS`] to `doc`'s responses (each target given the parameters it has).
pub fn add(doc: &mut Value) {
    for Link {
        from: (path, method, status),
        supplies,
        to,
    } in LINKS
    {
        let mut links = Map::new();
        for target in *to {
            let names = params_of(doc, target);
            let parameters: Map<String, Value> = supplies
                .iter()
                .filter(|(p, _)| names.iter().any(|n| n == p))
                .map(|(p, expr)| (p.to_string(), json!(expr)))
                .collect();
            links.insert(
                target.to_string(),
                json!({"operationId": target, "parameters": parameters}),
            );
        }
        let response = &mut doc["paths"][*path][*method]["responses"][*status];
        if let Some(existing) = response["links"].as_object_mut() {
            existing.extend(links);
        } else if response.is_object() {
            response["links"] = Value::Object(links);
        }
    }
}
