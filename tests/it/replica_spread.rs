//! Replica spread with real processes: a control plane
//! and two agents with simulated GPUs. Replicas of one service go on
//! distinct GPUs, and on distinct nodes where possible; a third replica on
//! two nodes shares a node (never a GPU) and its placement event says so;
//! a `max_replicas_per_node` the user set is a hard limit: the replica that
//! would break it waits, with a pending reason naming it.
use caldera_chaos_tests::models::task_events;
use caldera_chaos_tests::{two_nodes, Api};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

/// A service of `replicas` 10 GB replicas: eight of them would fit on one
/// A100-80GB, so only the spread keeps them apart.
fn service(id: &str, replicas: u32, max_per_node: Option<u32>) -> String {
    let mut v = json!({
        "task_id": id, "task_type": "inference", "replicas": replicas,
        "resources": {"gpu": {"count": 1, "memory_gb": 10}, "cpu": {"cores": 1}},
        "command": ["sleep", "300"]
    });
    if let Some(m) = max_per_node {
        v["max_replicas_per_node"] = json!(m);
    }
    v.to_string()
}

/// (node, GPU index) of a running replica.
fn placed_on(api: &Api, replica: &str) -> (String, u64) {
    let v = api.wait_task(replica, 30, "running", |v| v["state"] == "running");
    let a = &v["allocation"];
    (
        a["node"].as_str().unwrap_or("").to_string(),
        a["gpus"][0]["index"].as_u64().unwrap_or(u64::MAX),
    )
}

#[test]
fn replicas_spread_over_nodes_then_gpus_and_a_set_limit_keeps_one_pending() {
    let dir = tempfile::tempdir().unwrap();
    let (cp, _a, _b) = two_nodes(
        Path::new(BIN),
        dir.path(),
        &[("CALDERA_NODE_TIMEOUT_MS", "15000")],
        "2xA100-80GB",
        "2xA100-80GB",
    );
    let api = cp.api(&cp.tenant("team-a"));
    let submit = |body: String| {
        let r = api.post("/v1/tasks", &body);
        assert_eq!(r.status, 201, "{:#}", r.body);
    };

    // 2 replicas, 2 nodes: one on each node.
    submit(service("pair", 2, None));
    let pair: BTreeSet<String> = (0..2)
        .map(|i| placed_on(&api, &format!("pair.r{i}")).0)
        .collect();
    assert_eq!(pair.len(), 2, "both replicas on one node: {pair:?}");

    // 3 replicas, 2 nodes of 2 GPUs: three distinct GPUs; the one that had
    // to share a node says it was placed without spread.
    submit(service("wide", 3, None));
    let wide: BTreeSet<(String, u64)> = (0..3)
        .map(|i| placed_on(&api, &format!("wide.r{i}")))
        .collect();
    assert_eq!(wide.len(), 3, "a GPU holds two replicas: {wide:?}");
    let nodes: BTreeSet<&String> = wide.iter().map(|(n, _)| n).collect();
    assert_eq!(nodes.len(), 2, "{wide:?}");
    let unspread: usize = (0..3)
        .filter(|i| {
            task_events(&cp.operator(), "team-a", &format!("wide.r{i}"))
                .iter()
                .any(|e| e.contains("placed without spread"))
        })
        .count();
    assert_eq!(unspread, 1, "exactly the third replica shares a node");

    // max_replicas_per_node 1 set: a hard limit, the third replica waits.
    submit(service("capped", 3, Some(1)));
    let capped: BTreeSet<String> = (0..2)
        .map(|i| placed_on(&api, &format!("capped.r{i}")).0)
        .collect();
    assert_eq!(capped.len(), 2, "{capped:?}");
    let v: Value = api.wait_task("capped.r2", 20, "pending on the limit", |v| {
        v["pending_reason"]
            .as_str()
            .is_some_and(|r| r.contains("max_replicas_per_node=1"))
    });
    assert_eq!(v["state"], "queued", "{v:#}");

    // The field is for inference only.
    let r = api.post(
        "/v1/tasks",
        &json!({"task_id": "train", "task_type": "training", "max_replicas_per_node": 1,
            "resources": {"cpu": {"cores": 1}}, "command": ["true"]})
        .to_string(),
    );
    assert_eq!(r.status, 400, "{:#}", r.body);
    assert_eq!(r.body["field"], "max_replicas_per_node", "{:#}", r.body);
}
