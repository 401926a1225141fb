//! A workload's exit whose commit fails (persist-before-act on the exit
//! path), shown with real processes: the task's terminal transition (or, for
//! a released task, the checkpoint saved on its way out) cannot be recorded,
//! so the task actor is rebuilt from sled as it was, still holding its room.
//! The agent told the exit once and its node session deduplicates exits;
//! the rebuilt task must still hear it, within the session, without a
//! reconnect and without relying on the agent's few repeating heartbeats.
//! With the fault removed every task ends as its workload did, its room
//! freed, the ledger agreeing with the tasks, no retry spent.
use caldera_chaos_tests::ledger::{over_committed, settled};
use caldera_chaos_tests::{wait_until, Agent, Api, ControlPlane};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

struct Cluster {
    _cp: ControlPlane,
    _agent: Agent,
    op: Api,
    api: Api,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    fn start_with(extra: &[(&str, &str)]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut env = vec![("CALDERA_TIME_LIMIT_GRACE_MS", "200")];
        env.extend_from_slice(extra);
        let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
        let agent = Agent::start(Path::new(BIN), &cp, "node-1", "8xA100-80GB", dir.path());
        let op = cp.operator();
        assert!(wait_until(Duration::from_secs(20), || {
            op.get("/v1/nodes/node-1").data()["connected"] == true
        }));
        let api = cp.api(&cp.tenant("team-a"));
        Cluster {
            _cp: cp,
            _agent: agent,
            op,
            api,
            dir,
        }
    }

    /// A file whose creation lets a workload of this cluster go on.
    fn gate(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Submits a training task running `sh -c script` on one GPU.
    fn submit(&self, id: &str, script: &str, extra: Value) {
        let mut v = json!({"task_id": id, "task_type": "training",
            "resources": {"gpu": {"count": 1, "memory_gb": 80}, "cpu": {"cores": 1}},
            "command": ["sh", "-c", script]});
        if let Value::Object(m) = extra {
            for (k, x) in m {
                v[k] = x;
            }
        }
        let r = self.api.post("/v1/tasks", &v.to_string());
        assert_eq!(r.status, 201, "{id}: {:#}", r.body);
    }

    fn wait_state(&self, id: &str, state: &str, secs: u64) -> Value {
        self.api.wait_task(id, secs, state, |v| v["state"] == state)
    }

    fn ids(&self, ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }
}

/// Waits for `gate` to exist, then exits `code`.
fn exits_at(gate: &Path, code: i32) -> String {
    format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; exit {code}",
        gate.display()
    )
}

/// The task's exit reaches it while `task_transition` refuses `fail`
/// commits (held for `hold`, well past the agent's repeating heartbeats);
/// then the fault is removed. Answers the task's final view.
fn exit_while_refused(c: &Cluster, id: &str, code: i32, fail: u64, hold: Duration) -> Value {
    let gate = c.gate(id);
    c.submit(id, &exits_at(&gate, code), json!({}));
    c.wait_state(id, "running", 20);
    let (_, refused_before) = c.op.commit_counts("task_transition");
    let rebuilds = c.op.rebuilds("task");
    c.op.arm_fault("task_transition", 0, fail);
    std::fs::write(&gate, b"").unwrap();
    c.op.wait_refused("task_transition", refused_before + 1, 20);
    c.op.wait_rebuilt("task", rebuilds, 20);
    std::thread::sleep(hold);
    let v = c.api.task(id);
    assert_eq!(
        v["state"], "running",
        "{id}: the exit's transition was refused, so the record is as before: {v:#}"
    );
    c.op.clear_faults();
    let end = if code == 0 { "finished" } else { "failed" };
    let v = c.api.wait_task(id, 30, end, |v| v["state"] == end);
    assert_eq!(v["attempts"], 1, "{id}: no retry spent: {v:#}");
    v
}

#[test]
fn an_exit_whose_transition_is_refused_is_heard_again_by_the_rebuilt_task() {
    let c = Cluster::start();
    let v = exit_while_refused(&c, "ok", 0, 1, Duration::from_millis(100));
    assert_eq!(v["exit_code"], 0, "{v:#}");
    let v = exit_while_refused(&c, "bad", 3, 1, Duration::from_millis(100));
    assert_eq!(v["exit_code"], 3, "{v:#}");
    assert!(
        v["failure"].as_str().unwrap_or("").contains("code 3"),
        "{v:#}"
    );
    // Refused for 3 s: twelve heartbeats, far past the agent's three that
    // repeat an exit; the rebuilt task keeps asking until it is recorded.
    let (_, before) = c.op.commit_counts("task_transition");
    let v = exit_while_refused(&c, "long", 0, 1_000, Duration::from_secs(3));
    let (_, after) = c.op.commit_counts("task_transition");
    assert!(
        after >= before + 2,
        "the rebuilt task heard the exit again while it could not be recorded: {before} -> {after}"
    );
    assert_eq!(v["exit_code"], 0, "{v:#}");
    let left = settled(&c.op, &c.ids(&["ok", "bad", "long"]), 20);
    assert!(left.is_empty(), "ledger/task mismatches: {left:#?}");
    assert!(over_committed(&c.op).is_empty());
}

/// Released while running: the workload saves a checkpoint on SIGTERM, then
/// exits. The checkpoint's record is refused, so the task is rebuilt while
/// released, its stop not yet confirmed; its exit must still free its room
/// (a rebuilt task that retired at once would leave nobody to free it).
#[test]
fn a_released_task_rebuilt_before_its_stop_is_confirmed_still_frees_its_room() {
    let c = Cluster::start();
    let script = "trap 'touch \"$CALDERA_CHECKPOINT_DIR/ck\"; sleep 1.6; exit 0' TERM; \
                  while :; do sleep 0.05; done";
    c.submit("rel", script, json!({}));
    c.wait_state("rel", "running", 20);
    let (_, refused_before) = c.op.commit_counts("task_record");
    let rebuilds = c.op.rebuilds("task");
    c.op.arm_fault("task_record", 0, 1);
    let r = c.api.post("/v1/tasks/rel/release", "{}");
    assert_eq!(r.status, 200, "{:#}", r.body);
    c.op.wait_refused("task_record", refused_before + 1, 20);
    c.op.wait_rebuilt("task", rebuilds, 20);
    c.op.clear_faults();
    let left = settled(&c.op, &c.ids(&["rel"]), 30);
    assert!(left.is_empty(), "ledger/task mismatches: {left:#?}");
    assert_eq!(c.api.task("rel")["state"], "released");
    assert!(over_committed(&c.op).is_empty());
}

/// The time limit's stop: the `Exited` that answers it arrives while the
/// transition to `failed` is refused. The rebuilt task, its limit past,
/// stops the workload again and hears the exit again, and ends `failed` for
/// its time limit, its room freed. The stop grace is long (20 s), so the
/// stop's deadline (grace + 5 s) cannot be what ends it within 15 s: before,
/// the exit was not heard again and only that deadline ended the task.
#[test]
fn a_time_limit_exit_whose_transition_is_refused_still_fails_the_task_for_its_limit() {
    let c = Cluster::start_with(&[("CALDERA_STOP_GRACE_MS", "20000")]);
    c.submit("lim", "sleep 60", json!({"duration": "00:00:03"}));
    c.wait_state("lim", "running", 20);
    let (_, refused_before) = c.op.commit_counts("task_transition");
    c.op.arm_fault("task_transition", 0, 1);
    c.op.wait_refused("task_transition", refused_before + 1, 20);
    c.op.clear_faults();
    let v = c.wait_state("lim", "failed", 15);
    assert!(
        v["failure"].as_str().unwrap_or("").contains("time_limit"),
        "{v:#}"
    );
    assert_eq!(v["attempts"], 1, "{v:#}");
    let left = settled(&c.op, &c.ids(&["lim"]), 20);
    assert!(left.is_empty(), "ledger/task mismatches: {left:#?}");
}
