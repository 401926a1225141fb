//! The document against the route table and the error registry.
use super::document;
use crate::routes::registered;
use caldera_spec::codes;
use serde_json::Value;
use std::collections::BTreeSet;

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "patch", "head", "options", "trace",
];

/// `(METHOD, path)` of every operation in the document.
fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for m in METHODS {
            if item.get(*m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn registered_routes_are_exactly_the_documented_ones() {
    let served: Vec<(String, String)> = registered()
        .into_iter()
        .map(|(m, p)| (m.as_str().to_string(), p))
        .collect();
    let served_set: BTreeSet<_> = served.iter().cloned().collect();
    assert_eq!(
        served.len(),
        served_set.len(),
        "a route is in the table twice"
    );
    let doc = documented(&document());
    let undocumented: Vec<_> = served_set.difference(&doc).collect();
    let unserved: Vec<_> = doc.difference(&served_set).collect();
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "served but not in /openapi.json (add the handler to ApiPaths): {undocumented:?}; \
         in /openapi.json but not served (add it to routes::table): {unserved:?}"
    );
    for must in [
        "/healthz",
        "/metrics",
        "/v1/nodes/connect",
        "/openapi.json",
        "/docs",
    ] {
        assert!(served_set.iter().any(|(_, p)| p == must), "{must}");
    }
    #[cfg(feature = "failpoints")]
    assert!(served_set.contains(&("PUT".into(), "/v1/test/failpoints/{site}".into())));
    #[cfg(not(feature = "failpoints"))]
    assert!(!served_set.iter().any(|(_, p)| p.starts_with("/v1/test/")));
}

#[test]
fn the_document_is_openapi_3_1_with_the_three_tokens() {
    let doc = document();
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    for scheme in ["operator", "tenant", "join"] {
        assert_eq!(
            doc["components"]["securitySchemes"][scheme]["scheme"], "bearer",
            "{scheme}"
        );
    }
    let op = &doc["paths"]["/v1/tenants"]["post"];
    assert_eq!(op["x-caldera-principal"], "operator");
    assert_eq!(
        doc["paths"]["/v1/tasks"]["get"]["x-caldera-principal"],
        "operator or tenant"
    );
    assert_eq!(
        doc["paths"]["/healthz"]["get"]["x-caldera-principal"],
        "none"
    );
}

#[test]
fn operation_ids_are_unique() {
    let doc = document();
    let mut ids = BTreeSet::new();
    for item in doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for m in METHODS {
            if let Some(op) = item.get(*m) {
                let id = op["operationId"].as_str().unwrap_or_default().to_string();
                assert!(ids.insert(id.clone()), "operationId {id:?} twice");
            }
        }
    }
}

#[test]
fn every_api_error_code_is_in_its_status_schema_once() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    for e in codes::ALL.iter().filter(|e| e.http_status != 0) {
        let s = &schemas[format!("Error{}", e.http_status)]["properties"];
        assert!(
            s["code"]["enum"]
                .as_array()
                .is_some_and(|v| v.contains(&e.code.into())),
            "{} is not in Error{}",
            e.code,
            e.http_status
        );
        assert!(s["error"]["enum"]
            .as_array()
            .is_some_and(|v| v.contains(&e.name.into())));
    }
}

#[test]
fn every_error_response_points_at_an_existing_error_schema() {
    let doc = document();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                let n: u16 = status.parse().unwrap_or(0);
                // The portal's error pages are HTML for a person, not an envelope.
                if n < 400 || r["content"].get("text/html").is_some() {
                    continue;
                }
                let target = r["content"]["application/json"]["schema"]["$ref"]
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                    .unwrap_or_default();
                assert!(
                    doc["components"]["schemas"].get(target).is_some(),
                    "{method} {path} {status}: no error schema (the registry has no {status} entry?)"
                );
            }
        }
    }
}

/// Every `$ref` in `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                out.push(r);
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves() {
    let doc = document();
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 50, "{} refs", all.len());
    for r in all {
        let name = r.strip_prefix("#/components/schemas/").unwrap_or(r);
        assert!(
            doc["components"]["schemas"].get(name).is_some(),
            "{r} is not in components"
        );
    }
}

#[test]
fn every_link_names_an_operation_of_the_document() {
    let doc = document();
    let mut ids = BTreeSet::new();
    let mut targets = Vec::new();
    for item in doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|m| m.values())
    {
        for op in METHODS.iter().filter_map(|m| item.get(*m)) {
            ids.insert(op["operationId"].as_str().unwrap_or_default().to_string());
            for r in op["responses"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
            {
                for l in r["links"].as_object().into_iter().flat_map(|m| m.values()) {
                    targets.push(l["operationId"].as_str().unwrap_or_default().to_string());
                }
            }
        }
    }
    assert!(targets.len() >= 10, "{targets:?}");
    for t in targets {
        assert!(ids.contains(&t), "a link to {t:?}, which is no operation");
    }
}

#[test]
fn portal_pages_document_their_html_page_the_login_redirect_and_the_fragments_401() {
    let doc = document();
    for path in [
        "/",
        "/tasks",
        "/tasks/{id}",
        "/nodes",
        "/tenants",
        "/models",
        "/events",
    ] {
        let r = &doc["paths"][path]["get"]["responses"];
        assert!(
            r["200"]["content"].get("text/html").is_some(),
            "{path}: {r:#}"
        );
        assert!(r.get("303").is_some(), "{path}");
        assert!(r["401"]["content"].get("text/html").is_some(), "{path}");
    }
}
