//! Model versions as the model tests drive and read them through the API:
//! registering a version, a version's view, a node's weight cache and its
//! counters, and a workload that proves which bytes it was given by printing
//! their SHA-256.
use crate::http::{Api, Reply};
use crate::process::wait_until;
use serde_json::Value;
use std::time::Duration;

impl Api {
    /// `POST /v1/models` with `weights` (see [`crate::weights::WeightsFile::spec`]).
    pub fn register_model(&self, name: &str, version: &str, weights: &Value) -> Reply {
        let body = serde_json::json!({"name": name, "version": version, "weights": weights});
        self.post("/v1/models", &body.to_string())
    }

    /// `GET /v1/models/{name}/versions/{version}`'s data.
    pub fn model_version(&self, name: &str, version: &str) -> Value {
        self.get(&format!("/v1/models/{name}/versions/{version}"))
            .data()
            .clone()
    }

    /// The `cache` of `GET /v1/nodes/{node}` (the node's last cache report).
    pub fn node_cache(&self, node: &str) -> Value {
        self.get(&format!("/v1/nodes/{node}")).data()["cache"].clone()
    }

    /// The cache counters of `node`.
    pub fn counters(&self, node: &str) -> Counters {
        Counters::of(&self.node_cache(node))
    }

    /// The counters of `nodes` once `until` holds for them (they arrive with
    /// heartbeats, a moment after what they count), or after 15 s: the last
    /// ones read, for the caller's exact assertions.
    pub fn counters_when(
        &self,
        nodes: &[&str],
        until: impl Fn(&[Counters]) -> bool,
    ) -> Vec<Counters> {
        let mut last = Vec::new();
        wait_until(Duration::from_secs(15), || {
            last = nodes.iter().map(|n| self.counters(n)).collect();
            until(&last)
        });
        last
    }
}

/// A node's cache counters (see `CacheCounters` in spec/src/weights.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub hits: u64,
    pub misses: u64,
    pub bytes_from_origin: u64,
    pub bytes_from_peers: u64,
    pub bytes_served: u64,
    pub evictions: u64,
    pub corrupt_found: u64,
    pub load_seconds: f64,
}

impl Counters {
    /// From a cache report's JSON (zeros for what it lacks).
    pub fn of(cache: &Value) -> Counters {
        let c = &cache["counters"];
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        Counters {
            hits: n("hits"),
            misses: n("misses"),
            bytes_from_origin: n("bytes_from_origin"),
            bytes_from_peers: n("bytes_from_peers"),
            bytes_served: n("bytes_served"),
            evictions: n("evictions"),
            corrupt_found: n("corrupt_found"),
            load_seconds: c["load_seconds"].as_f64().unwrap_or(0.0),
        }
    }

    /// Bytes this node fetched from any source.
    pub fn bytes_fetched(&self) -> u64 {
        self.bytes_from_origin + self.bytes_from_peers
    }
}

/// The SHA-256s of the verified copies in a cache report.
pub fn cached_versions(cache: &Value) -> Vec<String> {
    cache["entries"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["sha256"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The `copy` a version view shows for `node` ("verified", "warming",
/// "evicted", "waiting"), if it lists the node.
pub fn copy_on(version: &Value, node: &str) -> Option<String> {
    version["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["node"] == node)
        .and_then(|n| n["copy"].as_str().map(str::to_string))
}

/// A workload that prints `sha256=<hex>` of the bytes at `CALDERA_MODEL_PATH`
/// and `model=<name>:<version>`, then keeps running as a replica does.
pub fn checksum_command() -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        "echo \"sha256=$(sha256sum \"$CALDERA_MODEL_PATH\" | cut -d' ' -f1)\"; \
         echo \"model=$CALDERA_MODEL_NAME:$CALDERA_MODEL_VERSION\"; exec sleep 3600"
            .into(),
    ]
}

/// A replica that takes most of a node: a GPU slice (an inference replica
/// may hold at most half a GPU) and 9 of the harness agents' 16 cores, so a
/// service's replicas land one per agent, with room beside each for
/// [`one_core`] tasks.
pub fn node_sized() -> Value {
    serde_json::json!({"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 9}})
}

/// One core and no GPU: fits beside anything on the harness's 16-core agents.
pub fn one_core() -> Value {
    serde_json::json!({"cpu": {"cores": 1}})
}

/// A service of `replicas` serving `model` with [`checksum_command`].
pub fn model_service(id: &str, model: &str, replicas: u32, resources: Value) -> Value {
    serde_json::json!({
        "task_id": id, "task_type": "inference", "replicas": replicas, "model": model,
        "resources": resources, "command": checksum_command(),
    })
}

/// `body` required on `node` (the `node=<name>` label of
/// [`crate::cluster::AgentSpec::with_cache`]).
pub fn on_node(mut body: Value, node: &str) -> Value {
    body["labels"] = serde_json::json!({ "node": node });
    body
}

/// Submits `body`; panics unless it is accepted (201).
pub fn submit(api: &Api, body: &Value) {
    let r = api.post("/v1/tasks", &body.to_string());
    assert_eq!(r.status, 201, "{body}: {:#}", r.body);
}

/// The value after `key=` on the first line of `task`'s log that has it.
pub fn logged(api: &Api, task: &str, key: &str) -> Option<String> {
    let log = api.get(&format!("/v1/tasks/{task}/logs"));
    let content = log.data()["content"].as_str()?.to_string();
    let prefix = format!("{key}=");
    content
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix).map(str::to_string))
}

/// Waits up to `secs` for `task`'s workload to print its model's SHA-256,
/// and returns it; panics with the task's view and log otherwise.
pub fn printed_sha256(api: &Api, task: &str, secs: u64) -> String {
    let mut found = None;
    wait_until(Duration::from_secs(secs), || {
        found = logged(api, task, "sha256").filter(|s| s.len() == 64);
        found.is_some()
    });
    found.unwrap_or_else(|| {
        panic!(
            "{task} printed no sha256; view {:#}; log {:#}",
            api.task(task),
            api.get(&format!("/v1/tasks/{task}/logs")).body
        )
    })
}

/// Every event of `task` as "kind message" (operator view of the log).
pub fn task_events(op: &Api, tenant: &str, task: &str) -> Vec<String> {
    op.get(&format!(
        "/v1/events?tenant={tenant}&task={task}&limit=1000"
    ))
    .data()["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| {
                    format!(
                        "{} {}",
                        e["kind"].as_str().unwrap_or(""),
                        e["message"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits up to `secs` for `id` to run and returns its view.
pub fn wait_running(api: &Api, id: &str, secs: u64) -> Value {
    api.wait_task(id, secs, "running", |v| v["state"] == "running")
}

/// The node a task view's allocation is on ("" without one).
pub fn node_of(view: &Value) -> String {
    view["allocation"]["node"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Releases `id` (a service: all its replicas) and waits until `replicas`
/// of it (`<id>.r0` ..) have left their nodes.
pub fn release_service(api: &Api, id: &str, replicas: u32) {
    let r = api.post(&format!("/v1/tasks/{id}/release"), "{}");
    assert_eq!(r.status, 200, "release {id}: {:#}", r.body);
    for i in 0..replicas {
        api.wait_task(&format!("{id}.r{i}"), 30, "released", |v| {
            matches!(
                v["state"].as_str(),
                Some("released" | "finished" | "cancelled" | "failed")
            )
        });
    }
}

/// Whether `states` (a history, oldest first) holds `stages` in this order,
/// other states allowed between them.
pub fn passes_through(states: &[&str], stages: &[&str]) -> bool {
    let mut it = states.iter();
    stages.iter().all(|s| it.any(|x| x == s))
}
