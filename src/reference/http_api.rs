//! `http-api.md`: every operation of the HTTP API — method, path, who may
//! call it, what it does, its parameters, request body and answers — read
//! from the OpenAPI document the gateway serves at `/openapi.json`. The
//! test-only fail point routes (in a build with them) are left out, so the
//! page is the same from every build.
use super::markdown::{banner, cell, code, table};
use serde_json::Value;
use std::collections::BTreeSet;

/// The methods an OpenAPI path item may hold, in the order a page lists them.
const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

pub fn page() -> String {
    let doc = caldera_gateway::openapi::document();
    page_of(&doc, &test_only_paths())
}

/// The paths only a build with fail points serves.
fn test_only_paths() -> BTreeSet<String> {
    caldera_gateway::openapi::paths::failpoints_doc()
        .map(|d| d.paths.paths.keys().cloned().collect())
        .unwrap_or_default()
}

/// One operation as the page shows it.
struct Operation<'a> {
    method: &'static str,
    path: &'a str,
    op: &'a Value,
}

impl Operation<'_> {
    fn tag(&self) -> &str {
        self.op["tags"][0].as_str().unwrap_or("other")
    }

    /// The security schemes that may call it (`operator`, `tenant`, `join`),
    /// or the portal's session (a portal page that sends a caller without
    /// one to the login says so in an answer, "no session"; a form checks
    /// the session's CSRF token), or anyone.
    fn callers(&self) -> String {
        let schemes: Vec<String> = self.op["security"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|req| req.as_object())
            .flat_map(|req| req.keys().cloned())
            .collect();
        if !schemes.is_empty() {
            schemes.join(", ")
        } else if self.tag() == "portal" && self.names_a_session() {
            "portal session".into()
        } else {
            "anyone".into()
        }
    }

    /// Whether an answer is described as the one for a caller without a
    /// portal session, or for a form without its session's CSRF token.
    fn names_a_session(&self) -> bool {
        self.op["responses"]
            .as_object()
            .into_iter()
            .flat_map(|r| r.values())
            .filter_map(|r| r["description"].as_str())
            .any(|d| {
                d.contains("no session") || d.contains("without a session") || d.contains("CSRF")
            })
    }

    /// The first sentence of the description (else the summary), for the
    /// overview table.
    fn summary(&self) -> String {
        let text = self.op["description"]
            .as_str()
            .or(self.op["summary"].as_str())
            .unwrap_or("");
        match text.find(". ") {
            Some(i) => text[..=i].to_string(),
            None => text.to_string(),
        }
    }
}

fn page_of(doc: &Value, test_only: &BTreeSet<String>) -> String {
    let mut ops: Vec<Operation> = Vec::new();
    if let Some(paths) = doc["paths"].as_object() {
        for (path, item) in paths.iter().filter(|(p, _)| !test_only.contains(*p)) {
            for method in METHODS {
                if let Some(op) = item.get(method) {
                    ops.push(Operation { method, path, op });
                }
            }
        }
    }
    let mut out = banner(
        "HTTP API",
        "the OpenAPI document the gateway serves at `/openapi.json` (`gateway/src/openapi/`, the handlers' annotations)",
    );
    if let Some(d) = doc["info"]["description"].as_str() {
        out.push_str(d);
        out.push_str("\n\n");
    }
    out.push_str(
        "Who may call: `operator` is the operator token, `tenant` a tenant's token, \
`join` the cluster join token (node agents); `portal session` is the portal's cookie \
from its login page; `anyone` needs no token. The request and answer columns name \
schemas of `/openapi.json`.\n\n",
    );
    let mut tags: Vec<(String, String)> = doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["description"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for o in &ops {
        if !tags.iter().any(|(n, _)| n == o.tag()) {
            tags.push((o.tag().to_string(), String::new()));
        }
    }
    let overview: Vec<Vec<String>> = tags
        .iter()
        .flat_map(|(tag, _)| ops.iter().filter(move |o| o.tag() == tag))
        .map(|o| {
            vec![
                format!("`{}`", o.method.to_uppercase()),
                code(o.path),
                cell(&o.callers()),
                cell(&o.summary()),
            ]
        })
        .collect();
    out.push_str(&table(
        &["method", "path", "who may call", "what it does"],
        &overview,
    ));
    for (tag, about) in &tags {
        let of_tag: Vec<&Operation> = ops.iter().filter(|o| o.tag() == tag).collect();
        if of_tag.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## {tag}\n\n"));
        if !about.is_empty() {
            out.push_str(&format!("{}.\n", capitalised(about)));
        }
        for o in of_tag {
            operation(&mut out, o);
        }
    }
    out
}

/// One operation's section: description, parameters, body, answers.
fn operation(out: &mut String, o: &Operation) {
    out.push_str(&format!(
        "\n### `{} {}`\n\n",
        o.method.to_uppercase(),
        o.path
    ));
    if let Some(id) = o.op["operationId"].as_str() {
        out.push_str(&format!(
            "Operation `{id}`; who may call: {}.\n\n",
            o.callers()
        ));
    }
    if let Some(d) = o.op["description"].as_str() {
        out.push_str(d.trim());
        out.push_str("\n\n");
    }
    let params: Vec<Vec<String>> = o.op["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            vec![
                code(p["name"].as_str().unwrap_or("")),
                p["in"].as_str().unwrap_or("").to_string(),
                if p["required"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "no"
                }
                .to_string(),
                code(&schema_name(&p["schema"])),
                cell(p["description"].as_str().unwrap_or("")),
            ]
        })
        .collect();
    if !params.is_empty() {
        out.push_str(&table(
            &["parameter", "in", "required", "type", "meaning"],
            &params,
        ));
        out.push('\n');
    }
    if let Some(content) = o.op["requestBody"]["content"].as_object() {
        let bodies: Vec<String> = content
            .iter()
            .map(|(media, c)| format!("{} as `{media}`", code(&schema_name(&c["schema"]))))
            .collect();
        out.push_str(&format!("Request body: {}.\n\n", bodies.join(", or ")));
    }
    let answers: Vec<Vec<String>> = o.op["responses"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(status, r)| {
            let body = r["content"]
                .as_object()
                .and_then(|c| c.values().next())
                .map(|c| code(&schema_name(&c["schema"])))
                .unwrap_or_else(|| "—".into());
            vec![
                status.clone(),
                body,
                cell(r["description"].as_str().unwrap_or("")),
            ]
        })
        .collect();
    if !answers.is_empty() {
        out.push_str(&table(&["status", "answer", "when"], &answers));
    }
}

/// A schema as a name: the component it refers to, an array of one, or its type.
fn schema_name(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        return r.rsplit('/').next().unwrap_or(r).to_string();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(alts) = s[key].as_array() {
            let names: Vec<String> = alts
                .iter()
                .map(schema_name)
                .filter(|n| n != "null")
                .collect();
            return names.join(" or ");
        }
    }
    match &s["type"] {
        Value::String(t) if t == "array" => format!("[{}]", schema_name(&s["items"])),
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str())
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "object".into(),
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operation_has_its_row_and_section() {
        let doc = json!({
            "info": {"description": "An API."},
            "tags": [{"name": "tasks", "description": "training jobs"}],
            "paths": {
                "/v1/tasks": {"post": {
                    "tags": ["tasks"], "operationId": "submit",
                    "description": "Requests resources. More words.",
                    "security": [{"operator": []}, {"tenant": []}],
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/TaskSpec"}}}},
                    "responses": {"201": {"description": "created", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Envelope_TaskView"}}}}}
                }},
                "/healthz": {"get": {"tags": ["health"], "operationId": "healthz", "responses": {}}},
                "/login": {"get": {"tags": ["portal"], "responses": {"200": {"description": "the login form"}}}},
                "/tasks": {"get": {"tags": ["portal"], "responses": {"303": {"description": "no session: on to the login page"}}}},
                "/v1/test/failpoints": {"get": {"tags": ["test"], "responses": {}}}
            }
        });
        let test_only = BTreeSet::from(["/v1/test/failpoints".to_string()]);
        let page = page_of(&doc, &test_only);
        assert!(
            page.contains("| `POST` | `/v1/tasks` | operator, tenant | Requests resources. |"),
            "{page}"
        );
        assert!(page.contains("| `GET` | `/healthz` | anyone |"), "{page}");
        assert!(page.contains("| `GET` | `/login` | anyone |"), "{page}");
        assert!(
            page.contains("| `GET` | `/tasks` | portal session |"),
            "{page}"
        );
        assert!(
            page.contains("Request body: `TaskSpec` as `application/json`."),
            "{page}"
        );
        assert!(
            page.contains("| 201 | `Envelope_TaskView` | created |"),
            "{page}"
        );
        assert!(
            !page.contains("failpoints"),
            "test-only routes are left out: {page}"
        );
    }

    #[test]
    fn the_served_document_gives_every_operation_a_caller_and_a_tag() {
        let doc = caldera_gateway::openapi::document();
        let page = page_of(&doc, &test_only_paths());
        let n = doc["paths"]
            .as_object()
            .map(|p| {
                p.iter()
                    .filter(|(path, _)| !test_only_paths().contains(*path))
                    .map(|(_, item)| METHODS.iter().filter(|m| item.get(**m).is_some()).count())
                    .sum::<usize>()
            })
            .unwrap_or(0);
        assert!(n > 40, "the API has its operations: {n}");
        assert_eq!(page.matches("\n### `").count(), n);
    }
}
