//! Chargeback with real processes: a known allocation on
//! a simulated A100 at a known price costs exactly price × fraction × hours,
//! in the JSON and in the CSV; a live allocation is charged up to `to`;
//! borrowed and guaranteed are split where a quota change re-marked an
//! allocation; cost and usage history survive a kill -9 of the control
//! plane; bad `from`/`to`/`group_by` are named; another tenant's cost is a 404.
use caldera_chaos_tests::{wait_until, Agent, Api, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// Prices per hour, high enough that the few hundred milliseconds a test
/// holds an allocation cost thousands of micro-units (a whole A100 is 1,000
/// a millisecond), so a wrong fraction or price cannot hide in the
/// rounding: A100 3600, any other GPU 1800, a core 360, a GB of memory 36,
/// a GB of disk 0.007 (a price that does not divide evenly).
const PRICES: [(&str, &str); 6] = [
    ("CALDERA_PRICE_GPU_HOUR", "default=1800,A100=3600"),
    ("CALDERA_PRICE_CPU_CORE_HOUR", "360"),
    ("CALDERA_PRICE_MEMORY_GB_HOUR", "36.0"),
    ("CALDERA_PRICE_DISK_GB_HOUR", "0.007"),
    ("CALDERA_PRICE_CURRENCY", "EUR"),
    // Samples (and the usage history) every 300 ms.
    ("CALDERA_USAGE_SAMPLE_MS", "300"),
];
const A100_MICROS: u128 = 3_600_000_000;
const CORE_MICROS: u128 = 360_000_000;
const MEM_GB_MICROS: u128 = 36_000_000;
const DISK_GB_MICROS: u128 = 7_000;
const HOUR_MS: u128 = 3_600_000;

/// A reservation (no process) of `gpu` with 2 cores, 4 GB memory, 1 GB disk.
fn reservation(id: &str, gpu: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{gpu},"cpu":{{"cores":2}},"memory":{{"size_gb":4}},"disk":{{"size_gb":1}}}}}}"#
    )
}

/// `num / den` rounded half-up: the rounding `docs/concepts/chargeback.md` states.
fn round(num: u128, den: u128) -> u128 {
    (2 * num + den) / (2 * den)
}

/// What a billing record (as `?records=true` shows it) costs over `ms`
/// milliseconds, by the documented rule: each resource's price × quantity ×
/// hours, rounded once to a micro-unit. Every GPU here is an A100.
fn expected_micros(rec: &Value, ms: u64) -> u128 {
    let ms = u128::from(ms);
    let n = |k: &str| u128::from(rec[k].as_u64().unwrap_or(0));
    let mut total = 0;
    for g in rec["gpus"].as_array().into_iter().flatten() {
        let (used, of) = (
            g["memory_mb"].as_u64().unwrap_or(0),
            g["memory_total_mb"].as_u64().unwrap_or(1),
        );
        total += round(
            A100_MICROS * u128::from(used) * ms,
            u128::from(of) * HOUR_MS,
        );
    }
    total += round(CORE_MICROS * n("cpu_milli") * ms, 1000 * HOUR_MS);
    total += round(MEM_GB_MICROS * n("memory_mb") * ms, 1024 * HOUR_MS);
    total + round(DISK_GB_MICROS * n("disk_mb") * ms, 1024 * HOUR_MS)
}

fn decimal(micros: u128) -> String {
    format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000)
}

fn cost(api: &Api, tenant: &str, query: &str) -> Value {
    let r = api.get(&format!("/v1/tenants/{tenant}/cost?{query}"));
    assert_eq!(r.status, 200, "{:#}", r.body);
    r.data().clone()
}

fn group<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|l| l["key"] == key))
        .unwrap_or_else(|| panic!("no group {key}: {report:#}"))
}

fn record<'a>(report: &'a Value, task: &str) -> &'a Value {
    report["records"]
        .as_array()
        .and_then(|g| g.iter().find(|l| l["task"] == task))
        .unwrap_or_else(|| panic!("no record of {task}: {report:#}"))
}

fn micros(line: &Value, what: &str) -> u128 {
    u128::from(
        line[format!("{what}_cost_micros")]
            .as_u64()
            .unwrap_or(u64::MAX),
    )
}

fn start(dir: &Path, gpus: &str) -> (ControlPlane, Agent) {
    let cp = ControlPlane::start(Path::new(BIN), &dir.join("cp"), &PRICES);
    let agent = Agent::start(Path::new(BIN), &cp, "bill-1", gpus, dir);
    assert!(wait_until(Duration::from_secs(20), || {
        cp.operator().get("/v1/nodes").data()["nodes"][0]["connected"] == true
    }));
    (cp, agent)
}

#[test]
fn a_known_allocation_costs_exactly_and_the_history_survives_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, _agent) = start(dir.path(), "1xA100-80GB");
    let a = cp.api(&cp.tenant("team-a"));
    // Half the A100 (share 0.5 = 40,960 of 81,920 MiB), and a quarter.
    for (id, gpu) in [
        ("half", r#"{"count":1,"share":0.5,"model":"A100"}"#),
        ("live", r#"{"count":1,"share":0.25}"#),
    ] {
        let r = a.post("/v1/tasks", &reservation(id, gpu));
        assert_eq!(r.status, 201, "{:#}", r.body);
        a.wait_task(id, 20, "running", |v| v["state"] == "running");
    }
    assert_eq!(a.post("/v1/tasks/half/release", "").status, 200);
    let mut rep = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            rep = cost(&a, "team-a", "records=true");
            rep["records"].as_array().is_some_and(|r| {
                r.iter()
                    .any(|x| x["task"] == "half" && x["end_ms"].is_u64())
            })
        }),
        "half's billing record was not closed: {rep:#}"
    );
    let (half, live) = (record(&rep, "half").clone(), record(&rep, "live").clone());
    assert_eq!(half["gpus"][0]["memory_mb"], 40_960, "{half:#}");
    assert_eq!(half["gpus"][0]["memory_total_mb"], 81_920, "{half:#}");
    assert_eq!(half["end_reason"], "released", "{half:#}");
    let (s, e) = (
        half["start_ms"].as_u64().unwrap_or(0),
        half["end_ms"].as_u64().unwrap_or(0),
    );
    let live_start = live["start_ms"].as_u64().unwrap_or(0);
    assert!(live["end_ms"].is_null(), "{live:#}");
    // The period: from an hour before (RFC 3339) to half's end (Unix ms):
    // half whole; live, still held, only up to `to`.
    let from = caldera_spec::time::rfc3339(s - 3_600_000);
    let query = format!("from={from}&to={e}&group_by=task");
    let rep = cost(&a, "team-a", &query);
    let want_half = expected_micros(&half, e - s);
    let want_live = expected_micros(&live, e - live_start);
    assert!(want_half > 0 && want_live > 0);
    assert_eq!(
        micros(group(&rep, "half"), "allocated"),
        want_half,
        "{rep:#}"
    );
    assert_eq!(group(&rep, "half")["allocated_cost"], decimal(want_half));
    assert_eq!(
        micros(group(&rep, "live"), "allocated"),
        want_live,
        "live is charged up to to: {rep:#}"
    );
    assert_eq!(micros(&rep["total"], "allocated"), want_half + want_live);
    assert_eq!(micros(&rep["total"], "guaranteed"), want_half + want_live);
    assert_eq!(micros(&rep["total"], "borrowed"), 0);
    assert_eq!(rep["currency"], "EUR");
    // A reservation runs nothing: it is measured idle, and idle is part of the cost.
    assert!(micros(&rep["total"], "idle") <= micros(&rep["total"], "allocated"));
    // The same figures as CSV: a header, one row per group, the exact decimals.
    let csv = a.get_accepting(&format!("/v1/tenants/team-a/cost?{query}"), "text/csv");
    assert_eq!(csv.status, 200);
    assert!(
        csv.header("content-type")
            .is_some_and(|c| c.starts_with("text/csv")),
        "{:?}",
        csv.headers
    );
    let text = csv.body.as_str().unwrap_or_default().to_string();
    let rows: Vec<Vec<&str>> = text
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    let col = |name: &str| {
        rows[0]
            .iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no column {name}: {text}"))
    };
    let half_row = rows
        .iter()
        .find(|r| r[col("key")] == "half")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        half_row[col("allocated_cost")],
        decimal(want_half),
        "{text}"
    );
    assert_eq!(half_row[col("tenant")], "team-a");
    assert_eq!(half_row[col("currency")], "EUR");

    // Wait for a usage sample that shows live's quarter, then kill -9.
    let usage_path = "/v1/tenants/team-a/usage";
    assert!(wait_until(Duration::from_secs(10), || {
        a.get(usage_path).data()["current"]["allocated"]["gpus"].as_f64() == Some(0.25)
    }));
    let before = a.get(usage_path).data()["samples"]
        .as_array()
        .map_or(0, Vec::len);
    let killed_at = caldera_actors::clock::now_ms();
    cp.restart();
    let a = cp.api(a.token.as_deref().unwrap_or_default());
    let after = cost(&a, "team-a", &query);
    assert_eq!(
        micros(group(&after, "half"), "allocated"),
        want_half,
        "after kill -9: {after:#}"
    );
    assert_eq!(
        micros(group(&after, "live"), "allocated"),
        want_live,
        "after kill -9: {after:#}"
    );
    let u = a.get(usage_path);
    let samples = u.data()["samples"].as_array().cloned().unwrap_or_default();
    let old = samples
        .iter()
        .filter(|p| p["at_ms"].as_u64().is_some_and(|t| t < killed_at))
        .count();
    assert!(
        old > 0 && before > 0,
        "samples from before the kill are gone: {:#}",
        u.body
    );
    assert_eq!(u.data()["resolution_ms"], 300);
    // The pool's curve too (operator), with the A100's capacity of 1 GPU.
    let pool = cp.operator().get("/v1/utilization/history");
    assert_eq!(pool.status, 200, "{:#}", pool.body);
    let points = pool.data()["points"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        points
            .iter()
            .any(|p| p["at_ms"].as_u64().is_some_and(|t| t < killed_at)
                && p["mean"]["capacity"]["gpus"] == 1.0),
        "{:#}",
        pool.body
    );
}

#[test]
fn borrowed_and_guaranteed_split_at_a_remark_and_others_cost_is_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agent) = start(dir.path(), "2xA100-80GB");
    let op = cp.operator();
    let r = op.post(
        "/v1/tenants",
        r#"{"name":"a","quota":{"gpus":1},"borrowing_limit":{"gpus":1}}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let a = cp.api(r.data()["token"].as_str().unwrap_or_default());
    let b = cp.api(&cp.tenant("b"));
    // "own" is within the guarantee of 1 GPU, "extra" beyond it: borrowed.
    for id in ["own", "extra"] {
        assert_eq!(
            a.post(
                "/v1/tasks",
                &reservation(id, r#"{"count":1,"model":"A100"}"#)
            )
            .status,
            201
        );
        a.wait_task(id, 20, "running", |v| v["state"] == "running");
    }
    assert_eq!(a.task("extra")["allocation"]["borrowed"], true);
    // A guarantee of 2: "extra" is re-marked guaranteed from now on.
    assert_eq!(op.put("/v1/tenants/a/quota", r#"{"gpus":2}"#).status, 200);
    a.wait_task("extra", 10, "re-marked", |v| {
        v["allocation"]["borrowed"] == false
    });
    for id in ["own", "extra"] {
        assert_eq!(a.post(&format!("/v1/tasks/{id}/release"), "").status, 200);
    }
    let mut rep = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            rep = cost(&op, "a", "records=true&from=0");
            rep["records"]
                .as_array()
                .is_some_and(|r| r.len() == 2 && r.iter().all(|x| x["end_ms"].is_u64()))
        }),
        "{rep:#}"
    );
    let extra = record(&rep, "extra").clone();
    let own = record(&rep, "own").clone();
    let at = |r: &Value, k: &str| r[k].as_u64().unwrap_or(0);
    let mark = extra["marks"][0]["at_ms"].as_u64().unwrap_or(0);
    assert_eq!(extra["borrowed"], true, "{extra:#}");
    assert_eq!(extra["marks"][0]["borrowed"], false, "{extra:#}");
    let (borrowed, guaranteed) = (
        expected_micros(&extra, mark - at(&extra, "start_ms")),
        expected_micros(&extra, at(&extra, "end_ms") - mark),
    );
    let own_cost = expected_micros(&own, at(&own, "end_ms") - at(&own, "start_ms"));
    let line = group(&rep, "extra");
    assert_eq!(micros(line, "borrowed"), borrowed, "{rep:#}");
    assert_eq!(micros(line, "guaranteed"), guaranteed, "{rep:#}");
    assert_eq!(micros(line, "allocated"), borrowed + guaranteed);
    assert_eq!(micros(group(&rep, "own"), "borrowed"), 0);
    assert_eq!(micros(group(&rep, "own"), "guaranteed"), own_cost);
    assert_eq!(micros(&rep["total"], "borrowed"), borrowed);
    // By day and by model: the same total.
    for by in ["day", "model"] {
        let r = cost(&op, "a", &format!("from=0&group_by={by}"));
        assert_eq!(
            micros(&r["total"], "allocated"),
            own_cost + borrowed + guaranteed,
            "{by}: {r:#}"
        );
    }
    // The CLI as the tenant sees it: its own tenant without naming it.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(["cost", "--from", "0", "--server", &cp.url()])
            .args(["--token", a.token.as_deref().unwrap_or_default()])
            .args(args)
            .env("CALDERA_CONTEXTS_FILE", dir.path().join("contexts.json"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let json: Value = serde_json::from_str(&cli(&["--json"])).unwrap_or_default();
    assert_eq!(json["tenant"], "a");
    assert_eq!(micros(&json["total"], "borrowed"), borrowed, "{json:#}");
    let csv = cli(&["--csv", "--group-by", "model"]);
    assert!(csv.starts_with("tenant,group_by,key,"), "{csv}");
    assert!(
        csv.contains(&format!(",{},", decimal(own_cost + borrowed + guaranteed))),
        "{csv}"
    );
    let table = cli(&[]);
    assert!(table.lines().any(|l| l.starts_with("TOTAL")), "{table}");
    // The operator's total across tenants: a line per tenant, each its own
    // report's total, and their sum (`caldera cost --all`, GET /v1/cost).
    // One fixed period, so work still held is charged the same in each read.
    let to = cost(&op, "a", "from=0")["to_ms"]
        .as_u64()
        .unwrap_or(0)
        .to_string();
    let all = std::process::Command::new(BIN)
        .args([
            "cost",
            "--all",
            "--from",
            "0",
            "--to",
            &to,
            "--json",
            "--server",
            &cp.url(),
        ])
        .args(["--token", caldera_chaos_tests::OPERATOR_TOKEN])
        .env("CALDERA_CONTEXTS_FILE", dir.path().join("contexts.json"))
        .output()
        .unwrap();
    assert!(
        all.status.success(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );
    let all: Value = serde_json::from_slice(&all.stdout).unwrap_or_default();
    let line = |t: &str| {
        all["tenants"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["key"] == t)
            .cloned()
            .unwrap_or_default()
    };
    let period = format!("from=0&to={to}");
    let a_total = micros(&cost(&op, "a", &period)["total"], "allocated");
    let b_total = micros(&cost(&op, "b", &period)["total"], "allocated");
    assert_eq!(micros(&line("a"), "allocated"), a_total, "{all:#}");
    assert_eq!(micros(&line("b"), "allocated"), b_total, "{all:#}");
    assert_eq!(
        micros(&all["total"], "allocated"),
        a_total + b_total,
        "{all:#}"
    );
    assert_eq!(
        b.get("/v1/cost").status,
        403,
        "only the operator sees every tenant's cost"
    );
    // Another tenant's cost is not there for b; the bad parameters are named.
    let hidden = b.get("/v1/tenants/a/cost");
    assert_eq!(
        (hidden.status, hidden.body["code"].as_u64()),
        (404, Some(40400)),
        "{:#}",
        hidden.body
    );
    for (query, field) in [
        ("from=yesterday", "from"),
        ("to=2024-13-01T00:00:00Z", "to"),
        ("from=2000&to=1000", "from"),
        ("group_by=week", "group_by"),
    ] {
        let r = a.get(&format!("/v1/tenants/a/cost?{query}"));
        assert_eq!(
            (r.status, r.body["code"].as_u64()),
            (400, Some(40008)),
            "{query}: {:#}",
            r.body
        );
        assert_eq!(r.body["field"], field, "{query}: {:#}", r.body);
    }
    let r = a.get("/v1/tenants/a/usage?from=soon");
    assert_eq!(
        (r.status, r.body["field"].as_str()),
        (400, Some("from")),
        "{:#}",
        r.body
    );
    assert_eq!(
        a.get("/v1/utilization/history").status,
        403,
        "the pool's curve is the operator's"
    );
}

#[test]
fn releasing_the_guaranteed_allocations_brings_the_borrowed_ones_back_within_the_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _agent) = start(dir.path(), "4xA100-80GB");
    let op = cp.operator();
    let r = op.post(
        "/v1/tenants",
        r#"{"name":"a","quota":{"gpus":2},"borrowing_limit":{"gpus":2}}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let a = cp.api(r.data()["token"].as_str().unwrap_or_default());
    // 4 GPUs on a guarantee of 2: the first two guaranteed, the last two
    // borrowed (preemptible, billed as borrowed).
    for id in ["g1", "g2", "b1", "b2"] {
        let r = a.post(
            "/v1/tasks",
            &reservation(id, r#"{"count":1,"model":"A100"}"#),
        );
        assert_eq!(r.status, 201, "{:#}", r.body);
        a.wait_task(id, 20, "running", |v| v["state"] == "running");
    }
    for (id, borrowed) in [("g1", false), ("g2", false), ("b1", true), ("b2", true)] {
        assert_eq!(a.task(id)["allocation"]["borrowed"], borrowed, "{id}");
    }
    // The two guaranteed ones go: the two left are within the guarantee,
    // with no quota saved meanwhile.
    for id in ["g1", "g2"] {
        assert_eq!(a.post(&format!("/v1/tasks/{id}/release"), "").status, 200);
    }
    for id in ["b1", "b2"] {
        let v = a.wait_task(id, 10, "back within the guarantee", |v| {
            v["allocation"]["borrowed"] == false
        });
        assert_eq!(v["state"], "running", "{v:#}");
    }
    let events = op.get("/v1/events?tenant=a").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events.iter().any(|e| e["kind"] == "quota_changed"
            && e["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("holdings of a changed")),
        "{events:#?}"
    );
    // Billed as borrowed up to the re-mark, guaranteed after it.
    for id in ["b1", "b2"] {
        assert_eq!(a.post(&format!("/v1/tasks/{id}/release"), "").status, 200);
    }
    let mut rep = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            rep = cost(&op, "a", "records=true&from=0");
            rep["records"]
                .as_array()
                .is_some_and(|r| r.len() == 4 && r.iter().all(|x| x["end_ms"].is_u64()))
        }),
        "{rep:#}"
    );
    let at = |r: &Value, k: &str| r[k].as_u64().unwrap_or(0);
    for id in ["b1", "b2"] {
        let rec = record(&rep, id).clone();
        assert_eq!(rec["borrowed"], true, "granted borrowed: {rec:#}");
        let marks = rec["marks"].as_array().cloned().unwrap_or_default();
        assert_eq!(marks.len(), 1, "{rec:#}");
        assert_eq!(marks[0]["borrowed"], false, "{rec:#}");
        let mark = at(&marks[0], "at_ms");
        let line = group(&rep, id);
        assert_eq!(
            micros(line, "borrowed"),
            expected_micros(&rec, mark - at(&rec, "start_ms")),
            "{rep:#}"
        );
        assert_eq!(
            micros(line, "guaranteed"),
            expected_micros(&rec, at(&rec, "end_ms") - mark),
            "{rep:#}"
        );
    }
}
