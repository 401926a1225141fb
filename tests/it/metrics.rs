//! `/metrics` as a scraper and a dashboard see it, with a
//! real server, a real agent and real tasks: the exposition is valid
//! OpenMetrics, its figures are the API's figures, HTTP requests are counted
//! by route pattern (never by raw path), and every metric the Grafana
//! dashboard in `docs/grafana/caldera.json` and the alerting rules in
//! `docs/operations/caldera-alerts.yml` query exists in it.
use caldera_chaos_tests::exposition::{self, Exposition};
use caldera_chaos_tests::{fake_node, promql, wait_until, Agent, ControlPlane, JOIN_TOKEN};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// A control plane, one agent with one simulated 80 GB A100 and a tenant
/// `team-a` (guarantee 2 GPUs and 64 GB memory, may borrow 1 GPU more)
/// running `half` (40 GB of the GPU), with `whole` (the whole GPU) waiting,
/// and a refused second session for `node-a` (so every family that counts
/// events has had one).
struct Pool {
    cp: ControlPlane,
    _agent: Agent,
    _dir: tempfile::TempDir,
}

fn pool() -> Pool {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let agent = Agent::start(Path::new(BIN), &cp, "node-a", "1xA100-80GB", dir.path());
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes/node-a").data()["connected"] == true
    }));
    let made = cp.operator().post(
        "/v1/tenants",
        r#"{"name":"team-a","quota":{"gpus":2,"memory_gb":64},"borrowing_limit":{"gpus":1}}"#,
    );
    assert_eq!(made.status, 201, "{:?}", made.body);
    let api = cp.api(made.data()["token"].as_str().unwrap_or_default());
    let half = r#"{"task_id":"half","task_type":"training","resources":{"gpu":{"count":1,"memory_gb":40}},
        "duration":"01:00:00","command":["sleep","60"]}"#;
    let r = api.post("/v1/tasks", half);
    assert_eq!(r.status, 201, "{:?}", r.body);
    api.wait_task("half", 20, "running", |v| v["state"] == "running");
    let whole = r#"{"task_id":"whole","task_type":"training","resources":{"gpu":{"count":1}},"command":["true"]}"#;
    let r = api.post("/v1/tasks", whole);
    assert_eq!(r.status, 201, "{:?}", r.body);
    api.wait_task("whole", 20, "a pending reason", |v| {
        v["state"] == "queued" && v["pending_reason"].is_string()
    });
    let (_s, reply) = fake_node::hello(&cp.addr, JOIN_TOKEN, "node-a", 1, None).unwrap();
    assert_eq!(reply["type"], "refused", "{reply}");
    Pool {
        cp,
        _agent: agent,
        _dir: dir,
    }
}

/// One scrape, parsed and checked (the test fails on an invalid exposition).
fn scrape(cp: &ControlPlane) -> Exposition {
    let r = cp.operator().get("/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = r.body.as_str().unwrap_or_default();
    exposition::parse(text).unwrap_or_else(|e| panic!("invalid exposition: {e}\n{text}"))
}

fn value(e: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    e.value(name, labels)
        .unwrap_or_else(|| panic!("no series {name}{labels:?}"))
}

#[test]
fn the_exposition_is_valid_and_shows_the_apis_figures() {
    let p = pool();
    let op = p.cp.operator();
    let e = scrape(&p.cp);
    let util = op.get("/v1/utilization").data().clone();
    let total = &util["total"];
    // One accounting rule: the pool's and the tenant's figures are the API's.
    for (resource, api, scale) in [
        ("gpus", &total["gpus"], 1.0),
        ("gpu_memory_bytes", &total["gpu_memory_mb"], MIB),
        ("cpu", &total["cpu_cores"], 1.0),
        ("memory_bytes", &total["memory_mb"], MIB),
    ] {
        for figure in ["capacity", "allocated"] {
            let want = api[figure].as_f64().unwrap_or(-1.0) * scale;
            let got = value(
                &e,
                &format!("caldera_pool_{figure}"),
                &[("resource", resource)],
            );
            assert_eq!(got, want, "{figure} {resource}");
        }
    }
    // 40 GB of one 80 GB GPU: half a GPU, 40 GiB, by the pool and by team-a.
    assert_eq!(
        value(&e, "caldera_pool_allocated", &[("resource", "gpus")]),
        0.5
    );
    let team = [("tenant", "team-a"), ("resource", "gpu_memory_bytes")];
    assert_eq!(value(&e, "caldera_tenant_allocated", &team), 40.0 * GIB);
    let gpu = [
        ("node", "node-a"),
        ("gpu", "0"),
        ("model", "A100-80GB"),
        ("simulated", "true"),
    ];
    assert_eq!(
        value(&e, "caldera_gpu_memory_allocated_bytes", &gpu),
        40.0 * GIB
    );
    assert_eq!(
        value(&e, "caldera_gpu_memory_total_bytes", &gpu),
        80.0 * GIB
    );
    assert_eq!(value(&e, "caldera_gpu_healthy", &gpu), 1.0);
    // The quota as configured, in base units; within it, nothing borrowed.
    let t = |r| [("tenant", "team-a"), ("resource", r)];
    assert_eq!(value(&e, "caldera_tenant_guarantee", &t("gpus")), 2.0);
    assert_eq!(
        value(&e, "caldera_tenant_guarantee", &t("memory_bytes")),
        64.0 * GIB
    );
    assert_eq!(value(&e, "caldera_tenant_borrowing_limit", &t("gpus")), 1.0);
    assert_eq!(
        e.value("caldera_tenant_guarantee", &t("cpu")),
        None,
        "no cpu limit set"
    );
    assert_eq!(value(&e, "caldera_tenant_borrowed", &t("gpus")), 0.0);
    // The node in exactly one state; `whole` waits at medium priority,
    // turned down for want of an idle GPU; `half` ran once.
    assert_eq!(e.sum("caldera_node_health", &[("node", "node-a")]), 1.0);
    assert_eq!(
        value(
            &e,
            "caldera_node_health",
            &[("node", "node-a"), ("state", "healthy")]
        ),
        1.0
    );
    assert_eq!(
        value(&e, "caldera_queue_depth", &[("priority", "medium")]),
        1.0
    );
    assert_eq!(
        value(&e, "caldera_queue_depth", &[("priority", "high")]),
        0.0
    );
    assert!(
        value(
            &e,
            "caldera_queue_oldest_age_seconds",
            &[("priority", "medium")]
        ) >= 0.0
    );
    assert!(
        value(
            &e,
            "caldera_placement_rejections_total",
            &[("reason", "whole_gpus")]
        ) >= 1.0
    );
    assert!(
        value(
            &e,
            "caldera_placement_decisions_total",
            &[("outcome", "placed")]
        ) >= 1.0
    );
    let ran = [("task_type", "training")];
    assert_eq!(
        value(&e, "caldera_task_submit_to_running_seconds_count", &ran),
        1.0
    );
    assert!(
        value(
            &e,
            "caldera_storage_commit_seconds_count",
            &[("site", "grant")]
        ) >= 1.0
    );
    assert!(value(&e, "caldera_storage_flush_seconds_count", &[]) >= 1.0);
    assert!(value(&e, "caldera_scheduling_cycle_seconds_count", &[]) >= 1.0);
    assert_eq!(value(&e, "caldera_queued_tasks", &[]), 1.0);
    assert_eq!(value(&e, "caldera_allocations", &[]), 1.0);
}

#[test]
fn requests_are_counted_by_route_pattern_and_refusals_by_node() {
    let p = pool();
    let op = p.cp.operator();
    let route = [
        ("route", "/v1/tasks/{id}"),
        ("method", "GET"),
        ("code", "404"),
    ];
    let before = scrape(&p.cp).sum("caldera_http_requests_total", &route);
    for id in ["no-such-1", "no-such-2", "no-such-3"] {
        assert_eq!(op.get(&format!("/v1/tasks/{id}")).status, 404);
    }
    assert_eq!(op.get("/no/such/path").status, 404);
    let e = scrape(&p.cp);
    assert_eq!(e.sum("caldera_http_requests_total", &route), before + 3.0);
    let unmatched = [("route", "unmatched"), ("code", "404"), ("class", "4xx")];
    assert_eq!(e.sum("caldera_http_requests_total", &unmatched), 1.0);
    // The scrape before this one is counted under its own pattern.
    assert!(e.sum("caldera_http_requests_total", &[("route", "/metrics")]) >= 1.0);
    for s in e.samples().filter(|s| s.name.starts_with("caldera_http_")) {
        let raw = s
            .labels
            .iter()
            .any(|(_, v)| v.contains("no-such") || v.contains("/no/"));
        assert!(!raw, "a raw path in a label: {s:?}");
    }
    // The second session for a connected name was refused, and counted.
    assert!(e.sum("caldera_node_reports_refused_total", &[("node", "node-a")]) >= 1.0);
}

/// The metric names a dashboard panel's or variable's query reads; a
/// variable's `label_values(metric, label)` reads only its metric.
fn queried(expr: &str) -> Vec<String> {
    if let Some(args) = expr.trim().strip_prefix("label_values(") {
        let metric = args.split(',').next().unwrap_or_default();
        return promql::metric_names(metric).into_iter().collect();
    }
    promql::metric_names(expr).into_iter().collect()
}

#[test]
fn every_metric_the_dashboard_queries_exists() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana/caldera.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let d: Value = serde_json::from_str(&text).unwrap();
    // Importable: a schema version and a Prometheus data source input that
    // every panel and query names.
    assert!(d["schemaVersion"].as_u64().unwrap_or(0) >= 30);
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS");
    assert_eq!(d["__inputs"][0]["pluginId"], "prometheus");
    let mut exprs: Vec<(String, String)> = Vec::new();
    for panel in d["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap_or_default().to_string();
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title} queries nothing");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
            exprs.push((title.clone(), t["expr"].as_str().unwrap_or_default().into()));
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        let q = v["query"]["query"].as_str().unwrap_or_default();
        exprs.push((format!("variable {}", v["name"]), q.into()));
    }
    let p = pool();
    let e = scrape(&p.cp);
    let exposed = e.sample_names();
    let mut checked = 0;
    for (title, expr) in &exprs {
        let names = queried(expr);
        assert!(!names.is_empty(), "{title}: no metric in {expr:?}");
        for name in names {
            assert!(
                exposed.contains(name.as_str()),
                "{title}: {name} (in {expr:?}) is not in /metrics; exposed: {exposed:?}"
            );
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} metric uses checked");
}

/// The `expr:` of every rule in the alerting rules file, with its alert's
/// name. The file keeps each rule's `alert:` and its one-line `expr:` as
/// plain YAML scalars, so lines are enough to read them without a YAML parser.
fn alert_rules(text: &str) -> Vec<(String, String)> {
    let mut rules = Vec::new();
    let mut alert = None;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert:") {
            alert = Some(name.trim().to_string());
        } else if let Some(expr) = line.strip_prefix("expr:") {
            let name = alert
                .take()
                .unwrap_or_else(|| format!("an expr without an alert: {expr}"));
            rules.push((name, expr.trim().to_string()));
        }
    }
    rules
}

#[test]
fn every_metric_the_alert_rules_read_exists() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations/caldera-alerts.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let rules = alert_rules(&text);
    assert_eq!(
        rules.len(),
        text.matches("- alert:").count(),
        "every alert has one expr: {rules:?}"
    );
    assert!(rules.len() >= 10, "only {} rules read", rules.len());
    let p = pool();
    let e = scrape(&p.cp);
    let exposed = e.sample_names();
    for (alert, expr) in &rules {
        // `up` is the scrape's own series, made by Prometheus, not by Caldera.
        let names: Vec<String> = promql::metric_names(expr)
            .into_iter()
            .filter(|n| n != "up")
            .collect();
        assert!(
            !names.is_empty() || expr.starts_with("up{"),
            "{alert}: no metric in {expr:?}"
        );
        for name in names {
            assert!(
                exposed.contains(name.as_str()),
                "{alert}: {name} (in {expr:?}) is not in /metrics; exposed: {exposed:?}"
            );
        }
    }
}
