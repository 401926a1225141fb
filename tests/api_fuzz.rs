//! Schema-driven fuzzing of the real `caldera` binary, from the document
//! it serves itself (`GET /openapi.json`): for every operation, requests
//! generated from its schemas with a seeded RNG — valid bodies, bodies of the
//! wrong type, with a field missing or unknown, numbers past every range,
//! odd strings, bodies that are not JSON, odd path segments and query
//! values, with each kind of token and none. Every answer must be below 500,
//! one of the statuses the document lists for the operation, and fit that
//! status's schema: the success envelope around the documented `data`, or
//! the error envelope with a registered code of that status (the documented
//! non-JSON bodies — /metrics, /docs — by their media type).
//!
//! The short form runs in `cargo test` (seed 13, 40 cases per operation).
//! Another seed or more cases: `CALDERA_FUZZ_SEED=7 CALDERA_FUZZ_CASES=400
//! cargo test --test api_fuzz`. The long form is `scripts/fuzz-api`
//! (schemathesis against `caldera up`).
use caldera_chaos_tests::schema::{check, gen, resolve, Rng};
use caldera_chaos_tests::{http, Agent, Api, ControlPlane, JOIN_TOKEN};
use serde_json::Value;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One documented operation.
struct Operation<'a> {
    method: String,
    path: String,
    op: &'a Value,
}

fn operations(doc: &Value) -> Vec<Operation<'_>> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            if op.get("responses").is_some() {
                out.push(Operation {
                    method: method.to_uppercase(),
                    path: path.clone(),
                    op,
                });
            }
        }
    }
    out
}

/// Names a path segment or query value may take: ones that exist after the
/// valid bodies ran (the generator names tasks, models and versions f0..f5),
/// and odd ones.
fn param_value(doc: &Value, schema: &Value, rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => gen::ODD_STRINGS[rng.below(gen::ODD_STRINGS.len())].to_string(),
        1 => rng
            .pick(&[
                "f0",
                "f1",
                "fuzz",
                "fuzz-node",
                "any",
                "swagger-ui.css",
                "18446744073709551616",
                "-1",
                "0",
            ])
            .to_string(),
        _ => match gen::valid(doc, schema, rng, "name", 1) {
            Value::String(s) => s,
            v => v.to_string(),
        },
    }
}

/// Percent-encodes everything but the unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The target (path and query) of one generated request.
fn target(doc: &Value, o: &Operation, rng: &mut Rng) -> String {
    let mut path = o.path.clone();
    let mut query = Vec::new();
    for p in o.op["parameters"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or_default();
        match p["in"].as_str() {
            Some("path") => {
                let v = param_value(doc, &p["schema"], rng);
                // An empty segment is another path, not this operation.
                let v = if v.is_empty() { "x".to_string() } else { v };
                path = path.replace(&format!("{{{name}}}"), &encode(&v));
            }
            Some("query") if rng.one_in(2) => {
                query.push(format!(
                    "{}={}",
                    encode(name),
                    encode(&param_value(doc, &p["schema"], rng))
                ));
            }
            _ => {}
        }
    }
    if rng.one_in(8) {
        query.push("zz_unknown=1".into());
    }
    match query.is_empty() {
        true => path,
        false => format!("{path}?{}", query.join("&")),
    }
}

/// Why `reply` is not an answer the document allows for `o`, if it is not.
fn judge(doc: &Value, o: &Operation, reply: &http::Reply) -> Result<(), String> {
    if reply.status == 0 {
        return Err(format!(
            "no answer (a panic or a closed connection): {}",
            reply.body
        ));
    }
    if reply.status >= 500 {
        return Err(format!("status {}: {}", reply.status, reply.body));
    }
    let documented = &o.op["responses"][reply.status.to_string()];
    if documented.is_null() {
        return Err(format!(
            "status {} is not documented: {}",
            reply.status, reply.body
        ));
    }
    let Some(content) = documented["content"].as_object() else {
        return Ok(()); // 101: no body
    };
    let media = reply.header("content-type").unwrap_or_default();
    let Some((_, c)) = content.iter().find(|(m, _)| media.starts_with(m.as_str())) else {
        return Err(format!(
            "content-type {media:?}, documented {:?}",
            content.keys().collect::<Vec<_>>()
        ));
    };
    if !media.starts_with("application/json") {
        return Ok(());
    }
    check::conforms(doc, &c["schema"], &reply.body)?;
    if resolve(doc, &c["schema"])["properties"]
        .get("request_id")
        .is_none()
    {
        return Ok(()); // JSON, not an envelope: /openapi.json itself
    }
    let code = reply.body["code"].as_u64();
    match reply.status {
        s if s < 400 && code != Some(0) => Err(format!("a success with code {code:?}")),
        _ if reply.body["request_id"].as_str().is_none() => Err("no request_id".into()),
        _ => Ok(()),
    }
}

#[test]
fn every_operation_answers_a_documented_status_in_its_documented_envelope() {
    let seed = env_num("CALDERA_FUZZ_SEED", 13);
    let cases = env_num("CALDERA_FUZZ_CASES", 40);
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = Agent::start(Path::new(BIN), &cp, "fuzz-node", "1xA100-80GB", dir.path());
    let operator = cp.operator();
    let tenant = cp.api(&cp.tenant("fuzz"));
    let spec = operator.get("/openapi.json");
    assert_eq!(spec.status, 200, "{:?}", spec.body);
    let doc = spec.body;
    let ops = operations(&doc);
    let callers = [
        operator.clone(),
        tenant.clone(),
        Api::new(&cp.addr, None),
        Api::new(&cp.addr, Some("not-a-token")),
        Api::new(&cp.addr, Some(JOIN_TOKEN)),
    ];
    let mut rng = Rng::new(seed);
    let (mut sent, mut failures) = (0u64, Vec::new());
    let mut statuses: std::collections::BTreeMap<u16, u64> = Default::default();
    let mut succeeded = std::collections::BTreeSet::new();
    for o in &ops {
        // Arming a fail point makes later commits fail on purpose (503).
        if o.path.starts_with("/v1/test/") {
            continue;
        }
        let body_schema = &o.op["requestBody"]["content"]["application/json"]["schema"];
        for case in 0..cases {
            // Mostly the two tokens that reach the handlers.
            let who = match rng.below(10) {
                0..=3 => 0,
                4..=6 => 1,
                n => n - 5,
            };
            let target = target(&doc, o, &mut rng);
            let (body, what) = match (body_schema.is_null(), rng.one_in(2)) {
                (true, _) => (String::new(), "no body"),
                (false, true) => (
                    gen::valid(&doc, body_schema, &mut rng, "", 0).to_string(),
                    "a valid body",
                ),
                (false, false) => gen::broken(&doc, resolve(&doc, body_schema), &mut rng),
            };
            let reply = callers[who].request(&o.method, &target, Some(&body));
            sent += 1;
            *statuses.entry(reply.status).or_default() += 1;
            if reply.status < 300 {
                succeeded.insert(format!("{} {}", o.method, o.path));
            }
            if let Err(why) = judge(&doc, o, &reply) {
                let shown: String = body.chars().take(300).collect();
                failures.push(format!(
                    "{} {target} (seed {seed}, case {case}, caller {who}, {what}: {shown}): {why}",
                    o.method
                ));
            }
        }
    }
    eprintln!(
        "api_fuzz: {sent} requests over {} operations, seed {seed}; statuses {statuses:?}; \
         {} operations answered a success",
        ops.len(),
        succeeded.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {sent} answers are not what /openapi.json documents:\n{}",
        failures.len(),
        failures
            .iter()
            .take(25)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(operator.get("/healthz").status, 200, "the server survived");
    assert!(
        sent >= ops.len() as u64 * cases / 2,
        "most operations were called"
    );
}
