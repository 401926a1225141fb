//! Signed webhooks against the real server, with a real
//! HTTP receiver (`chaos-tests/src/webhook_receiver.rs`) that checks each
//! delivery's signature as `docs/how-to/subscribe-to-webhooks.md` tells a receiver to: a delivery
//! arrives signed; a 500 is retried with the same event id and both attempts
//! are listed; tenants cannot subscribe to or see each other's webhooks; a
//! pending delivery survives kill -9 of the control plane; a hung receiver
//! does not hold up another's deliveries; `idle-webhook-url` is a signed
//! subscription that still fires; urls that reach the control plane's own
//! network are refused, a tenant reads no failure's cause, one tenant's
//! hanging receivers do not delay another's, and the records stay within
//! their bounds. Retries are fast through config, and every wait polls
//! with a deadline.
use caldera_chaos_tests::webhook_receiver::{Received, Receiver};
use caldera_chaos_tests::{wait_until, Agent, Api, ControlPlane};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// Retries after 200 ms doubling to 400 ms; a 1 s attempt timeout.
const FAST_RETRIES: &[(&str, &str)] = &[
    ("CALDERA_WEBHOOK_RETRY_INITIAL_MS", "200"),
    ("CALDERA_WEBHOOK_RETRY_MAX_MS", "400"),
    ("CALDERA_WEBHOOK_TIMEOUT_MS", "1000"),
];

fn server(dir: &Path, extra: &[(&str, &str)]) -> ControlPlane {
    let mut env = FAST_RETRIES.to_vec();
    env.extend_from_slice(extra);
    ControlPlane::start(Path::new(BIN), &dir.join("cp"), &env)
}

/// Subscribes `url` to `events`; (id, secret).
fn subscribe(api: &Api, url: &str, events: &[&str]) -> (String, String) {
    let r = api.post(
        "/v1/webhooks",
        &json!({"url": url, "events": events}).to_string(),
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let d = r.data();
    let secret = d["secret"].as_str().unwrap_or_default().to_string();
    assert_eq!(secret.len(), 64, "32 random bytes, hex: {d:#}");
    (d["id"].as_str().unwrap_or_default().to_string(), secret)
}

/// A pure reservation: with no node registered it waits in the queue.
fn submit(api: &Api, id: &str) {
    let spec = json!({"task_id": id, "task_type": "training", "resources": {"gpu": {"count": 1}}});
    let r = api.post("/v1/tasks", &spec.to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
}

/// Waits (20 s at most) until `rx` holds a request that `pred` accepts.
fn wait_for(rx: &Receiver, what: &str, pred: impl Fn(&[Received]) -> bool) -> Vec<Received> {
    let ok = wait_until(Duration::from_secs(20), || pred(&rx.received()));
    let got = rx.received();
    assert!(ok, "{what}: not received; got {got:#?}");
    got
}

fn deliveries(api: &Api, id: &str) -> Vec<Value> {
    let r = api.get(&format!("/v1/webhooks/{id}/deliveries"));
    assert_eq!(r.status, 200, "{:#}", r.body);
    r.data()["deliveries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until subscription `id` shows a delivery that `pred` accepts.
fn wait_delivery(api: &Api, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mut last = Vec::new();
    let ok = wait_until(Duration::from_secs(20), || {
        last = deliveries(api, id);
        last.iter().any(&pred)
    });
    assert!(ok, "{what}: deliveries were {last:#?}");
    last.into_iter().find(|d| pred(d)).unwrap_or_default()
}

fn with_task<'a>(got: &'a [Received], task: &str) -> Vec<&'a Received> {
    got.iter()
        .filter(|r| r.json()["data"]["task"] == task)
        .collect()
}

/// The CLI as a user with `CALDERA_SERVER`/`CALDERA_TOKEN` runs it.
fn cli(cp: &ControlPlane, token: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env("CALDERA_SERVER", cp.url())
        .env("CALDERA_TOKEN", token)
        .env(
            "CALDERA_CONTEXTS_FILE",
            cp.data_dir.join("no-contexts.json"),
        )
        .output()
        .expect("the caldera binary runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{args:?}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn a_delivery_is_signed_and_a_500_is_retried_under_the_same_event_id() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[500], 200);
    let cp = server(dir.path(), &[]);
    let token = cp.tenant("acme");
    let api = cp.api(&token);
    // Made with the CLI: the secret is printed once, here.
    let created: Value = serde_json::from_str(&cli(
        &cp,
        &token,
        &[
            "webhook",
            "create",
            "--url",
            &rx.url("/hook"),
            "--events",
            "task.submitted",
            "--json",
        ],
    ))
    .unwrap();
    let (id, secret) = (
        created["id"].as_str().unwrap().to_string(),
        created["secret"].as_str().unwrap().to_string(),
    );
    assert_eq!(
        (created["tenant"].as_str(), secret.len()),
        (Some("acme"), 64),
        "{created:#}"
    );
    // Never shown again.
    for path in ["/v1/webhooks".to_string(), format!("/v1/webhooks/{id}")] {
        let r = api.get(&path);
        assert_eq!(r.status, 200, "{:#}", r.body);
        assert!(
            !r.body.to_string().contains(&secret),
            "{path} shows the secret"
        );
    }
    submit(&api, "train-1");
    let got = wait_for(&rx, "a retry after the 500", |g| {
        with_task(g, "train-1").len() >= 2
    });
    let tries = with_task(&got, "train-1");
    let (first, second) = (tries[0], tries[1]);
    assert_eq!((first.answered, second.answered), (500, 200));
    for r in [first, second] {
        assert!(r.signed_with(&secret), "the signature verifies: {r:#?}");
        assert!(
            !r.signed_with("not-the-secret"),
            "a wrong secret does not verify"
        );
        assert_eq!(r.header("caldera-webhook-id"), Some(id.as_str()));
        assert_eq!(r.path, "/hook");
    }
    let event_id = first
        .header("caldera-event-id")
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        second.header("caldera-event-id"),
        Some(event_id.as_str()),
        "the same event id"
    );
    assert_eq!(first.body, second.body, "the same body on every attempt");
    let body = first.json();
    assert_eq!(body["id"].to_string(), event_id);
    assert_eq!(
        (body["type"].as_str(), body["tenant"].as_str()),
        (Some("task.submitted"), Some("acme"))
    );
    // The event id is the event log's seq.
    let events = api.get("/v1/events?task=train-1").data()["events"].clone();
    let seq = events
        .as_array()
        .and_then(|es| es.iter().find(|e| e["kind"] == "task_submitted"))
        .map(|e| e["seq"].to_string());
    assert_eq!(seq, Some(event_id.clone()), "{events:#}");
    // The deliveries list shows both attempts.
    let d = wait_delivery(&api, &id, "delivered", |d| d["state"] == "delivered");
    assert_eq!(d["event_id"].to_string(), event_id);
    assert_eq!(d["attempt_count"], 2, "{d:#}");
    let statuses: Vec<Value> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].clone())
        .collect();
    assert_eq!(statuses, vec![json!(500), json!(200)]);
    let table = cli(&cp, &token, &["webhook", "deliveries", &id]);
    assert!(
        table.contains("task.submitted") && table.contains("delivered"),
        "{table}"
    );
    let list = cli(&cp, &token, &["webhook", "list"]);
    assert!(list.contains(&id) && list.contains("acme"), "{list}");
    assert!(!list.contains(&secret));
}

/// An `https://` receiver behind a private CA: with `webhook-ca-file`
/// naming the CA, its deliveries arrive over TLS, signed like any other; a
/// control plane that does not trust the CA fails the attempts on the
/// certificate and says so in the deliveries list.
#[test]
fn an_https_receiver_behind_a_private_ca_gets_signed_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start_tls(&[], 200);
    let ca = dir.path().join("receiver-ca.pem");
    std::fs::write(&ca, rx.ca_pem.clone().unwrap_or_default()).unwrap();
    let cp = server(
        dir.path(),
        &[("CALDERA_WEBHOOK_CA_FILE", ca.to_str().unwrap_or_default())],
    );
    let api = cp.api(&cp.tenant("acme"));
    assert!(rx.url("/hook").starts_with("https://"));
    let (_, secret) = subscribe(&api, &rx.url("/hook"), &["task.submitted"]);
    submit(&api, "tls-1");
    let got = wait_for(&rx, "a delivery over TLS", |g| {
        !with_task(g, "tls-1").is_empty()
    });
    let r = with_task(&got, "tls-1")[0];
    assert!(r.signed_with(&secret), "{r:#?}");
    assert_eq!(r.json()["type"], "task.submitted", "{r:#?}");
    drop(cp);

    // The host's store alone does not know that CA: each attempt fails on it.
    let other = tempfile::tempdir().unwrap();
    let cp = server(other.path(), &[]);
    let api = cp.api(&cp.tenant("acme"));
    let (id, _) = subscribe(&api, &rx.url("/untrusted"), &["task.submitted"]);
    submit(&api, "tls-2");
    let d = wait_delivery(&cp.operator(), &id, "a failed TLS attempt", |d| {
        d["attempt_count"].as_u64().unwrap_or(0) >= 1
    });
    let error = d["attempts"][0]["error"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        error.contains("certificate") || error.contains("tls"),
        "the operator reads the cause: {d:#}"
    );
    // The tenant reads that it failed, not why.
    let theirs = deliveries(&api, &id);
    assert_eq!(
        theirs[0]["attempts"][0]["error"], "delivery failed",
        "{theirs:#?}"
    );
    assert!(rx.received().iter().all(|g| g.path != "/untrusted"));
}

#[test]
fn tenants_cannot_subscribe_to_or_see_each_others_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 200);
    let cp = server(dir.path(), &[]);
    let acme = cp.api(&cp.tenant("acme"));
    let rival = cp.api(&cp.tenant("rival"));
    let (id, _) = subscribe(&acme, &rx.url("/acme"), &["*"]);
    for (method, path) in [
        ("GET", format!("/v1/webhooks/{id}")),
        ("GET", format!("/v1/webhooks/{id}/deliveries")),
        ("DELETE", format!("/v1/webhooks/{id}")),
    ] {
        let r = rival.request(method, &path, None);
        assert_eq!(
            (r.status, r.body["code"].clone()),
            (404, json!(40400)),
            "{method} {path}"
        );
    }
    assert_eq!(rival.get("/v1/webhooks").data()["webhooks"], json!([]));
    let refused = |api: &Api, body: Value| {
        let r = api.post("/v1/webhooks", &body.to_string());
        (
            r.status,
            r.body["code"].as_u64().unwrap_or(0),
            r.body["field"].as_str().unwrap_or("").to_string(),
        )
    };
    let url = rx.url("/x");
    assert_eq!(
        refused(
            &rival,
            json!({"url": url, "events": ["*"], "tenant": "acme"})
        ),
        (403, 40300, "tenant".into())
    );
    assert_eq!(
        refused(
            &rival,
            json!({"url": url, "events": ["task.failed", "node.lost"]})
        ),
        (403, 40300, "events[1]".into())
    );
    assert_eq!(
        refused(
            &rival,
            json!({"url": url, "events": ["task.failed", "task.exploded"]})
        ),
        (400, 40006, "events[1]".into())
    );
    assert_eq!(
        refused(
            &rival,
            json!({"url": "file:///etc/passwd", "events": ["*"]})
        ),
        (400, 40006, "url".into())
    );
    assert_eq!(
        refused(
            &cp.operator(),
            json!({"url": url, "events": ["*"], "tenant": "nobody"})
        ),
        (404, 40400, "tenant".into())
    );
    // rival's event comes first in the log; once acme's has arrived, rival's
    // was looked at and went nowhere.
    submit(&rival, "r-1");
    submit(&acme, "a-1");
    let got = wait_for(&rx, "acme's own event", |g| !with_task(g, "a-1").is_empty());
    for r in &got {
        assert_eq!(r.json()["tenant"], "acme", "{r:#?}");
        assert!(!r.body.contains("r-1"), "{r:#?}");
    }
    // The operator sees it; its owner deletes it.
    let all = cp.operator().get("/v1/webhooks").data()["webhooks"].clone();
    assert!(
        all.as_array().is_some_and(|w| w
            .iter()
            .any(|w| w["id"] == id.as_str() && w["owner"] == "acme")),
        "{all:#}"
    );
    assert_eq!(
        acme.request("DELETE", &format!("/v1/webhooks/{id}"), None)
            .status,
        200
    );
    assert_eq!(acme.get(&format!("/v1/webhooks/{id}")).status, 404);
}

#[test]
fn a_pending_delivery_is_delivered_after_kill_9_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 503);
    let mut cp = server(dir.path(), &[]);
    let api = cp.api(&cp.tenant("acme"));
    let (id, secret) = subscribe(&cp.operator(), &rx.url("/ops"), &["task.submitted"]);
    submit(&api, "t-1");
    wait_for(&rx, "a first attempt", |g| !g.is_empty());
    let pending = wait_delivery(&cp.operator(), &id, "a failed attempt recorded", |d| {
        d["state"] == "pending" && d["attempt_count"].as_u64() >= Some(1)
    });
    let event_id = pending["event_id"].clone();
    cp.kill9();
    rx.answer(200);
    cp.restart();
    let d = wait_delivery(&cp.operator(), &id, "delivered after the restart", |d| {
        d["state"] == "delivered"
    });
    assert_eq!(d["event_id"], event_id);
    let ok: Vec<Received> = rx
        .received()
        .into_iter()
        .filter(|r| r.answered == 200)
        .collect();
    assert!(!ok.is_empty());
    for r in &ok {
        assert_eq!(
            r.header("caldera-event-id"),
            Some(event_id.to_string().as_str())
        );
        assert!(r.signed_with(&secret));
    }
    // Fanned out once, and the log is followed on from where it was.
    submit(&api, "t-2");
    wait_delivery(&cp.operator(), &id, "t-2 delivered", |d| {
        d["state"] == "delivered" && d["event_id"] != event_id
    });
    let all = deliveries(&cp.operator(), &id);
    assert_eq!(all.len(), 2, "one delivery per event: {all:#?}");
}

/// Killed while the first attempt waits for an answer: nothing of it was
/// recorded, the delivery is still queued, and it is sent again — the same
/// event id twice at the receiver, which is what it deduplicates.
#[test]
fn a_delivery_in_flight_at_kill_9_is_sent_again_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::hung();
    let mut cp = server(dir.path(), &[("CALDERA_WEBHOOK_TIMEOUT_MS", "600000")]);
    let api = cp.api(&cp.tenant("acme"));
    let (id, secret) = subscribe(&api, &rx.url("/hook"), &["task.submitted"]);
    submit(&api, "t-1");
    let held = wait_for(&rx, "the first attempt, held", |g| !g.is_empty());
    let event_id = held[0]
        .header("caldera-event-id")
        .unwrap_or_default()
        .to_string();
    let d = deliveries(&api, &id);
    assert_eq!(
        (
            d.len(),
            d[0]["state"].as_str(),
            d[0]["attempt_count"].as_u64()
        ),
        (1, Some("pending"), Some(0)),
        "{d:#?}"
    );
    cp.kill9();
    rx.answer(200);
    cp.restart();
    let got = wait_for(&rx, "the attempt again", |g| {
        g.iter().any(|r| r.answered == 200)
    });
    let again = got.iter().find(|r| r.answered == 200).unwrap();
    assert_eq!(again.header("caldera-event-id"), Some(event_id.as_str()));
    assert_eq!(again.body, held[0].body);
    assert!(again.signed_with(&secret));
    wait_delivery(&api, &id, "delivered", |d| {
        d["state"] == "delivered" && d["attempt_count"] == 1
    });
}

#[test]
fn a_hung_receiver_does_not_hold_up_another_subscriptions_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let hung = Receiver::hung();
    let fast = Receiver::start(&[], 200);
    let cp = server(dir.path(), &[]);
    let op = cp.operator();
    let (slow_id, _) = subscribe(&op, &hung.url("/slow"), &["task.submitted"]);
    subscribe(&op, &fast.url("/fast"), &["task.submitted"]);
    let api = cp.api(&cp.tenant("acme"));
    // More events than one subscription may have attempts in flight (4).
    for i in 0..8 {
        submit(&api, &format!("t-{i}"));
    }
    let got = wait_for(&fast, "all 8 at the fast receiver", |g| {
        (0..8).all(|i| !with_task(g, &format!("t-{i}")).is_empty())
    });
    assert!(got.iter().all(|r| r.answered == 200));
    // The hung one timed out (webhook-timeout-ms) and is being retried.
    wait_delivery(&op, &slow_id, "a timed-out attempt", |d| {
        d["state"] == "pending"
            && d["attempts"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a["error"].is_string()))
    });
}

#[test]
fn idle_webhook_url_is_a_signed_subscription_that_still_fires() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 200);
    let secret = "idle-secret-0123456789";
    let url = rx.url("/idle");
    let mut cp = server(
        dir.path(),
        &[
            ("CALDERA_IDLE_WINDOW_MS", "1500"),
            ("CALDERA_IDLE_GRACE_MS", "600000"),
            ("CALDERA_USAGE_SAMPLE_MS", "300"),
            ("CALDERA_IDLE_WEBHOOK_URL", &url),
            ("CALDERA_IDLE_WEBHOOK_SECRET", secret),
        ],
    );
    let _agent = Agent::start(Path::new(BIN), &cp, "node-a", "1xA100-80GB", dir.path());
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || op
        .get("/v1/nodes/node-a")
        .data()["connected"]
        == true));
    let subs = op.get("/v1/webhooks").data()["webhooks"].clone();
    let only = subs.as_array().cloned().unwrap_or_default();
    assert_eq!(only.len(), 1, "{subs:#}");
    assert_eq!(
        (only[0]["from_config"].clone(), only[0]["events"].clone()),
        (json!(true), json!(["idle.warning"]))
    );
    let api = cp.api(&cp.tenant("hoarder"));
    let spec = json!({"task_id": "sleeper", "task_type": "training",
        "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}}, "command": ["sleep", "120"]});
    assert_eq!(api.post("/v1/tasks", &spec.to_string()).status, 201);
    let got = wait_for(&rx, "an idle warning", |g| {
        g.iter().any(|r| r.json()["type"] == "idle.warning")
    });
    let warning = got
        .iter()
        .find(|r| r.json()["type"] == "idle.warning")
        .unwrap();
    assert!(
        warning.signed_with(secret),
        "signed with idle-webhook-secret: {warning:#?}"
    );
    let body = warning.json();
    // The body the direct POST sent before is `data.detail`.
    let detail = &body["data"]["detail"];
    assert_eq!(
        (detail["event"].as_str(), detail["task"].as_str()),
        (Some("idle_warning"), Some("sleeper")),
        "{body:#}"
    );
    assert!(
        detail["allocation"].is_string() && detail["idle_for_s"].is_u64(),
        "{body:#}"
    );
    assert_eq!(body["tenant"], "hoarder");
    // A restart keeps the one subscription, same id.
    cp.restart();
    let again = cp.operator().get("/v1/webhooks").data()["webhooks"].clone();
    assert_eq!(again.as_array().map(Vec::len), Some(1), "{again:#}");
    assert_eq!(again[0]["id"], only[0]["id"]);
}

/// The control plane's own network is not a tenant's to reach: without the
/// operator's allowance every spelling of a loopback, unspecified, private
/// or link-local address, `localhost`, and credentials in the url are
/// refused when the subscription is made (nothing is sent anywhere: no
/// subscription exists to send to). The receiver these urls would reach is
/// live, on the loopback.
#[test]
fn internal_urls_are_refused_at_registration_without_the_operators_allowance() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 200);
    let cp = server(dir.path(), &[("CALDERA_WEBHOOK_ALLOW_HOSTS", "")]);
    let tenant = cp.api(&cp.tenant("acme"));
    let p = rx.port;
    let mut urls: Vec<String> = Vec::new();
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "0177.0.0.1",
        "localhost",
        "0.0.0.0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "[fc00::1]",
        "[fe80::1]",
    ] {
        for scheme in ["http", "https"] {
            urls.push(format!("{scheme}://{host}:{p}/hook"));
        }
    }
    urls.push(format!("http://user:pass@127.0.0.1:{p}/hook"));
    urls.push("https://user:pass@hooks.example.com/hook".to_string());
    for url in &urls {
        for api in [&tenant, &cp.operator()] {
            let r = api.post(
                "/v1/webhooks",
                &json!({"url": url, "events": ["*"]}).to_string(),
            );
            assert_eq!(
                (r.status, r.body["code"].clone(), r.body["field"].clone()),
                (400, json!(40020), json!("url")),
                "{url}: {:#}",
                r.body
            );
            let message = r.body["msg"].as_str().unwrap_or_default();
            assert!(
                message.contains("webhook-allow-hosts")
                    || message.contains("user name or password"),
                "{url}: the refusal says what to change: {message}"
            );
        }
    }
    assert_eq!(
        cp.operator().get("/v1/webhooks").data()["webhooks"],
        json!([])
    );
    // The same loopback receiver, allowed by the operator, is subscribed to.
    drop(cp);
    let other = tempfile::tempdir().unwrap();
    let cp = server(
        other.path(),
        &[("CALDERA_WEBHOOK_ALLOW_HOSTS", "127.0.0.0/8")],
    );
    let api = cp.api(&cp.tenant("acme"));
    subscribe(&api, &rx.url("/allowed"), &["task.submitted"]);
    submit(&api, "allowed-1");
    wait_for(&rx, "the allowed receiver's delivery", |g| {
        !with_task(g, "allowed-1").is_empty()
    });
    // Credentials stay refused, allowed host or not.
    let r = api.post(
        "/v1/webhooks",
        &json!({"url": format!("http://u:p@127.0.0.1:{p}/x"), "events": ["*"]}).to_string(),
    );
    assert_eq!((r.status, r.body["code"].clone()), (400, json!(40020)));
}

/// The deliveries list is no port scanner: a tenant reads `delivery
/// failed`, without timing, for a port that refuses and for a receiver
/// that never answers alike; the operator reads each cause. A status the
/// tenant's own receiver answered is shown to it.
#[test]
fn a_tenant_reads_delivery_failed_where_the_operator_reads_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let hung = Receiver::hung();
    let answering = Receiver::start(&[], 503);
    let closed = caldera_chaos_tests::free_port();
    let cp = server(dir.path(), &[]);
    let api = cp.api(&cp.tenant("acme"));
    let (refused_id, _) = subscribe(
        &api,
        &format!("http://127.0.0.1:{closed}/nobody"),
        &["task.submitted"],
    );
    let (hung_id, _) = subscribe(&api, &hung.url("/hung"), &["task.submitted"]);
    let (status_id, _) = subscribe(&api, &answering.url("/503"), &["task.submitted"]);
    submit(&api, "probe-1");
    let tried = |d: &Value| d["attempt_count"].as_u64().unwrap_or(0) >= 1;
    let mut causes = Vec::new();
    for id in [&refused_id, &hung_id] {
        let theirs = wait_delivery(&api, id, "a failed attempt", tried);
        let a = &theirs["attempts"][0];
        assert_eq!(
            (
                a["status"].clone(),
                a["error"].clone(),
                a["duration_ms"].clone()
            ),
            (Value::Null, json!("delivery failed"), Value::Null),
            "{theirs:#}"
        );
        let ops = wait_delivery(&cp.operator(), id, "a failed attempt", tried);
        let a = &ops["attempts"][0];
        assert!(a["duration_ms"].is_u64(), "{ops:#}");
        causes.push(a["error"].as_str().unwrap_or_default().to_string());
    }
    assert_ne!(
        causes[0], causes[1],
        "the operator tells refused from timed out"
    );
    assert!(
        causes
            .iter()
            .all(|c| !c.is_empty() && c != "delivery failed"),
        "{causes:?}"
    );
    let theirs = wait_delivery(&api, &status_id, "the receiver's 503", tried);
    assert_eq!(theirs["attempts"][0]["status"], 503, "{theirs:#}");
    assert!(theirs["attempts"][0]["duration_ms"].is_u64(), "{theirs:#}");
}

/// Tenant a has 200 subscriptions whose receivers hang (a timeout of 10
/// minutes: they hang for the whole test); tenant b's delivery still
/// arrives, while a's receivers hold their requests unanswered. a holds
/// exactly its share of attempts (`webhook-max-in-flight-per-tenant`, 8),
/// before b's delivery and after it.
#[test]
fn one_tenants_hanging_receivers_do_not_delay_another_tenants_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let hung: Vec<Receiver> = (0..20).map(|_| Receiver::hung()).collect();
    let fast = Receiver::start(&[], 200);
    let cp = server(
        dir.path(),
        &[
            ("CALDERA_WEBHOOK_TIMEOUT_MS", "600000"),
            ("CALDERA_WEBHOOK_MAX_PER_TENANT", "200"),
        ],
    );
    let a = cp.api(&cp.tenant("a"));
    let b = cp.api(&cp.tenant("b"));
    let a_ids: Vec<String> = (0..200)
        .map(|i| {
            let rx = &hung[i % hung.len()];
            subscribe(&a, &rx.url(&format!("/a{i}")), &["task.submitted"]).0
        })
        .collect();
    subscribe(&b, &fast.url("/b"), &["task.submitted"]);
    for i in 0..5 {
        submit(&a, &format!("a-{i}"));
    }
    let held = || hung.iter().map(|r| r.received().len()).sum::<usize>();
    assert!(
        wait_until(Duration::from_secs(20), || held() >= 8),
        "a's attempts reach its receivers: {}",
        held()
    );
    submit(&b, "b-1");
    wait_for(&fast, "b's delivery", |g| !with_task(g, "b-1").is_empty());
    // Still hanging, and still only a's share of them: no attempt of a's
    // has ended, none of its 1,000 deliveries is anything but pending.
    assert_eq!(held(), 8, "a holds its 8 slots, no more");
    for id in &a_ids {
        for d in deliveries(&cp.operator(), id) {
            assert_eq!(
                (d["state"].as_str(), d["attempt_count"].as_u64()),
                (Some("pending"), Some(0)),
                "{d:#}"
            );
        }
    }
}

/// The queue limit and the retention bound, with both at a few: tenant a's
/// receiver hangs, so 3 of its 8 deliveries wait and the rest are recorded
/// failed, unsent, saying why, of which the newest 4 are kept; tenant b's
/// receiver answers, and once more deliveries come, only its newest 4 are
/// kept. Each tenant may have one subscription (`webhooks.max-per-tenant`).
#[test]
fn delivery_records_stay_within_the_queue_limit_and_the_retention_bound() {
    let dir = tempfile::tempdir().unwrap();
    let hung = Receiver::hung();
    let fast = Receiver::start(&[], 200);
    let cp = server(
        dir.path(),
        &[
            ("CALDERA_WEBHOOK_TIMEOUT_MS", "600000"),
            ("CALDERA_WEBHOOK_MAX_PENDING_PER_TENANT", "3"),
            ("CALDERA_WEBHOOK_DELIVERIES_KEPT", "4"),
            ("CALDERA_WEBHOOK_MAX_PER_TENANT", "1"),
        ],
    );
    let a = cp.api(&cp.tenant("a"));
    let b = cp.api(&cp.tenant("b"));
    let (a_id, _) = subscribe(&a, &hung.url("/a"), &["task.submitted"]);
    let (b_id, _) = subscribe(&b, &fast.url("/b"), &["task.submitted"]);
    // One subscription each at most; the operator's are not a tenant's.
    let more = a.post(
        "/v1/webhooks",
        &json!({"url": fast.url("/a2"), "events": ["*"]}).to_string(),
    );
    assert_eq!(
        (more.status, more.body["code"].clone()),
        (409, json!(40901)),
        "{:#}",
        more.body
    );
    assert!(more.body["msg"]
        .as_str()
        .is_some_and(|m| m.contains("webhooks.max-per-tenant")));
    subscribe(&cp.operator(), &fast.url("/ops"), &["node.lost"]);
    for i in 0..8 {
        submit(&a, &format!("a-{i}"));
    }
    let mut listed = Vec::new();
    let settled = wait_until(Duration::from_secs(20), || {
        listed = deliveries(&a, &a_id);
        listed.iter().filter(|d| d["state"] == "failed").count() == 4
            && listed.iter().filter(|d| d["state"] == "pending").count() == 3
    });
    assert!(settled, "{listed:#?}");
    assert_eq!(
        listed.len(),
        7,
        "3 pending + the newest 4 unsent: {listed:#?}"
    );
    let ids: Vec<u64> = listed
        .iter()
        .filter_map(|d| d["event_id"].as_u64())
        .collect();
    let pending_ids: Vec<u64> = listed
        .iter()
        .filter(|d| d["state"] == "pending")
        .filter_map(|d| d["event_id"].as_u64())
        .collect();
    assert_eq!(
        pending_ids,
        ids[..3].to_vec(),
        "the first three wait: {listed:#?}"
    );
    for d in listed.iter().filter(|d| d["state"] == "failed") {
        assert_eq!(d["attempt_count"], 0, "{d:#}");
        assert!(
            d["not_sent"]
                .as_str()
                .is_some_and(|w| w.contains("webhooks.max-pending-per-tenant")),
            "{d:#}"
        );
    }
    assert_eq!(hung.received().len(), 3, "only the 3 queued were attempted");

    // b: each delivered before the next event; the oldest go as new ones come.
    for i in 0..8 {
        let task = format!("b-{i}");
        submit(&b, &task);
        wait_for(&fast, "b's delivery", |g| !with_task(g, &task).is_empty());
    }
    let mut kept = Vec::new();
    let bounded = wait_until(Duration::from_secs(20), || {
        kept = deliveries(&b, &b_id);
        kept.len() == 4 && kept.iter().all(|d| d["state"] == "delivered")
    });
    assert!(bounded, "{kept:#?}");
    let newest: Vec<String> = fast
        .received()
        .iter()
        .rev()
        .take(4)
        .filter_map(|r| r.header("caldera-event-id").map(str::to_string))
        .collect();
    let mut kept_ids: Vec<String> = kept.iter().map(|d| d["event_id"].to_string()).collect();
    kept_ids.reverse();
    assert_eq!(kept_ids, newest, "the newest 4 are kept");
}

/// `webhooks.max-per-tenant` holds however many subscriptions tenants ask
/// for at once: three tenants each send 16 requests in parallel against a
/// cap of 2; each gets exactly 2 and 14 409s (counted and committed one at
/// a time, so no two requests both see room for the last one).
#[test]
fn parallel_subscriptions_never_pass_the_per_tenant_cap() {
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 200);
    let cp = server(dir.path(), &[("CALDERA_WEBHOOK_MAX_PER_TENANT", "2")]);
    let tenants: Vec<Api> = ["a", "b", "c"]
        .iter()
        .map(|t| cp.api(&cp.tenant(t)))
        .collect();
    let statuses: Vec<Vec<u16>> = std::thread::scope(|s| {
        let calls: Vec<Vec<_>> = tenants
            .iter()
            .map(|api| {
                (0..16)
                    .map(|i| {
                        let url = rx.url(&format!("/{i}"));
                        s.spawn(move || {
                            let body = json!({"url": url, "events": ["*"]}).to_string();
                            api.post("/v1/webhooks", &body).status
                        })
                    })
                    .collect()
            })
            .collect();
        calls
            .into_iter()
            .map(|c| c.into_iter().map(|h| h.join().unwrap_or(0)).collect())
            .collect()
    });
    for (api, got) in tenants.iter().zip(&statuses) {
        let made = got.iter().filter(|s| **s == 201).count();
        let refused = got.iter().filter(|s| **s == 409).count();
        assert_eq!((made, refused), (2, 14), "{statuses:?}");
        let listed = api.get("/v1/webhooks");
        assert_eq!(listed.status, 200, "{:#}", listed.body);
        let n = listed.data()["webhooks"].as_array().map_or(0, Vec::len);
        assert_eq!(n, 2, "{:#}", listed.body);
    }
}

/// Measure (not run in CI): 1,000 `task.submitted` events, each delivered to
/// one local receiver; how long from the event's record to its arrival, and
/// how many deliveries a second. `cargo test --release --test it webhooks:: --
/// --ignored --nocapture`.
#[test]
#[ignore]
fn measure_delivery_latency_and_rate() {
    let n = 1000;
    let dir = tempfile::tempdir().unwrap();
    let rx = Receiver::start(&[], 200);
    let cp = server(dir.path(), &[]);
    let api = cp.api(&cp.tenant("acme"));
    subscribe(&api, &rx.url("/m"), &["task.submitted"]);
    for i in 0..n {
        submit(&api, &format!("m-{i}"));
    }
    let ok = wait_until(Duration::from_secs(120), || rx.received().len() >= n);
    let got = rx.received();
    assert!(ok, "{} of {n} arrived", got.len());
    let lag = caldera_chaos_tests::bench::stats::Sample::new(
        got.iter()
            .map(|r| {
                let at = r.json()["created_at_ms"].as_u64().unwrap_or(0);
                Duration::from_millis(r.at_ms.saturating_sub(at))
            })
            .collect(),
    );
    let first = got
        .iter()
        .filter_map(|r| r.json()["created_at_ms"].as_u64())
        .min()
        .unwrap_or(0);
    let last = got.iter().map(|r| r.at_ms).max().unwrap_or(0);
    let secs = (last.saturating_sub(first)).max(1) as f64 / 1000.0;
    println!(
        "{n} deliveries, event -> receiver: {}; {:.0} deliveries/s (first event to last arrival {secs:.2} s; load {})",
        lag.describe(),
        n as f64 / secs,
        caldera_chaos_tests::bench::stats::loadavg()
    );
}
