//! The ledger checked against the tasks, through the API: every allocation
//! (the Scheduler's in memory and sled's copy, `GET /v1/allocations`) belongs
//! to a task that holds exactly it, no task that waits or has ended holds
//! one, and no GPU's memory is granted twice over. The checks every
//! integrity test ends with.
use crate::http::Api;
use crate::process::wait_until;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// States in which a task holds exactly one allocation. A released task
/// keeps its room only until its stop is confirmed (or overdue), so once the
/// run has settled it holds none.
pub fn holds(state: &str) -> bool {
    matches!(
        state,
        "scheduled" | "preparing" | "warming" | "ready" | "running"
    )
}

/// The ledger checked against the tasks `ids` (and every task the ledger
/// names), as the operator sees them: one line per mismatch.
pub fn mismatches(op: &Api, ids: &BTreeSet<String>) -> Vec<String> {
    let reply = op.get("/v1/allocations");
    if reply.status != 200 {
        return vec![format!("GET /v1/allocations answered {}", reply.status)];
    }
    let mut out = Vec::new();
    let list = |k: &str| -> BTreeMap<String, Value> {
        reply.data()[k]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["allocation_id"].as_str().unwrap_or("").to_string(),
                    a.clone(),
                )
            })
            .collect()
    };
    let (ledger, stored) = (list("ledger"), list("stored"));
    if ledger.keys().ne(stored.keys()) {
        out.push(format!(
            "ledger {:?} and sled {:?} differ",
            ledger.keys().collect::<Vec<_>>(),
            stored.keys().collect::<Vec<_>>()
        ));
    }
    let mut per_task: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, a) in &ledger {
        per_task
            .entry(a["task_id"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(id.clone());
    }
    let all: BTreeSet<String> = ids
        .iter()
        .cloned()
        .chain(per_task.keys().cloned())
        .collect();
    for t in &all {
        let v = op.task(t);
        let state = v["state"].as_str().unwrap_or("(missing)");
        let held = per_task.get(t).cloned().unwrap_or_default();
        let own = v["allocation"]["allocation_id"].as_str();
        let ok = if holds(state) {
            held.len() == 1 && own == held.first().map(String::as_str)
        } else {
            held.is_empty()
        };
        if !ok {
            out.push(format!(
                "task {t} is {state} (record: {own:?}) and the ledger holds {held:?} for it"
            ));
        }
    }
    out
}

/// Polls until the ledger agrees with the tasks (states settle after a
/// restart or a release), for at most `secs`; answers the last mismatches.
pub fn settled(op: &Api, ids: &BTreeSet<String>, secs: u64) -> Vec<String> {
    let mut last = Vec::new();
    wait_until(Duration::from_secs(secs), || {
        last = mismatches(op, ids);
        last.is_empty()
    });
    last
}

/// GPUs whose granted memory (the ledger's allocations on them) exceeds what
/// the GPU has (`GET /v1/nodes`): one line per over-committed GPU.
pub fn over_committed(op: &Api) -> Vec<String> {
    let mut total: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for n in op.get("/v1/nodes").data()["nodes"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for g in n["gpus"].as_array().into_iter().flatten() {
            let key = (
                n["name"].as_str().unwrap_or("").to_string(),
                g["index"].as_u64().unwrap_or(u64::MAX),
            );
            total.insert(key, g["memory_total_mb"].as_u64().unwrap_or(0));
        }
    }
    let mut granted: BTreeMap<(String, u64), u64> = BTreeMap::new();
    for a in op.get("/v1/allocations").data()["ledger"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let node = a["node"].as_str().unwrap_or("").to_string();
        for g in a["gpus"].as_array().into_iter().flatten() {
            let key = (node.clone(), g["index"].as_u64().unwrap_or(u64::MAX));
            *granted.entry(key).or_default() += g["memory_mb"].as_u64().unwrap_or(0);
        }
    }
    granted
        .into_iter()
        .filter_map(|(gpu, mb)| {
            let cap = total.get(&gpu).copied().unwrap_or(0);
            (mb > cap).then(|| format!("{}#{}: {mb} MiB granted of {cap} MiB", gpu.0, gpu.1))
        })
        .collect()
}
