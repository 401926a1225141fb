//! One pool for training and inference, with real processes: preemption with
//! checkpoint-resume, guarantees and borrowing, the queue's order, estimates and
//! backfill, the inference cap, and idle reclaim.
use caldera_chaos_tests::{free_port, history_states, wait_until, Agent, Api, ControlPlane};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// A training script: counts one step a second, checkpoints every step into
/// CALDERA_CHECKPOINT_DIR, resumes from CALDERA_RESUME_FROM, and on SIGTERM
/// saves and exits. Each start appends "start <counter>" to `trail`.
fn trainer(trail: &Path) -> String {
    format!(
        r#"n=0; if [ -n "$CALDERA_RESUME_FROM" ]; then n=$(cat "$CALDERA_RESUME_FROM"); fi
echo "start $n" >> {trail}
save() {{ echo $n > "$CALDERA_CHECKPOINT_DIR/.tmp"; mv "$CALDERA_CHECKPOINT_DIR/.tmp" "$CALDERA_CHECKPOINT_DIR/ckpt-$n"; }}
trap 'save; exit 0' TERM
while true; do n=$((n+1)); save; sleep 1 & wait $!; done"#,
        trail = trail.display()
    )
}

fn submit(api: &Api, spec: Value) {
    let r = api.post("/v1/tasks", &spec.to_string());
    assert!(r.status == 201, "{spec}: {:#}", r.body);
}

fn one_node(dir: &Path, gpus: &str, env: &[(&str, &str)]) -> (ControlPlane, Agent) {
    let cp = ControlPlane::start(Path::new(BIN), &dir.join("cp"), env);
    let a = Agent::start(Path::new(BIN), &cp, "node-a", gpus, dir);
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || op
        .get("/v1/nodes/node-a")
        .data()["connected"]
        == true));
    (cp, a)
}

#[test]
fn inference_preempts_training_which_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "1xA100-80GB", &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let trail = dir.path().join("trail");
    submit(
        &api,
        json!({"task_id": "train", "task_type": "training", "priority": "low",
        "resources": {"gpu": {"count": 1, "memory_gb": 80}, "cpu": {"cores": 2}},
        "command": ["sh", "-c", trainer(&trail)]}),
    );
    api.wait_task("train", 20, "running", |v| v["state"] == "running");
    // Let it make progress and checkpoint it.
    api.wait_task("train", 20, "a checkpoint", |v| {
        v["checkpoint"]
            .as_str()
            .is_some_and(|c| !c.ends_with("ckpt-1"))
    });

    let port = free_port();
    let started = std::time::Instant::now();
    submit(
        &api,
        json!({"task_id": "svc", "task_type": "inference", "priority": "high",
        "resources": {"gpu": {"count": 1, "memory_gb": 40}, "cpu": {"cores": 1}}, "replicas": 1,
        "command": ["python3", "-m", "http.server", port.to_string(), "--bind", "127.0.0.1"]}),
    );
    // The replica runs within the grace period (2 s here) plus a few seconds.
    api.wait_task("svc.r0", 15, "replica running", |v| v["state"] == "running");
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(12),
        "inference waited {waited:?}"
    );
    assert_eq!(api.task("svc")["state"], "running");
    // It answers HTTP.
    assert!(wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .and_then(|mut s| {
                s.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
                let mut b = String::new();
                s.read_to_string(&mut b)?;
                Ok(b.starts_with("HTTP/1.0 200"))
            })
            .unwrap_or(false)
    }));
    // Training was preempted, not failed: back in the queue with its checkpoint.
    let t = api.wait_task("train", 10, "requeued", |v| {
        v["state"] == "queued" && v["preemptions"] == 1
    });
    let states = history_states(&t);
    assert!(
        states.windows(2).any(|w| w == ["running", "preempted"])
            && states.ends_with(&["preempted", "queued"]),
        "{states:?}"
    );
    let events = api.get("/v1/events?task=train").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or(""))
        .collect();
    assert!(
        kinds.contains(&"checkpoint_requested") && kinds.contains(&"preempted"),
        "{kinds:?}"
    );
    assert!(events.iter().any(
        |e| e["kind"] == "preempted" && e["message"].as_str().unwrap_or("").contains("svc.r0")
    ));

    // The service goes away; training resumes where it stopped.
    assert_eq!(api.post("/v1/tasks/svc/release", "").status, 200);
    api.wait_task("train", 20, "running again", |v| {
        v["state"] == "running" && v["attempts"] == 2
    });
    assert!(wait_until(
        Duration::from_secs(10),
        || std::fs::read_to_string(&trail)
            .unwrap_or_default()
            .lines()
            .count()
            == 2
    ));
    let trail = std::fs::read_to_string(&trail).unwrap();
    let starts: Vec<u64> = trail
        .lines()
        .filter_map(|l| l.strip_prefix("start ")?.parse().ok())
        .collect();
    assert_eq!(starts[0], 0, "{trail}");
    assert!(
        starts[1] >= 2,
        "the counter restarted instead of resuming: {trail}"
    );
}

/// A task bigger than its tenant may ever hold (guarantee + borrowing
/// limit) would wait forever: it is refused, in a dry run too, naming the
/// field and the cap; one at the cap is accepted.
#[test]
fn a_task_above_its_tenants_cap_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "4xA100-80GB", &[]);
    let r = cp.operator().post(
        "/v1/tenants",
        r#"{"name":"capped","quota":{"gpus":1},"borrowing_limit":{"gpus":1}}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(r.data()["token"].as_str().unwrap());
    let task = |id: &str, gpus: u32| {
        json!({"task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": gpus}, "cpu": {"cores": 1}}, "command": ["sleep", "60"]})
        .to_string()
    };
    for path in ["/v1/tasks", "/v1/tasks?dry_run=true"] {
        let r = api.post(path, &task("big", 3));
        assert_eq!(r.status, 422, "{path}: {:#}", r.body);
        assert_eq!(r.body["code"], 42206, "{path}: {:#}", r.body);
        assert_eq!(
            r.body["field"], "resources.gpu.count",
            "{path}: {:#}",
            r.body
        );
        let msg = r.body["msg"].as_str().unwrap_or("");
        assert!(
            msg.contains("exceeds the tenant's cap") && msg.contains("at most 2"),
            "{path}: {msg}"
        );
    }
    assert_eq!(api.get("/v1/tasks/big").status, 404);
    let r = api.post("/v1/tasks", &task("at-cap", 2));
    assert_eq!(r.status, 201, "{:#}", r.body);
}

#[test]
fn an_over_quota_task_waits_with_an_estimated_start_in_the_future() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "4xA100-80GB", &[]);
    let op = cp.operator();
    let r = op.post(
        "/v1/tenants",
        r#"{"name":"small","quota":{"gpus":1},"borrowing_limit":{"gpus":0}}"#,
    );
    assert_eq!(r.status, 201, "{:#}", r.body);
    let api = cp.api(r.data()["token"].as_str().unwrap());
    let task = |id: &str, dur: &str| {
        json!({"task_id": id, "task_type": "training", "duration": dur,
        "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}}, "command": ["sleep", "60"]})
    };
    submit(&api, task("first", "00:10:00"));
    let first = api.wait_task("first", 20, "running", |v| v["state"] == "running");
    submit(&api, task("second", "00:05:00"));
    let v = api.wait_task("second", 10, "an estimate", |v| {
        v["estimated_start_ms"].is_u64()
    });
    assert_eq!(v["state"], "queued");
    assert!(
        v["pending_reason"]
            .as_str()
            .unwrap_or("")
            .contains("over quota"),
        "{v:#}"
    );
    let est = v["estimated_start_ms"].as_u64().unwrap();
    let now = caldera_now_ms();
    assert!(est > now, "estimate {est} is in the past (now {now})");
    // It is when "first" is declared to end.
    let first_start = first["allocation"]["created_ms"].as_u64().unwrap();
    assert_eq!(est, first_start + 600_000);
    assert!(v["estimated_start"]
        .as_str()
        .is_some_and(|s| s.ends_with('Z')));
}

fn caldera_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[test]
fn borrowed_capacity_is_preempted_when_its_owner_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "2xA100-80GB", &[]);
    let op = cp.operator();
    let a = op.post(
        "/v1/tenants",
        r#"{"name":"a","quota":{"gpus":1},"borrowing_limit":{"gpus":1}}"#,
    );
    let b = op.post("/v1/tenants", r#"{"name":"b","quota":{"gpus":1}}"#);
    let (a, b) = (
        cp.api(a.data()["token"].as_str().unwrap()),
        cp.api(b.data()["token"].as_str().unwrap()),
    );
    let gpu_task = |id: &str| {
        json!({"task_id": id, "task_type": "training", "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}},
        "command": ["sleep", "120"]})
    };
    submit(&a, gpu_task("a-own"));
    a.wait_task("a-own", 20, "running", |v| v["state"] == "running");
    submit(&a, gpu_task("a-borrow"));
    let borrowed = a.wait_task("a-borrow", 20, "running", |v| v["state"] == "running");
    assert_eq!(borrowed["allocation"]["borrowed"], true);
    assert_eq!(a.task("a-own")["allocation"]["borrowed"], false);
    // B comes for its guarantee: A's borrowed allocation goes, A's own stays.
    submit(&b, gpu_task("b-own"));
    b.wait_task("b-own", 15, "running", |v| v["state"] == "running");
    let v = a.wait_task("a-borrow", 10, "preempted and requeued", |v| {
        v["state"] == "queued" && v["preemptions"] == 1
    });
    assert!(
        v["history"].as_array().unwrap().iter().any(|h| h["reason"]
            .as_str()
            .unwrap_or("")
            .contains("reclaims its guarantee")),
        "{v:#}"
    );
    assert_eq!(a.task("a-own")["state"], "running");
}

#[test]
fn an_inference_replica_larger_than_half_a_gpu_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Three GPUs: a service's replicas never share one (replica spread).
    let (cp, _a) = one_node(dir.path(), "3xA100-80GB", &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let r = api.post(
        "/v1/tasks",
        &json!({"task_id": "big-svc", "task_type": "inference",
        "resources": {"gpu": {"count": 1, "memory_gb": 60}}, "command": ["true"]})
        .to_string(),
    );
    assert_eq!(r.status, 400, "{:#}", r.body);
    assert_eq!(r.body["field"], "resources.gpu.memory_gb");
    assert!(
        r.body["msg"].as_str().unwrap_or("").contains("scale out"),
        "{:#}",
        r.body
    );
    let r = api.post(
        "/v1/tasks",
        &json!({"task_id": "multi-svc", "task_type": "inference",
        "resources": {"gpu": {"count": 2}}, "command": ["true"]})
        .to_string(),
    );
    assert_eq!(r.status, 400);
    assert_eq!(api.get("/v1/tasks/big-svc").status, 404);
    // Within the cap, with replicas: each replica is its own allocation.
    let r = api.post("/v1/tasks", &json!({"task_id": "ok-svc", "task_type": "inference", "priority": "high",
        "resources": {"gpu": {"count": 1, "memory_gb": 20}}, "replicas": 2, "command": ["sleep", "60"]}).to_string());
    assert_eq!(r.status, 201, "{:#}", r.body);
    api.wait_task("ok-svc.r1", 20, "second replica running", |v| {
        v["state"] == "running"
    });
    let s = api.put("/v1/tasks/ok-svc/replicas", r#"{"replicas":3}"#);
    assert_eq!(s.status, 200, "{:#}", s.body);
    api.wait_task("ok-svc.r2", 20, "third replica running", |v| {
        v["state"] == "running"
    });
    assert_eq!(api.task("ok-svc")["replicas"], 3);
}

/// Accepts HTTP POSTs on a port and collects their bodies.
fn webhook_sink() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let mut s = s;
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = vec![0u8; 65536];
            let mut data = Vec::new();
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data);
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        sink.lock().unwrap().push(body.to_string());
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                        break;
                    }
                }
            }
        }
    });
    (port, got)
}

#[test]
fn an_idle_allocation_is_warned_then_reclaimed_unless_exempt() {
    let dir = tempfile::tempdir().unwrap();
    let (port, hooks) = webhook_sink();
    let url = format!("http://127.0.0.1:{port}/idle");
    // Four GPUs: two training tasks, and the service's two replicas each
    // on a GPU of its own (replica spread).
    let (cp, _a) = one_node(
        dir.path(),
        "4xA100-80GB",
        &[
            ("CALDERA_IDLE_WINDOW_MS", "1500"),
            ("CALDERA_IDLE_GRACE_MS", "1500"),
            ("CALDERA_USAGE_SAMPLE_MS", "300"),
            ("CALDERA_IDLE_WEBHOOK_URL", &url),
        ],
    );
    let api = cp.api(&cp.tenant("hoarder"));
    let idle = |id: &str, exempt: bool| {
        json!({"task_id": id, "task_type": "training", "idle_exempt": exempt,
        "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}}, "command": ["sleep", "120"]})
    };
    submit(&api, idle("sleeper", false));
    submit(&api, idle("standby", true));
    submit(
        &api,
        json!({"task_id": "idle-svc", "task_type": "inference", "replicas": 2, "min_replicas": 1,
            "resources": {"gpu": {"share": 0.25}, "cpu": {"cores": 1}}, "command": ["sleep", "120"]}),
    );
    let v = api.wait_task("sleeper", 30, "reclaimed", |v| v["state"] == "released");
    let why = v["history"].as_array().unwrap().last().unwrap()["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(why.contains("reclaimed: idle"), "{why}");
    let events = api.get("/v1/events?task=sleeper").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events.iter().any(|e| e["kind"] == "idle_warning"),
        "{events:#?}"
    );
    assert!(wait_until(Duration::from_secs(5), || hooks
        .lock()
        .unwrap()
        .iter()
        .any(
            |b| b.contains("\"sleeper\"") && b.contains("idle_warning")
        )));
    assert_eq!(api.task("standby")["state"], "running");
    // An idle service is scaled in, down to its minimum, not stopped.
    let svc = api.wait_task("idle-svc", 20, "scaled in to 1 replica", |v| {
        v["replicas"] == 1
    });
    assert_eq!(svc["state"], "running", "{svc:#}");
    api.wait_task("idle-svc.r1", 15, "replica released", |v| {
        v["state"] == "released"
    });
    assert_eq!(api.task("idle-svc.r0")["state"], "running");
    // The usage report shows allocated against used over time.
    let u = api.get("/v1/tenants/hoarder/usage");
    assert_eq!(u.status, 200, "{:#}", u.body);
    let samples = u.data()["samples"].as_array().cloned().unwrap_or_default();
    assert!(
        samples.len() >= 2
            && samples
                .iter()
                .any(|s| s["allocated"]["gpus"].as_f64().is_some_and(|g| g >= 2.0)),
        "{samples:#?}"
    );
}

#[test]
fn fair_share_puts_the_tenant_using_less_of_its_guarantee_first() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "2xA100-80GB", &[]);
    let op = cp.operator();
    let a = op.post("/v1/tenants", r#"{"name":"a","quota":{"gpus":2}}"#);
    let b = op.post("/v1/tenants", r#"{"name":"b","quota":{"gpus":2}}"#);
    let (a, b) = (
        cp.api(a.data()["token"].as_str().unwrap()),
        cp.api(b.data()["token"].as_str().unwrap()),
    );
    let t = |id: &str, cmd: &str| {
        json!({"task_id": id, "task_type": "training", "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}},
        "command": ["sh", "-c", cmd]})
    };
    submit(&a, t("a-long", "sleep 120"));
    submit(&a, t("a-short", "sleep 2"));
    a.wait_task("a-short", 20, "running", |v| v["state"] == "running");
    // Both wait; A asked first, but A already holds half its guarantee and B none.
    submit(&a, t("a-next", "sleep 60"));
    std::thread::sleep(Duration::from_millis(200));
    submit(&b, t("b-next", "sleep 60"));
    b.wait_task("b-next", 20, "running", |v| v["state"] == "running");
    assert_eq!(a.task("a-next")["state"], "queued");
}

#[test]
fn backfill_runs_short_work_without_delaying_the_head_of_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "2xA100-80GB", &[]);
    let api = cp.api(&cp.tenant("team"));
    let t = |id: &str, gpus: u32, dur: &str, cmd: &str| {
        json!({"task_id": id, "task_type": "training", "duration": dur,
        "resources": {"gpu": {"count": gpus}, "cpu": {"cores": 1}}, "command": ["sh", "-c", cmd]})
    };
    submit(&api, t("r1", 1, "00:00:02", "sleep 1"));
    submit(&api, t("r2", 1, "00:02:00", "sleep 120"));
    api.wait_task("r2", 20, "running", |v| v["state"] == "running");
    // The head needs both GPUs: it can start when r2 ends (2 minutes).
    submit(&api, t("head", 2, "00:10:00", "sleep 60"));
    let head = api.wait_task("head", 10, "an estimate", |v| {
        v["estimated_start_ms"].is_u64()
    });
    let head_start = head["estimated_start_ms"].as_u64().unwrap();
    submit(&api, t("long", 1, "00:10:00", "sleep 60"));
    submit(&api, t("short", 1, "00:00:30", "sleep 30"));
    // r1 ends: the freed GPU goes to "short" (ends before the head's start),
    // not to "long" (would still hold it when the head should start).
    api.wait_task("short", 20, "backfilled", |v| v["state"] == "running");
    let long = api.task("long");
    assert_eq!(long["state"], "queued");
    assert!(
        long["pending_reason"]
            .as_str()
            .unwrap_or("")
            .contains("waiting behind head"),
        "{long:#}"
    );
    let head = api.task("head");
    assert_eq!(head["state"], "queued");
    assert!(
        head["estimated_start_ms"].as_u64().unwrap() <= head_start + 1000,
        "backfill delayed the head: {head:#}"
    );
}

#[test]
fn lowering_a_quota_keeps_work_running_but_marks_the_excess_borrowed() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "2xA100-80GB", &[]);
    let op = cp.operator();
    let r = op.post("/v1/tenants", r#"{"name":"a","quota":{"gpus":2}}"#);
    let a = cp.api(r.data()["token"].as_str().unwrap());
    let t = |id: &str| {
        json!({"task_id": id, "task_type": "training", "resources": {"gpu": {"count": 1}, "cpu": {"cores": 1}},
        "command": ["sleep", "120"]})
    };
    submit(&a, t("older"));
    a.wait_task("older", 20, "running", |v| v["state"] == "running");
    submit(&a, t("newer"));
    a.wait_task("newer", 20, "running", |v| {
        v["state"] == "running" && v["allocation"]["borrowed"] == false
    });
    let r = op.put("/v1/tenants/a/quota", r#"{"gpus":1}"#);
    assert_eq!(r.status, 200, "{:#}", r.body);
    let v = a.wait_task("newer", 10, "marked borrowed", |v| {
        v["allocation"]["borrowed"] == true
    });
    assert_eq!(v["state"], "running");
    assert_eq!(a.task("older")["allocation"]["borrowed"], false);
    assert_eq!(a.task("older")["state"], "running");
    let ev = op.get("/v1/events?tenant=a").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        ev.iter().any(|e| e["kind"] == "quota_changed"
            && e["message"].as_str().unwrap_or("").contains("newer.1")
            && e["message"].as_str().unwrap_or("").contains("borrowed")),
        "{ev:#?}"
    );
}

#[test]
fn a_per_model_quota_limits_gpus_of_that_model_only() {
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &[]);
    let _a = Agent::start(Path::new(BIN), &cp, "node-a", "2xA100-80GB", dir.path());
    let _b = Agent::start(Path::new(BIN), &cp, "node-b", "2xT4-16GB", dir.path());
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == 2)
    }));
    let r = op.post("/v1/tenants", r#"{"name":"a","quota":{"gpus_by_model":{"A100":1}},"borrowing_limit":{"gpus_by_model":{"A100":0}}}"#);
    assert_eq!(r.status, 201, "{:#}", r.body);
    let a = cp.api(r.data()["token"].as_str().unwrap());
    let t = |id: &str, model: &str| {
        json!({"task_id": id, "task_type": "training",
        "resources": {"gpu": {"count": 1, "model": model}, "cpu": {"cores": 1}}, "command": ["sleep", "120"]})
    };
    submit(&a, t("a100-1", "A100"));
    a.wait_task("a100-1", 20, "running", |v| v["state"] == "running");
    submit(&a, t("a100-2", "A100"));
    let v = a.wait_task("a100-2", 10, "refused by the model quota", |v| {
        v["pending_reason"].is_string()
    });
    assert_eq!(v["state"], "queued");
    assert!(
        v["pending_reason"]
            .as_str()
            .unwrap()
            .contains("over quota for GPU model A100"),
        "{v:#}"
    );
    // Other models are not limited.
    submit(&a, t("t4-1", "T4"));
    a.wait_task("t4-1", 20, "running", |v| v["state"] == "running");
}

#[test]
fn a_service_replaces_a_replica_that_exits_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a) = one_node(dir.path(), "1xA100-80GB", &[]);
    let api = cp.api(&cp.tenant("team-a"));
    let runs = dir.path().join("runs");
    submit(
        &api,
        json!({"task_id": "flaky", "task_type": "inference", "priority": "high", "replicas": 1,
            "resources": {"gpu": {"share": 0.25}, "cpu": {"cores": 1}},
            "command": ["sh", "-c", format!("echo run >> {}; sleep 1; exit 1", runs.display())]}),
    );
    // First run, exit, replaced after 1 s, second run.
    assert!(wait_until(
        Duration::from_secs(20),
        || std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
            >= 2
    ));
    let events = api.get("/v1/events?task=flaky").data()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        events.iter().any(|e| e["message"]
            .as_str()
            .unwrap_or("")
            .contains("replica flaky.r0 ended (failed); replaced in 1s")),
        "{events:#?}"
    );
    // Releasing the service ends the replacement loop.
    assert_eq!(api.post("/v1/tasks/flaky/release", "").status, 200);
    std::thread::sleep(Duration::from_secs(3));
    let n = std::fs::read_to_string(&runs)
        .unwrap_or_default()
        .lines()
        .count();
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count(),
        n,
        "replicas still restart after release"
    );
}
