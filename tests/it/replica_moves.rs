//! A drain moves a service replica make-before-break, with real processes: the service starts a replacement elsewhere, waits
//! until it runs, and only then stops the replica on the drained node — a
//! planned stop, no retry spent. Measured from the replicas' own
//! timestamped output: at every line any replica wrote, the service had at
//! least its target number of replicas writing. Without room elsewhere the
//! old replica keeps serving (a 1-replica service never goes dark), the
//! service's pending reason says why, and an uncordon completes the move.
//! With `min_replicas` 1, a 2-replica service without room stops one old
//! replica early and keeps the other (the PodDisruptionBudget rule).
//! The move is recorded: a control plane killed mid-move, and a finishing
//! commit that fails, both converge; a move whose first commit fails is not
//! made (the replica drains as a task).
use caldera_chaos_tests::{nodes_connected, two_nodes, wait_until, Agent, Api, ControlPlane};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// Two agents. The node timeout and the workload lease are long (the
/// harness's 1.5 s and 2 s are for the node-loss and lease tests): on a
/// loaded machine a late heartbeat would have a node declared lost and its
/// replica replaced (and killed when the node returns), or a shim stop its
/// workload, which is not what these tests are about.
fn cluster(dir: &Path, gpus: &str) -> (ControlPlane, Agent, Agent) {
    let env = [
        ("CALDERA_NODE_TIMEOUT_MS", "15000"),
        ("CALDERA_WORKLOAD_LEASE_MS", "20000"),
    ];
    two_nodes(Path::new(BIN), dir, &env, gpus, gpus)
}

/// A service whose replicas each write "<allocation> <ms>" to `out` every 50 ms.
fn service(id: &str, replicas: u32, out: &Path) -> String {
    serde_json::json!({
        "task_id": id, "task_type": "inference", "replicas": replicas,
        "resources": {"gpu": {"count": 1, "memory_gb": 10}},
        "command": ["sh", "-c", format!(
            "while true; do echo \"$CALDERA_ALLOCATION_ID $(date +%s%3N)\" >> {}; sleep 0.05; done",
            out.display()
        )]
    })
    .to_string()
}

/// Each allocation's first and last line (ms), by allocation id.
fn spans(out: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for l in std::fs::read_to_string(out).unwrap_or_default().lines() {
        let Some((a, t)) = l.split_once(' ') else {
            continue;
        };
        let Ok(t) = t.trim().parse::<u64>() else {
            continue;
        };
        let e = m.entry(a.to_string()).or_insert((t, t));
        e.0 = e.0.min(t);
        e.1 = e.1.max(t);
    }
    m
}

/// The fewest allocations writing at any allocation's first or last line
/// from `from` on (writing at t: first <= t <= last), and when. The last
/// 200 ms of the file are left out: there every allocation is "about to
/// write" its next line, which the file does not hold yet.
fn fewest_alive(out: &Path, from: u64) -> (usize, u64) {
    let s = spans(out);
    let until = s
        .values()
        .map(|(_, l)| *l)
        .max()
        .unwrap_or(0)
        .saturating_sub(200);
    let mut worst = (usize::MAX, 0);
    for (first, last) in s.values() {
        for t in [*first, *last] {
            if t < from || t > until {
                continue;
            }
            let alive = s.values().filter(|(f, l)| *f <= t && t <= *l).count();
            if alive < worst.0 {
                worst = (alive, t);
            }
        }
    }
    worst
}

/// The first and last line of the newest allocation whose id contains
/// `marker` (a replica restarted before the test's drain has several).
fn latest(s: &BTreeMap<String, (u64, u64)>, marker: &str) -> Option<(u64, u64)> {
    s.iter()
        .filter(|(a, _)| a.contains(marker))
        .map(|(_, span)| *span)
        .max_by_key(|(first, _)| *first)
}

/// Each replica's newest allocation's first and last line, by replica.
fn by_replica(out: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (alloc, span) in spans(out) {
        let e = m.entry(replica_of(&alloc)).or_insert(span);
        if span.0 > e.0 {
            *e = span;
        }
    }
    m
}

/// Waits until `replica` runs on node-a and its current allocation has
/// written for 1.5 s: a workload lost right after its start (and replaced in
/// place by its service) is not the replica these tests drain.
fn settled_on_node_a(api: &Api, replica: &str, out: &Path) {
    let mut last = Value::Null;
    let ok = wait_until(Duration::from_secs(40), || {
        last = api.task(replica);
        let alloc = last["allocation"]["allocation_id"].as_str().unwrap_or("?");
        let alloc = alloc.split_once('/').map_or(alloc, |(_, l)| l);
        last["state"] == "running"
            && node_of(&last) == "node-a"
            && spans(out)
                .get(alloc)
                .is_some_and(|(first, l)| l.saturating_sub(*first) >= 1500)
    });
    assert!(
        ok,
        "{replica} did not settle on node-a: {last:#} {:?}",
        spans(out)
    );
}

/// The replica of an allocation id ("team-a/svc.r0.1" -> "svc.r0").
fn replica_of(alloc: &str) -> String {
    let local = alloc.split_once('/').map_or(alloc, |(_, l)| l);
    local.rsplit_once('.').map_or(local, |(r, _)| r).to_string()
}

fn node_of(v: &Value) -> String {
    v["allocation"]["node"].as_str().unwrap_or("").to_string()
}

fn op_post(op: &Api, path: &str) {
    let r = op.post(path, "{}");
    assert_eq!(r.status, 200, "{path}: {:#}", r.body);
}

fn events(cp: &ControlPlane, task: &str) -> Vec<String> {
    cp.operator()
        .get(&format!("/v1/events?tenant=team-a&task={task}"))
        .data()["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| format!("{} {}", e["kind"].as_str().unwrap_or(""), e["message"]))
                .collect()
        })
        .unwrap_or_default()
}

/// The replicas that wrote in the last second, by service prefix.
fn writing_now(out: &Path) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(1500));
    let s = spans(out);
    let newest = s.values().map(|(_, l)| *l).max().unwrap_or(0);
    let mut r: Vec<String> = s
        .iter()
        .filter(|(_, (_, l))| *l + 1000 >= newest)
        .map(|(a, _)| replica_of(a))
        .collect();
    r.sort();
    r
}

#[test]
fn a_drain_starts_each_replicas_replacement_before_it_stops_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = cluster(dir.path(), "4xA100-80GB");
    let op = cp.operator();
    let api = cp.api(&cp.tenant("team-a"));
    let (out1, out2) = (dir.path().join("svc1"), dir.path().join("svc2"));
    // Everything on node-a: node-b is cordoned until the replicas run.
    op_post(&op, "/v1/nodes/node-b/cordon");
    assert_eq!(
        api.post("/v1/tasks", &service("svc1", 1, &out1)).status,
        201
    );
    assert_eq!(
        api.post("/v1/tasks", &service("svc2", 2, &out2)).status,
        201
    );
    for (r, out) in [("svc1.r0", &out1), ("svc2.r0", &out2), ("svc2.r1", &out2)] {
        settled_on_node_a(&api, r, out);
    }
    op_post(&op, "/v1/nodes/node-b/uncordon");
    assert!(wait_until(Duration::from_secs(10), || by_replica(&out2)
        .len()
        == 2
        && by_replica(&out1).len() == 1));
    let all_up = [&out1, &out2]
        .iter()
        .flat_map(|o| spans(o).into_values().map(|(f, _)| f))
        .max()
        .unwrap_or(0);

    op_post(&op, "/v1/nodes/node-a/drain");
    for old in ["svc1.r0", "svc2.r0", "svc2.r1"] {
        api.wait_task(old, 40, "released once its replacement ran", |v| {
            v["state"] == "released"
        });
    }
    for new in ["svc1.r1000", "svc2.r1000", "svc2.r1001"] {
        let v = api.wait_task(new, 10, "running on node-b", |v| {
            v["state"] == "running" && node_of(v) == "node-b"
        });
        assert_eq!(v["retries_used"], 0, "{v:#}");
    }
    // From the replicas' own output: each old replica's last line comes
    // after a replacement's first, and no line of either service was ever
    // written while fewer than its target were writing.
    for (out, target) in [(&out1, 1), (&out2, 2)] {
        // A replica's newest allocation (one that died before the drain
        // and was replaced in place is not what this test measures).
        let s = by_replica(out);
        assert_eq!(s.len(), target * 2, "{s:?}");
        let (old, new): (Vec<_>, Vec<_>) = s.iter().partition(|(a, _)| !a.contains(".r100"));
        for (a, (_, last)) in &old {
            assert!(
                new.iter().any(|(_, (first, _))| first < last),
                "{a} stopped before any replacement started: {s:?}"
            );
        }
        let (alive, at) = fewest_alive(out, all_up);
        assert!(
            alive >= target,
            "only {alive} of {target} replicas at {at}: {s:?}"
        );
    }
    // Back at the target, the surge replicas serving the slots.
    assert_eq!(writing_now(&out1), vec!["svc1.r1000"]);
    assert_eq!(writing_now(&out2), vec!["svc2.r1000", "svc2.r1001"]);
    for svc in ["svc1", "svc2"] {
        let v = api.task(svc);
        assert_eq!(v["state"], "running", "{v:#}");
        let e = events(&cp, svc);
        assert!(
            e.iter()
                .any(|e| e.starts_with("replica_moved") && e.contains("starts first")),
            "{e:#?}"
        );
        assert!(
            e.iter()
                .any(|e| e.starts_with("replica_moved") && e.contains("make-before-break done")),
            "{e:#?}"
        );
    }
}

/// Two 2-GPU nodes, node-b cordoned, and the 1-replica service `svc`
/// (output in `dir/svc`) running on node-a; the tenant's token.
fn one_replica_on_node_a(dir: &Path) -> (ControlPlane, String, (Agent, Agent)) {
    let (cp, a, b) = cluster(dir, "2xA100-80GB");
    let token = cp.tenant("team-a");
    let api = cp.api(&token);
    op_post(&cp.operator(), "/v1/nodes/node-b/cordon");
    let body = service("svc", 1, &dir.join("svc"));
    assert_eq!(api.post("/v1/tasks", &body).status, 201);
    settled_on_node_a(&api, "svc.r0", &dir.join("svc"));
    (cp, token, (a, b))
}

/// `svc.r0` was replaced by `svc.r1000`, one allocation each: the
/// replacement's first line precedes the old one's last, and only the
/// replacement writes now.
fn assert_made_before_broken(out: &Path) {
    let s = spans(out);
    let news = s.keys().filter(|a| a.contains(".r1000.")).count();
    assert_eq!(
        news, 1,
        "one replacement allocation, never restarted: {s:?}"
    );
    let first_new = latest(&s, ".r1000.").map(|(f, _)| f);
    let last_old = latest(&s, ".r0.").map(|(_, l)| l);
    assert!(
        matches!((first_new, last_old), (Some(f), Some(l)) if f < l),
        "the replacement's first line must precede the old one's last: {s:?}"
    );
    assert_eq!(writing_now(out), vec!["svc.r1000"]);
}

/// Makes the next `replica_move` commit fail, posts `path`, and waits until
/// that commit was refused and the service rebuilt.
fn fail_one_move_commit(op: &Api, path: &str) {
    let before = op.rebuilds("task");
    op.arm_fault("replica_move", 0, 1);
    op_post(op, path);
    op.wait_refused("replica_move", 1, 20);
    op.wait_rebuilt("task", before, 10);
    op.clear_faults();
}

#[test]
fn without_room_the_old_replica_keeps_serving_until_room_appears() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, token, _agents) = one_replica_on_node_a(dir.path());
    let (op, api) = (cp.operator(), cp.api(&token));
    let out = dir.path().join("svc");

    // node-b stays cordoned: the replacement has nowhere to go.
    op_post(&op, "/v1/nodes/node-a/drain");
    let v = api.wait_task("svc", 20, "a pending reason naming the move", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("keeps serving") && r.contains("cordoned"))
    });
    assert_eq!(v["state"], "running", "{v:#}");
    assert_eq!(api.task("svc.r1000")["state"], "queued");
    let before = latest(&spans(&out), ".r0.");
    std::thread::sleep(Duration::from_secs(3));
    let after = latest(&spans(&out), ".r0.");
    assert!(
        matches!((before, after), (Some((f0, l0)), Some((f1, l1))) if f0 == f1 && l1 > l0),
        "the old replica stopped writing without a replacement: {before:?} then {after:?}"
    );
    assert_eq!(api.task("svc.r0")["state"], "running");
    let e = events(&cp, "svc");
    assert!(
        e.iter()
            .any(|e| e.starts_with("replica_moved") && e.contains("waits for room")),
        "{e:#?}"
    );

    // Room appears: the move completes, make-before-break.
    op_post(&op, "/v1/nodes/node-b/uncordon");
    let v = api.wait_task("svc.r1000", 30, "running on node-b", |v| {
        v["state"] == "running" && node_of(v) == "node-b"
    });
    assert_eq!(v["retries_used"], 0, "{v:#}");
    api.wait_task("svc.r0", 30, "released", |v| v["state"] == "released");
    assert_made_before_broken(&out);
    let v = api.wait_task("svc", 10, "no pending reason", |v| {
        v["pending_reason"].is_null()
    });
    assert_eq!(v["state"], "running", "{v:#}");
}

/// The move is in the service's record: a control plane killed (-9) while
/// the replacement waits for room comes back knowing which replica is
/// replaced by which, keeps the old one serving, and finishes the move once
/// room appears — even when the commit that finishes it fails once (the
/// service is rebuilt from sled and finishes it then).
#[test]
fn a_move_survives_a_control_plane_restart_and_a_failed_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut cp, token, _agents) = one_replica_on_node_a(dir.path());
    let (op, api) = (cp.operator(), cp.api(&token));
    let out = dir.path().join("svc");
    op_post(&op, "/v1/nodes/node-a/drain");
    api.wait_task("svc", 20, "waiting for room", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("keeps serving"))
    });

    cp.restart();
    assert!(wait_until(Duration::from_secs(30), || nodes_connected(&cp) == 2));
    let (op, api) = (cp.operator(), cp.api(&token));
    let v = api.wait_task("svc", 30, "waiting for room again", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("svc.r0") && r.contains("svc.r1000"))
    });
    assert_eq!(v["state"], "running", "{v:#}");
    assert_eq!(api.task("svc.r0")["state"], "running");
    assert_eq!(api.task("svc.r1000")["state"], "queued");
    // No third replica appeared: the restart knew the move.
    assert_eq!(api.get("/v1/tasks/svc.r1001").status, 404);

    fail_one_move_commit(&op, "/v1/nodes/node-b/uncordon");
    api.wait_task("svc.r0", 30, "released after the rebuild", |v| {
        v["state"] == "released"
    });
    let v = api.task("svc.r1000");
    assert!(v["state"] == "running" && node_of(&v) == "node-b", "{v:#}");
    assert_eq!(v["retries_used"], 0, "{v:#}");
    assert_made_before_broken(&out);
}

/// A move whose first commit fails was not made: no replacement record, no
/// surge replica; the service is rebuilt and the replica drains as any task
/// (stopped, placed again elsewhere), still without spending a retry.
#[test]
fn a_move_that_cannot_be_recorded_is_not_made_and_the_replica_drains_as_a_task() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, token, _agents) = one_replica_on_node_a(dir.path());
    let (op, api) = (cp.operator(), cp.api(&token));
    op_post(&op, "/v1/nodes/node-b/uncordon");
    fail_one_move_commit(&op, "/v1/nodes/node-a/drain");
    let v = api.wait_task("svc.r0", 30, "placed again on node-b", |v| {
        v["state"] == "running" && node_of(v) == "node-b"
    });
    assert_eq!(v["retries_used"], 0, "{v:#}");
    assert_eq!(api.get("/v1/tasks/svc.r1000").status, 404);
    assert_eq!(api.task("svc")["state"], "running");
}

/// Without room, a 2-replica service with `min_replicas` 1 follows the
/// PodDisruptionBudget: one old replica may stop before its replacement
/// runs (one still serves), the other may not; the service never goes dark,
/// and with room again both replacements run and the count is back at 2.
#[test]
fn without_room_a_service_drops_to_its_minimum_and_no_lower() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = cluster(dir.path(), "2xA100-80GB");
    let (op, api) = (cp.operator(), cp.api(&cp.tenant("team-a")));
    let out = dir.path().join("svc");
    op_post(&op, "/v1/nodes/node-b/cordon");
    assert_eq!(api.post("/v1/tasks", &service("svc", 2, &out)).status, 201);
    for r in ["svc.r0", "svc.r1"] {
        settled_on_node_a(&api, r, &out);
    }
    let all_up = by_replica(&out)
        .values()
        .map(|(f, _)| *f)
        .max()
        .unwrap_or(0);

    op_post(&op, "/v1/nodes/node-a/drain");
    api.wait_task("svc", 20, "the second move keeps its old replica", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("keeps serving"))
    });
    let states: Vec<String> = ["svc.r0", "svc.r1"]
        .iter()
        .map(|r| api.task(r)["state"].as_str().unwrap_or("").to_string())
        .collect();
    let mut sorted = states.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["released", "running"], "{states:?}");
    let e = events(&cp, "svc");
    assert!(
        e.iter()
            .any(|e| e.contains("keeps min_replicas without it")),
        "{e:#?}"
    );

    op_post(&op, "/v1/nodes/node-b/uncordon");
    for new in ["svc.r1000", "svc.r1001"] {
        let v = api.wait_task(new, 30, "running on node-b", |v| {
            v["state"] == "running" && node_of(v) == "node-b"
        });
        assert_eq!(v["retries_used"], 0, "{v:#}");
    }
    for old in ["svc.r0", "svc.r1"] {
        api.wait_task(old, 30, "released", |v| v["state"] == "released");
    }
    let (alive, at) = fewest_alive(&out, all_up);
    assert!(
        alive >= 1,
        "the service went dark at {at}: {:?}",
        spans(&out)
    );
    assert_eq!(writing_now(&out), vec!["svc.r1000", "svc.r1001"]);
}
