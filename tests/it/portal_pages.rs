//! The portal's pages against the real binary and a real agent:
//! every page answers with a session and sends the browser to the login
//! without one; a tenant cannot open another tenant's task page while the
//! operator can; the submit form creates the task as `POST /v1/tasks` does
//! and shows a validation error at the field it names; release needs the
//! session's CSRF token and its confirmation form; the node card shows the
//! task's slice of its GPU.
use caldera_chaos_tests::portal::{text, value_after, Browser};
use caldera_chaos_tests::{Agent, ControlPlane, OPERATOR_TOKEN};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// The seed's request, sized for one simulated A100-80GB, as form fields.
const SEED_FIELDS: &[(&str, &str)] = &[
    ("task_id", "train_20240716_001"),
    ("task_type", "training"),
    ("priority", "high"),
    ("resources.gpu.count", "1"),
    ("resources.gpu.memory_gb", "40"),
    ("resources.gpu.model", "A100"),
    ("resources.cpu.cores", "4"),
    ("resources.memory.size_gb", "16"),
    ("resources.disk.size_gb", "10"),
    ("duration", "01:00:00"),
    ("image", "registry.internal/deeplearning/pytorch:2.1-cu12.1"),
    ("command", ""),
    ("replicas", ""),
    ("model", ""),
];

fn with_csrf<'a>(csrf: &'a str, fields: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = vec![("csrf", csrf)];
    all.extend_from_slice(fields);
    all
}

#[test]
fn the_portal_end_to_end_with_a_real_agent() {
    let dir = tempfile::tempdir().unwrap();
    // The idle inspector samples every 300 ms: a task page's use curve fills quickly.
    let env = [("CALDERA_USAGE_SAMPLE_MS", "300")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "1xA100-80GB", dir.path());
    assert!(caldera_chaos_tests::wait_until(
        std::time::Duration::from_secs(20),
        || caldera_chaos_tests::nodes_connected(&cp) == 1
    ));
    let alpha_token = cp.tenant("alpha");
    let bravo_token = cp.tenant("bravo");
    let alpha_api = cp.api(&alpha_token);
    let mut alpha = Browser::logged_in(&cp.addr, &alpha_token);
    let mut bravo = Browser::logged_in(&cp.addr, &bravo_token);
    let mut op = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);

    // A validation error is shown at the field it names, and nothing is created.
    let csrf = alpha.csrf("/submit");
    let mut bad: Vec<(&str, &str)> = SEED_FIELDS.to_vec();
    bad[3] = ("resources.gpu.count", "four");
    let r = alpha.post_form("/submit", &with_csrf(&csrf, &bad));
    assert_eq!(r.status, 400, "{}", text(&r));
    let at_field = value_after(
        text(&r),
        "id=\"error-resources.gpu.count\"",
        "data-field-error",
    );
    assert_eq!(at_field.as_deref(), Some("resources.gpu.count"));
    let marker = "data-field-error=\"resources.gpu.count\">";
    let after = &text(&r)[text(&r).find(marker).unwrap() + marker.len()..];
    let msg = &after[..after.find("</p>").unwrap()];
    assert!(!msg.is_empty(), "the error is at the field: {}", text(&r));
    assert!(
        text(&r).contains("value=\"four\""),
        "the form keeps what was typed"
    );
    assert_eq!(alpha_api.get("/v1/tasks/train_20240716_001").status, 404);

    // A form submit without the CSRF token changes nothing.
    let r = alpha.post_form("/submit", SEED_FIELDS);
    assert_eq!(r.status, 403, "{}", text(&r));
    assert_eq!(alpha_api.get("/v1/tasks/train_20240716_001").status, 404);

    // The form creates the task as the API does: the same spec as the
    // seed's JSON submitted to POST /v1/tasks under another id.
    let r = alpha.post_form("/submit", &with_csrf(&csrf, SEED_FIELDS));
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(
        r.header("location"),
        Some("/tasks/train_20240716_001?tenant=alpha")
    );
    let twin = r#"{"task_id":"twin","task_type":"training","priority":"high","resources":{"gpu":{"count":1,"memory_gb":40,"model":"A100"},"cpu":{"cores":4},"memory":{"size_gb":16},"disk":{"size_gb":10}},"duration":"01:00:00","image":"registry.internal/deeplearning/pytorch:2.1-cu12.1"}"#;
    let via_api = alpha_api.post("/v1/tasks", twin);
    assert_eq!(via_api.status, 201, "{}", via_api.body);
    let via_form = alpha_api.wait_task("train_20240716_001", 20, "running", |v| {
        v["state"] == "running"
    });
    let mut form_spec = via_form["spec"].clone();
    let mut api_spec = via_api.data()["spec"].clone();
    form_spec["task_id"] = "x".into();
    api_spec["task_id"] = "x".into();
    assert_eq!(form_spec, api_spec);
    // The twin takes the GPU's other 40 GB.
    alpha_api.wait_task("twin", 20, "running", |v| v["state"] == "running");

    // The dry run shows its answer below the form and submits nothing.
    let mut dry: Vec<(&str, &str)> = SEED_FIELDS.to_vec();
    dry[0] = ("task_id", "only-a-dry-run");
    let r = alpha.post_form("/submit/dry-run", &with_csrf(&csrf, &dry));
    assert_eq!(r.status, 200, "{}", text(&r));
    let result = &text(&r)[text(&r).find("id=\"dry-run-result\"").unwrap()..];
    assert!(result.contains("Dry run"), "{result}");
    assert!(
        text(&r).contains("value=\"only-a-dry-run\""),
        "the form is kept"
    );
    assert_eq!(alpha_api.get("/v1/tasks/only-a-dry-run").status, 404);

    // The JSON editor, when filled in, is the request; the operator names the tenant.
    let op_csrf = op.csrf("/submit");
    let json = r#"{"task_id":"from-json","task_type":"training","resources":{"cpu":{"cores":1}}}"#;
    let r = op.post_form(
        "/submit",
        &[
            ("csrf", &op_csrf),
            ("spec_json", json),
            ("task_id", "ignored"),
        ],
    );
    assert_eq!(
        r.status,
        400,
        "the operator must name a tenant: {}",
        text(&r)
    );
    assert!(
        text(&r).contains("data-field-error=\"tenant\">the operator"),
        "{}",
        text(&r)
    );
    let r = op.post_form(
        "/submit",
        &[("csrf", &op_csrf), ("spec_json", json), ("tenant", "alpha")],
    );
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(alpha_api.get("/v1/tasks/from-json").status, 200);
    assert_eq!(alpha_api.get("/v1/tasks/ignored").status, 404);

    // Every page answers 200 with a session (tenant and operator), is
    // timed and under 200 KB, and sends the browser to the login without one.
    let pages = [
        "/",
        "/?range=1h",
        "/?range=14d",
        "/?fragment=live",
        "/submit",
        "/tasks",
        "/tasks?state=running&type=training&model=A100",
        "/tasks/train_20240716_001?tenant=alpha",
        "/tasks/train_20240716_001/log?tenant=alpha",
        "/nodes",
        "/tenants",
        "/tenants/alpha/cost.csv",
        "/models",
        "/events",
        "/events?kind=task_transition&task=train_20240716_001&since=2020-01-01T00:00:00Z",
    ];
    let mut anonymous = Browser::new(&cp.addr);
    for p in pages {
        for (who, b) in [("alpha", &mut alpha), ("operator", &mut op)] {
            let r = b.get(p);
            assert_eq!(r.status, 200, "{who} {p}: {}", text(&r));
            assert!(
                text(&r).len() < 200_000,
                "{who} {p} is {} bytes",
                text(&r).len()
            );
            let timing = r.header("server-timing").unwrap_or_default().to_string();
            if !p.ends_with(".csv") && !p.contains("/log") {
                assert!(timing.starts_with("render;dur="), "{who} {p}: {timing:?}");
            }
        }
        let r = anonymous.get(p);
        if p.contains("fragment=live") {
            assert_eq!(r.status, 401, "{p}");
        } else {
            assert_eq!(r.status, 303, "{p}");
            assert_eq!(r.header("location"), Some("/login"), "{p}");
        }
    }
    // The live fragment is the page's live part only, for the script to swap in.
    let live = alpha.get("/nodes?fragment=live");
    assert!(!text(&live).contains("<html") && text(&live).contains("data-node=\"node-a\""));
    // The log's next piece, from an offset, as the page's follow reads it.
    let job = r#"{"task_id":"talker","task_type":"training","resources":{"cpu":{"cores":1}},"command":["sh","-c","echo hello-portal; exec sleep 60"]}"#;
    assert_eq!(alpha_api.post("/v1/tasks", job).status, 201);
    alpha_api.wait_task("talker", 20, "running", |v| v["state"] == "running");
    let mut said = String::new();
    let spoke = caldera_chaos_tests::wait_until(std::time::Duration::from_secs(10), || {
        let r = alpha.get("/tasks/talker/log?tenant=alpha&from_byte=0");
        said = text(&r).to_string();
        r.status == 200 && said.contains("hello-portal") && r.header("x-log-end").is_some()
    });
    assert!(spoke, "{said}");
    let page = alpha.get("/tasks/talker");
    assert!(text(&page).contains("id=\"log-follow\"") && text(&page).contains("hello-portal"));
    // Its use curve is its own allocation's: granted vs measured, from the
    // node's reports (several samples once the inspector has passed).
    let mut page_text = String::new();
    let curve = caldera_chaos_tests::wait_until(std::time::Duration::from_secs(20), || {
        page_text = text(&alpha.get("/tasks/talker")).to_string();
        page_text.contains("id=\"chart-task-use\"")
            && page_text.contains("This task's allocation")
            && page_text.matches("<circle class=\"series used\"").count() == 1
            && page_text.contains("data-series=\"used\" points=\"")
            && !page_text.contains("data-series=\"used\" points=\"\"")
    });
    assert!(
        curve,
        "the task page shows its allocation's use curve: {page_text}"
    );
    let tasks = alpha.get("/tasks");
    assert!(text(&tasks).contains("data-task-id=\"train_20240716_001\""));
    let csv = alpha.get("/tenants/alpha/cost.csv");
    assert!(csv
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/csv"));

    // The node card shows the task's slice of its GPU, with the tenant's id.
    let nodes = alpha.get("/nodes");
    assert!(
        text(&nodes).contains("data-node=\"node-a\""),
        "{}",
        text(&nodes)
    );
    assert!(text(&nodes).contains("data-task-id=\"train_20240716_001\""));
    assert!(
        text(&nodes).contains("data-mb=\"40960\""),
        "{}",
        text(&nodes)
    );
    // Bravo sees the room taken, not whose it is.
    let nodes = bravo.get("/nodes");
    assert!(!text(&nodes).contains("train_20240716_001"));
    assert!(text(&nodes).contains("another tenant"));

    // Another tenant's task page is the 404 page; the operator opens it.
    let r = bravo.get("/tasks/train_20240716_001?tenant=alpha");
    assert_eq!(
        r.status,
        403,
        "naming another tenant is refused: {}",
        text(&r)
    );
    let r = bravo.get("/tasks/train_20240716_001");
    assert_eq!(r.status, 404, "{}", text(&r));
    assert!(!text(&r).contains("alpha"), "{}", text(&r));
    let r = op.get("/tasks/train_20240716_001?tenant=alpha");
    assert_eq!(r.status, 200);
    assert!(text(&r).contains("id=\"release-confirm\""));
    assert!(
        text(&r).contains("data-task-id=\"train_20240716_001\""),
        "topology"
    );

    // Release without the CSRF token (or another session's) changes nothing.
    let release = "/tasks/train_20240716_001/release?tenant=alpha";
    let bravo_csrf = bravo.csrf("/");
    for fields in [vec![], vec![("csrf", bravo_csrf.as_str())]] {
        let r = alpha.post_form(release, &fields);
        assert_eq!(r.status, 403, "{}", text(&r));
        assert_eq!(alpha_api.task("train_20240716_001")["state"], "running");
    }
    // Bravo's own session cannot release alpha's task either.
    let r = bravo.post_form(release, &[("csrf", &bravo_csrf)]);
    assert_eq!(r.status, 403, "{}", text(&r));
    assert_eq!(alpha_api.task("train_20240716_001")["state"], "running");
    // With it: released.
    let r = alpha.post_form(release, &[("csrf", &csrf)]);
    assert_eq!(r.status, 303, "{}", text(&r));
    alpha_api.wait_task("train_20240716_001", 20, "released", |v| {
        v["state"] == "released"
    });
    let page = alpha.get("/tasks/train_20240716_001");
    assert!(text(&page).contains("data-state=\"released\""));

    // A tenant's session may not drain a node; the operator's may.
    let r = alpha.post_form(
        "/nodes/node-a/cordon",
        &[("csrf", &csrf), ("action", "cordon")],
    );
    assert_eq!(r.status, 403, "{}", text(&r));
    assert!(text(&r).contains("40303"));
    let op_csrf = op.csrf("/nodes");
    let r = op.post_form(
        "/nodes/node-a/cordon",
        &[("csrf", &op_csrf), ("action", "cordon")],
    );
    assert_eq!(r.status, 303, "{}", text(&r));
    let node = cp.operator().get("/v1/nodes/node-a");
    assert!(node.data()["cordon"].is_string(), "{:#}", node.body);
}

/// The text of the `<select>` named `name`: its options in order.
fn options_of(html: &str, name: &str) -> Vec<String> {
    let at = html
        .find(&format!("name=\"{name}\""))
        .expect("the select is on the page");
    let rest = &html[at..];
    let end = rest.find("</select>").unwrap_or(rest.len());
    rest[..end]
        .split("<option value=\"")
        .skip(1)
        .filter_map(|o| o.split('"').next().map(str::to_string))
        .collect()
}

/// What a new user met: the form's priority defaults to the API's
/// (medium), a portal submit that would preempt running work shows which
/// tasks first and submits only when confirmed (the API's dry run names
/// them too), a service's page shows its replicas' allocations rather than
/// "No allocation", charts carry a time axis, and the operator sees every
/// tenant's cost and their total (`GET /v1/cost`, the tenants page).
#[test]
fn a_new_users_portal_warns_before_preempting_and_shows_services_time_and_totals() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("CALDERA_USAGE_SAMPLE_MS", "300")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "2xA100-80GB", dir.path());
    assert!(caldera_chaos_tests::wait_until(
        std::time::Duration::from_secs(20),
        || caldera_chaos_tests::nodes_connected(&cp) == 1
    ));
    let token = cp.tenant("alpha");
    let api = cp.api(&token);
    let mut alpha = Browser::logged_in(&cp.addr, &token);
    let mut op = Browser::logged_in(&cp.addr, OPERATOR_TOKEN);

    // Untouched, the form asks what the API gives a request without a priority.
    let form = alpha.get("/submit");
    assert_eq!(
        options_of(text(&form), "priority")[0],
        "medium",
        "{}",
        text(&form)
    );

    // A service of two 10 GB replicas, one per GPU; then a low-priority
    // job takes 60 GB of each GPU.
    let svc = r#"{"task_id":"svc","task_type":"inference","replicas":2,"resources":{"gpu":{"count":1,"memory_gb":10},"cpu":{"cores":1}},"command":["sleep","300"]}"#;
    assert_eq!(api.post("/v1/tasks", svc).status, 201);
    for r in ["svc.r0", "svc.r1"] {
        api.wait_task(r, 20, "running", |v| v["state"] == "running");
    }
    let six = r#"{"task_id":"six","task_type":"training","priority":"low","resources":{"gpu":{"count":2,"memory_gb":60},"cpu":{"cores":1}},"command":["sleep","300"]}"#;
    assert_eq!(api.post("/v1/tasks", six).status, 201);
    api.wait_task("six", 20, "running", |v| v["state"] == "running");

    // A high-priority 40 GB request finds no room: the API's dry run says
    // it would preempt "six".
    let urgent = [
        ("task_id", "urgent"),
        ("task_type", "training"),
        ("priority", "high"),
        ("resources.gpu.count", "1"),
        ("resources.gpu.memory_gb", "40"),
        ("resources.cpu.cores", "1"),
        ("command", "sleep 60"),
    ];
    let json = r#"{"task_id":"urgent","task_type":"training","priority":"high","resources":{"gpu":{"count":1,"memory_gb":40},"cpu":{"cores":1}},"command":["sleep","60"]}"#;
    let d = api.post("/v1/tasks?dry_run=true", json);
    assert_eq!(d.status, 200, "{:#}", d.body);
    assert_eq!(d.data()["preempts"][0]["task"], "six", "{:#}", d.body);
    assert_eq!(d.data()["node"], "node-a", "{:#}", d.body);

    // The portal's dry run shows that warning ...
    let csrf = alpha.csrf("/submit");
    let r = alpha.post_form("/submit/dry-run", &with_csrf(&csrf, &urgent));
    assert_eq!(r.status, 200, "{}", text(&r));
    assert!(
        text(&r).contains("preempt-warning") && text(&r).contains("six"),
        "{}",
        text(&r)
    );
    // ... and Submit does not submit it before the user has seen it.
    let r = alpha.post_form("/submit", &with_csrf(&csrf, &urgent));
    assert_eq!(r.status, 200, "{}", text(&r));
    assert!(
        text(&r).contains("preempt-warning") && text(&r).contains("name=\"confirm_preempt\""),
        "{}",
        text(&r)
    );
    assert_eq!(api.get("/v1/tasks/urgent").status, 404);
    assert_eq!(api.task("six")["state"], "running");
    // Confirmed, it is submitted.
    let mut confirmed = with_csrf(&csrf, &urgent);
    confirmed.push(("confirm_preempt", "yes"));
    let r = alpha.post_form("/submit", &confirmed);
    assert_eq!(r.status, 303, "{}", text(&r));
    assert_eq!(api.get("/v1/tasks/urgent").status, 200);

    // The service's page shows where its replicas hold room.
    let page = alpha.get("/tasks/svc");
    assert_eq!(page.status, 200, "{}", text(&page));
    let topo = &text(&page)[text(&page).find("id=\"topology\"").unwrap()..];
    assert!(!topo.contains("No allocation"), "{topo}");
    for r in ["svc.r0", "svc.r1"] {
        assert!(topo.contains(&format!("data-replica=\"{r}\"")), "{topo}");
    }
    assert!(topo.contains("node-a"), "{topo}");

    // Charts carry a time axis.
    let overview = op.get("/");
    assert!(
        text(&overview).contains("class=\"tick time\"") && text(&overview).contains(" UTC</text>"),
        "{}",
        text(&overview)
    );

    // The operator's total across tenants: the API, and the tenants page.
    let all = cp.operator().get("/v1/cost");
    assert_eq!(all.status, 200, "{:#}", all.body);
    let lines = all.data()["tenants"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(lines.iter().any(|l| l["key"] == "alpha"), "{:#}", all.body);
    assert_eq!(all.data()["total"]["key"], "total", "{:#}", all.body);
    assert!(
        all.data()["total"]["allocations"].as_u64().unwrap_or(0) >= 3,
        "{:#}",
        all.body
    );
    assert_eq!(api.get("/v1/cost").status, 403);
    let tenants = op.get("/tenants");
    assert!(
        text(&tenants).contains("id=\"cost-total\""),
        "{}",
        text(&tenants)
    );
    assert!(!alpha
        .get("/tenants")
        .body
        .as_str()
        .unwrap_or("")
        .contains("cost-total"));
}
