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
//! cargo test --test it api_fuzz::`. The long form is `scripts/fuzz-api`
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

/// One answer read off a raw connection: status, lower-case headers, body.
struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Reads one answer from `s`, framed by its `content-length`.
fn read_answer(s: &mut std::net::TcpStream) -> RawAnswer {
    use std::io::Read;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            other => panic!(
                "the connection ended inside a head ({other:?}): {:?}",
                String::from_utf8_lossy(&head)
            ),
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = http::find_header(&headers, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    RawAnswer {
        status,
        headers,
        body,
    }
}

/// Sends `request` as raw bytes on a fresh connection and reads the answer.
fn raw(addr: &str, request: &[u8]) -> RawAnswer {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(request).unwrap();
    read_answer(&mut s)
}

/// The answer is the error envelope with a registered code of its status.
fn assert_envelope(what: &str, a: &RawAnswer, status: u16, code: u32) {
    assert_eq!(
        a.status,
        status,
        "{what}: {}",
        String::from_utf8_lossy(&a.body)
    );
    let ct = http::find_header(&a.headers, "content-type").unwrap_or_default();
    assert!(
        ct.starts_with("application/json"),
        "{what}: content-type {ct:?}"
    );
    let v: Value = serde_json::from_slice(&a.body)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {:?}", a.body));
    assert_eq!(v["code"], code, "{what}: {v}");
    let entry = caldera_spec::codes::by_code(code).expect("registered");
    assert_eq!(v["error"], entry.name, "{what}: {v}");
    assert_eq!(entry.http_status, status, "{what}");
    assert!(
        !v["msg"].as_str().unwrap_or_default().is_empty(),
        "{what}: {v}"
    );
    assert!(v["request_id"].is_string(), "{what}: {v}");
}

#[test]
fn parser_level_errors_answer_in_the_envelope_with_a_registered_code() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_CLIENT_REQUEST_TIMEOUT_MS", "700")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let addr = cp.addr.as_str();
    let host = format!("Host: {addr}\r\n");
    let get = |target: &[u8], extra: &str| -> Vec<u8> {
        [
            b"GET ".as_slice(),
            target,
            format!(" HTTP/1.1\r\n{host}{extra}\r\n").as_bytes(),
        ]
        .concat()
    };
    let post = |extra: &str| -> Vec<u8> {
        format!("POST /v1/tasks HTTP/1.1\r\n{host}Authorization: Bearer x\r\n{extra}\r\n")
            .into_bytes()
    };
    let tenant = cp.tenant("alpha");
    let tenant_post = |extra: &str| -> Vec<u8> {
        format!("POST /v1/tasks HTTP/1.1\r\n{host}Authorization: Bearer {tenant}\r\n{extra}\r\n")
            .into_bytes()
    };
    let big_query = format!("/v1/tasks?q={}", "a".repeat(20_000));
    let huge_query = format!("/v1/tasks?q={}", "a".repeat(140_000));
    let many_headers: String = (0..120).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>, u16, u32)> = vec![
        (
            "a control byte in Content-Type",
            post("Content-Type: application/\x01json\r\nContent-Length: 2\r\n\r\n{}"),
            400,
            40030,
        ),
        (
            "a 20-digit Content-Length",
            post("Content-Length: 99999999999999999999\r\n"),
            400,
            40030,
        ),
        (
            "a Content-Length that is not a number",
            post("Content-Length: 12a\r\n"),
            400,
            40030,
        ),
        (
            "two different Content-Lengths",
            post("Content-Length: 2\r\nContent-Length: 3\r\n"),
            400,
            40030,
        ),
        (
            "a path that is not UTF-8",
            get(b"/v1/tasks/\xff\xfe", ""),
            400,
            40030,
        ),
        (
            "a request line with no version",
            b"GET /\r\n\r\n".to_vec(),
            400,
            40030,
        ),
        (
            "more headers than are read",
            get(b"/healthz", &many_headers),
            431,
            43130,
        ),
        (
            "a head past the read buffer",
            get(huge_query.as_bytes(), ""),
            431,
            43130,
        ),
        (
            "bad chunked encoding",
            tenant_post("Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
            400,
            40030,
        ),
    ];
    for (what, request, status, code) in &cases {
        assert_envelope(what, &raw(addr, request), *status, *code);
    }
    // A 20k-character query reaches the route, which names the bad parameter.
    let a = raw(
        addr,
        &get(big_query.as_bytes(), "Authorization: Bearer x\r\n"),
    );
    assert!(a.status >= 400 && a.status < 500, "{}", a.status);
    assert_envelope(
        "a 20k query",
        &a,
        a.status,
        serde_json::from_slice::<Value>(&a.body).unwrap()["code"]
            .as_u64()
            .unwrap() as u32,
    );
    // A head that never ends: 408 once client-request-timeout-ms passes.
    let a = raw(
        addr,
        format!("GET /healthz HTTP/1.1\r\n{host}X-Slow: ").as_bytes(),
    );
    assert_envelope("a head that never ends", &a, 408, 40801);
    // A good request, then a bad one on the same connection: both answers
    // are whole, the second in the envelope.
    {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let mut both = get(b"/healthz", "");
        both.extend_from_slice(&post("Content-Length: 99999999999999999999\r\n"));
        s.write_all(&both).unwrap();
        let first = read_answer(&mut s);
        assert_eq!(
            first.status,
            200,
            "{}",
            String::from_utf8_lossy(&first.body)
        );
        assert_envelope("after a good request", &read_answer(&mut s), 400, 40030);
    }
    // The server still answers.
    assert_eq!(cp.operator().get("/healthz").status, 200);
}
