//! Accounting adds up: one rule for every view of
//! `GET /v1/utilization` — a GPU is allocated by the fraction of its memory
//! held — so by tenant, by node, by GPU model and the pool total agree; and on
//! simulated nodes measured use is the workloads' own, never the host's load
//! scaled onto simulated cores; and the tenant's usage view
//! (`GET /v1/tenants/{name}/usage`) counts GPUs by the same rule. Real server, real agents (simulated GPUs).
use caldera_chaos_tests::{wait_until, Agent, ControlPlane};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_caldera");

fn reservation(id: &str, gpu: &str) -> String {
    format!(
        r#"{{"task_id":"{id}","task_type":"training","resources":{{"gpu":{gpu},"cpu":{{"cores":1}},"memory":{{"size_gb":1}}}}}}"#
    )
}

fn sum(rows: &Value, dim: &str) -> f64 {
    rows.as_array()
        .map(|r| {
            r.iter()
                .map(|x| x[dim]["allocated"].as_f64().unwrap_or(0.0))
                .sum()
        })
        .unwrap_or(0.0)
}

#[test]
fn gpus_allocated_reconcile_by_tenant_node_model_and_total() {
    let dir = tempfile::tempdir().unwrap();
    // Usage samples every 300 ms, so `GET /v1/tenants/{name}/usage` has one.
    let env = [("CALDERA_USAGE_SAMPLE_MS", "300")];
    let cp = ControlPlane::start(Path::new(BIN), &dir.path().join("cp"), &env);
    let _a = Agent::start(Path::new(BIN), &cp, "acct-a", "2xA100-80GB", dir.path());
    let _b = Agent::start(Path::new(BIN), &cp, "acct-b", "1xT4-16GB", dir.path());
    let op = cp.operator();
    assert!(wait_until(Duration::from_secs(20), || {
        op.get("/v1/nodes").data()["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().filter(|n| n["connected"] == true).count() == 2)
    }));
    let (ta, tb) = (cp.api(&cp.tenant("team-a")), cp.api(&cp.tenant("team-b")));
    // team-a: one whole A100 (1.0) and a 10 GB slice of the other
    // (10,240 / 81,920 = 0.125); team-b: 8 GB of the T4 (8,192 / 16,384 = 0.5).
    for (api, body) in [
        (&ta, reservation("whole", r#"{"count":1,"model":"A100"}"#)),
        (
            &ta,
            reservation("slice", r#"{"count":1,"memory_gb":10,"model":"A100"}"#),
        ),
        (
            &tb,
            reservation("half", r#"{"count":1,"memory_gb":8,"model":"T4"}"#),
        ),
    ] {
        let r = api.post("/v1/tasks", &body);
        assert_eq!(r.status, 201, "{}", r.body);
    }
    for (api, id) in [(&ta, "whole"), (&ta, "slice"), (&tb, "half")] {
        api.wait_task(id, 20, "running", |v| v["state"] == "running");
    }
    let u = op.get("/v1/utilization");
    let d = u.data();
    let total = d["total"]["gpus"]["allocated"].as_f64().unwrap_or(-1.0);
    // 1.0 + 0.125 + 0.5 = 1.625, every way it is summed.
    assert!((total - 1.625).abs() < 1e-9, "total {total}: {:#}", u.body);
    for view in ["by_tenant", "by_node", "by_gpu_model"] {
        let s = sum(&d[view], "gpus");
        assert!(
            (s - total).abs() < 1e-9,
            "{view} sums to {s}, total is {total}: {:#}",
            d[view]
        );
    }
    let tenant = |name: &str| {
        d["by_tenant"]
            .as_array()
            .and_then(|r| r.iter().find(|x| x["key"] == name))
            .map(|x| x["gpus"]["allocated"].as_f64().unwrap_or(-1.0))
    };
    assert_eq!(
        tenant("team-a"),
        Some(1.125),
        "a 10 GB slice is 0.125 of a GPU, not 1"
    );
    assert_eq!(tenant("team-b"), Some(0.5));
    // The tenant's usage view counts by the same rule (it counted the
    // 10 GB slice as a whole GPU: 2 for team-a, 1 for team-b).
    for (api, name) in [(&ta, "team-a"), (&tb, "team-b")] {
        let path = format!("/v1/tenants/{name}/usage");
        let mut current = Value::Null;
        // A sample taken before the last grant is older news: wait for one
        // taken since (they come every 300 ms).
        let agree = wait_until(Duration::from_secs(10), || {
            current = api.get(&path).data()["current"]["allocated"].clone();
            current["gpus"].as_f64() == tenant(name)
        });
        assert!(
            agree,
            "{name}: usage {current:#} disagrees with utilisation {:?}",
            tenant(name)
        );
    }
    // Reservations run no process: on simulated hosts nothing is measured as
    // used, whatever load the host itself is under.
    let cpu_used = d["total"]["cpu_cores"]["used"].as_f64().unwrap_or(-1.0);
    assert_eq!(cpu_used, 0.0, "{:#}", d["total"]);
}
