//! Two agents of one name on one host (two clusters, or parallel tests),
//! each running an allocation of the same id (`team-a+train.1`): when one's
//! workload ends and is reaped, the other's must run on. Allocation cgroups
//! named by `caldera-<node name>` alone would be shared by both, and reaping
//! the first would kill the second. Real servers, agents and shims;
//! where the host gives the agent no cgroups there is nothing to share and
//! the test passes on what it can still check.
use caldera_chaos_tests::ticks;
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

#[test]
fn reaping_one_agents_workload_leaves_a_same_named_agents_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    let cp1 = ControlPlane::start(Path::new(BIN), &one.join("cp"), &[]);
    let cp2 = ControlPlane::start(Path::new(BIN), &two.join("cp"), &[]);
    let _a1 = Agent::start(Path::new(BIN), &cp1, "node-a", "1xA100-80GB", &one);
    let _a2 = Agent::start(Path::new(BIN), &cp2, "node-a", "1xA100-80GB", &two);
    let file = dir.path().join("ticks");
    let submit = |cp: &ControlPlane, command: Vec<String>| {
        let api = cp.api(&cp.tenant("team-a"));
        let spec = serde_json::json!({
            "task_id": "train", "task_type": "training",
            "resources": {"gpu": {"count": 1}}, "command": command
        });
        assert!(wait_until(Duration::from_secs(20), || {
            api.post("/v1/tasks", &spec.to_string()).status == 201
        }));
        api
    };
    let api2 = submit(&cp2, ticks::ticker(&file, false));
    let v = api2.wait_task("train", 20, "running", |v| v["state"] == "running");
    let id = v["allocation"]["allocation_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let api1 = submit(&cp1, vec!["sleep".into(), "1".into()]);
    api1.wait_task("train", 20, "finished", |v| v["state"] == "finished");
    // The first agent has reaped its allocation; the second's still ticks.
    std::thread::sleep(Duration::from_secs(1));
    let before = ticks::spans(&file).get(&id).copied();
    std::thread::sleep(Duration::from_secs(1));
    let after = ticks::spans(&file).get(&id).copied();
    assert!(
        before.is_some() && after.map(|s| s.count) > before.map(|s| s.count),
        "the other cluster's {id} stopped ticking: {before:?} -> {after:?}"
    );
    assert_eq!(api2.task("train")["state"], "running");
}
