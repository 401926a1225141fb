//! The portal and the REST API are two faces of one API layer: the same
//! refusal reaches a person on a page and a client in the envelope with the
//! same code and sentence, and another tenant's task is "not found" on both,
//! because a page's form becomes the same typed request a handler's body
//! does. Against the real binary; the service waits in the queue (no node
//! has joined), which is all a refusal before any action needs.
use caldera_chaos_tests::portal::{text, value_after, Browser};
use caldera_chaos_tests::process::ControlPlane;
use serde_json::Value;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// The error page's sentence and code, as a person reads them.
fn page_error(html: &str) -> (String, String) {
    let code = value_after(html, "id=\"error-message\"", "data-code").unwrap_or_default();
    let start = html
        .find("id=\"error-message\"")
        .and_then(|i| html[i..].find('>').map(|j| i + j + 1))
        .unwrap_or(html.len());
    let end = html[start..].find("</p>").map_or(html.len(), |j| start + j);
    let msg = html[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    (code, msg)
}

/// The envelope's sentence as a page shows it: the field named after it.
fn as_on_a_page(body: &Value) -> String {
    let msg = body["msg"].as_str().unwrap_or_default();
    match body["field"].as_str() {
        Some(f) => format!("{msg} (field {f})"),
        None => msg.to_string(),
    }
}

#[test]
fn a_page_and_the_api_refuse_the_same_request_with_the_same_code_and_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), dir.path(), &[]);
    let alpha_token = cp.tenant("alpha");
    let bravo_token = cp.tenant("bravo");
    let alpha = cp.api(&alpha_token);
    let svc = r#"{"task_id":"svc","task_type":"inference","replicas":2,
        "resources":{"cpu":{"cores":1}},"command":["sleep","600"]}"#;
    let r = alpha.post("/v1/tasks", svc);
    assert_eq!(r.status, 201, "{:#}", r.body);
    let mut page = Browser::logged_in(&cp.addr, &alpha_token);
    let csrf = page.csrf("/tasks/svc?tenant=alpha");

    // Scaling to 0 replicas: refused naming the field, on both faces.
    let rest = alpha.put("/v1/tasks/svc/replicas", r#"{"replicas":0}"#);
    assert_eq!(rest.status, 400, "{:#}", rest.body);
    assert_eq!(rest.body["field"], "replicas", "{:#}", rest.body);
    let form = page.post_form(
        "/tasks/svc/scale?tenant=alpha",
        &[("csrf", &csrf), ("replicas", "0")],
    );
    assert_eq!(form.status, rest.status, "{}", text(&form));
    let (code, msg) = page_error(text(&form));
    assert_eq!(code, rest.body["code"].to_string(), "{}", text(&form));
    assert_eq!(msg, as_on_a_page(&rest.body));

    // A model not written name:version: the same refusal of the swap.
    let rest = alpha.post("/v1/tasks/svc/model", r#"{"model":"no-version"}"#);
    assert_eq!(rest.status, 400, "{:#}", rest.body);
    let form = page.post_form(
        "/tasks/svc/swap?tenant=alpha",
        &[("csrf", &csrf), ("model", "no-version")],
    );
    assert_eq!(form.status, rest.status, "{}", text(&form));
    let (code, msg) = page_error(text(&form));
    assert_eq!(code, rest.body["code"].to_string(), "{}", text(&form));
    assert_eq!(msg, as_on_a_page(&rest.body));

    // Another tenant's service is not found, by the API and by the page,
    // and the page's scale and release change nothing of it.
    let bravo = cp.api(&bravo_token);
    let rest = bravo.get("/v1/tasks/svc?tenant=alpha");
    assert_eq!(rest.status, 403, "naming another tenant: {:#}", rest.body);
    let rest = bravo.get("/v1/tasks/svc");
    assert_eq!(rest.status, 404, "{:#}", rest.body);
    let mut other = Browser::logged_in(&cp.addr, &bravo_token);
    let other_csrf = other.csrf("/tasks");
    assert_eq!(other.get("/tasks/svc").status, 404);
    assert_eq!(other.get("/tasks/svc?tenant=alpha").status, 403);
    for action in ["scale", "release"] {
        let r = other.post_form(
            &format!("/tasks/svc/{action}"),
            &[("csrf", &other_csrf), ("replicas", "3")],
        );
        assert_eq!(r.status, 404, "{action}: {}", text(&r));
        let (code, msg) = page_error(text(&r));
        assert_eq!(code, rest.body["code"].to_string());
        assert_eq!(msg, as_on_a_page(&rest.body));
    }
    let after = alpha.get("/v1/tasks/svc");
    assert_eq!(after.body["data"]["replicas"], 2, "{:#}", after.body);
    assert_eq!(after.body["data"]["state"], "queued", "{:#}", after.body);

    // The listing a page shows is the API's: the same tasks, by the same
    // filter, refused the same way when the filter is bad.
    let rest = alpha.get("/v1/tasks?state=nonsense");
    assert_eq!(rest.status, 400, "{:#}", rest.body);
    let listing = page.get("/tasks?state=nonsense");
    assert_eq!(listing.status, 400, "{}", text(&listing));
    let (code, msg) = page_error(text(&listing));
    assert_eq!(code, rest.body["code"].to_string());
    assert_eq!(msg, as_on_a_page(&rest.body));

    // Filters are checked in one order on both faces: who may read, then
    // which task, then the page. Two tenants holding the id "svc", the
    // operator naming it alone is asked for the tenant even with a bad cursor.
    let r = bravo.post("/v1/tasks", svc);
    assert_eq!(r.status, 201, "{:#}", r.body);
    let op = cp.operator();
    let rest = op.get("/v1/events?task=svc&cursor=x");
    assert_eq!(
        rest.status, 409,
        "the task before the page: {:#}",
        rest.body
    );
    let mut op_page = Browser::logged_in(&cp.addr, caldera_chaos_tests::OPERATOR_TOKEN);
    let events = op_page.get("/events?task=svc");
    assert_eq!(events.status, 409, "{}", text(&events));
    let (code, _) = page_error(text(&events));
    assert_eq!(code, rest.body["code"].to_string());
    let rest = alpha.get("/v1/events?tenant=bravo&limit=0");
    assert_eq!(
        rest.status, 403,
        "the tenant before the page: {:#}",
        rest.body
    );
    assert_eq!(page.get("/events?tenant=bravo").status, 403);
}

/// A reservation that holds its room runs nothing: its log answer reads no
/// offset, so a follower's `from_byte` (even one that is not a number) is
/// answered with the note, by the API and by the page's follow alike.
#[test]
fn a_held_reservations_log_reads_no_offset_on_either_face() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _agent = caldera_chaos_tests::Agent::start(
        Path::new(BIN),
        &cp,
        "res-node",
        "1xA100-80GB",
        dir.path(),
    );
    let token = cp.tenant("holds");
    let api = cp.api(&token);
    let joined = caldera_chaos_tests::wait_until(std::time::Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["connected"] == true))
    });
    assert!(joined, "the agent joins");
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"held","task_type":"training","resources":{"gpu":{"count":1}}}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    api.wait_task("held", 20, "running", |v| v["state"] == "running");
    let rest = api.get("/v1/tasks/held/logs?from_byte=later");
    assert_eq!(rest.status, 200, "{:#}", rest.body);
    assert_eq!(rest.data()["reservation"], true, "{:#}", rest.body);
    let mut page = Browser::logged_in(&cp.addr, &token);
    let follow = page.get("/tasks/held/log?tenant=holds&from_byte=later");
    assert_eq!(follow.status, 200, "{}", text(&follow));
    // A task that runs something reads the offset, and a bad one is named.
    let r = api.post(
        "/v1/tasks",
        r#"{"task_id":"runs","task_type":"training","resources":{"cpu":{"cores":1}},"command":["sleep","60"]}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    api.wait_task("runs", 20, "running", |v| v["state"] == "running");
    let rest = api.get("/v1/tasks/runs/logs?from_byte=later");
    assert_eq!(rest.status, 400, "{:#}", rest.body);
    assert_eq!(rest.body["field"], "from_byte", "{:#}", rest.body);
    let follow = page.get("/tasks/runs/log?tenant=holds&from_byte=later");
    assert_eq!(follow.status, 400, "{}", text(&follow));
}
