//! Hot-swap rigs, for the tests and the `bench swap`
//! measure: two registered versions of a model whose weights are real files,
//! a service of the test `infer-server` serving one of them with a readiness
//! probe, and a client that does what a load balancer does — it lists the
//! service's ready endpoints and calls each one, every 50 ms — counting
//! every failed call and the fewest ready endpoints it ever saw.
use crate::http::Api;
use crate::process::wait_until;
use crate::weights::{generate, WeightsFile};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Registers `m:v3` and `m:v4` (`size` bytes each, different bytes) with
/// the operator's token; answers their files.
pub fn register_versions(op: &Api, dir: &Path, size: u64) -> (WeightsFile, WeightsFile) {
    let v3 = generate(&dir.join("nfs/m-v3.bin"), size, 3).expect("v3 weights file");
    let v4 = generate(&dir.join("nfs/m-v4.bin"), size, 4).expect("v4 weights file");
    for (v, w) in [("v3", &v3), ("v4", &v4)] {
        let r = op.post(
            "/v1/models",
            &json!({"name": "m", "version": v, "weights": w.spec(&w.file_uri())}).to_string(),
        );
        assert_eq!(r.status, 201, "register m:{v}: {:#}", r.body);
    }
    (v3, v4)
}

/// A service `id` of `replicas` infer-servers (`server`: its path) serving
/// `model`, each on one GPU slice, ready when `/ready` answers; `env` is
/// given to each process (`INFER_LOAD_MS`, ...).
pub fn infer_service(
    id: &str,
    model: &str,
    replicas: u32,
    server: &str,
    env: &[(&str, &str)],
) -> Value {
    let env: BTreeMap<&str, &str> = env.iter().copied().collect();
    json!({
        "task_id": id, "task_type": "inference", "replicas": replicas, "model": model,
        "resources": {"gpu": {"count": 1, "memory_gb": 20}, "cpu": {"cores": 1}},
        "command": [server], "env": env,
        "readiness": {"http_path": "/ready", "period_s": 1, "ready_timeout_s": 20},
    })
}

/// The service's ready endpoints now (the `endpoints` array; empty on error).
pub fn endpoints(api: &Api, id: &str) -> Vec<Value> {
    let r = api.get(&format!("/v1/tasks/{id}/endpoints"));
    r.data()["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits up to `secs` until `n` endpoints are ready and answers them.
pub fn wait_endpoints(api: &Api, id: &str, n: usize, secs: u64) -> Vec<Value> {
    let mut list = Vec::new();
    let ok = wait_until(Duration::from_secs(secs), || {
        list = endpoints(api, id);
        list.len() >= n
    });
    assert!(
        ok,
        "{id}: {n} ready endpoints expected, {} listed; service {:#}; first replica {:#}",
        list.len(),
        api.task(id),
        api.task(&format!("{id}.r0"))
    );
    list
}

/// The model version an endpoint's process answers (`/infer`), if it answers.
pub fn version_of(endpoint: &Value) -> Option<String> {
    let addr = format!(
        "{}:{}",
        endpoint["address"].as_str()?,
        endpoint["port"].as_u64()?
    );
    let r = Api::new(&addr, None).get("/infer");
    (r.status == 200).then(|| r.body["version"].as_str().map(str::to_string))?
}

/// `(replica, allocation_id, gpu_indices)` of each endpoint, sorted.
pub fn placements(list: &[Value]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = list
        .iter()
        .map(|e| {
            (
                e["replica"].as_str().unwrap_or("").to_string(),
                e["allocation_id"].as_str().unwrap_or("").to_string(),
                e["gpu_indices"].to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// What the polling client saw.
#[derive(Debug, Clone, Default)]
pub struct Polled {
    /// Lists fetched.
    pub polls: u64,
    /// Calls made to listed endpoints.
    pub calls: u64,
    /// Calls that got no 200 (refused, reset, an error status).
    pub failed: u64,
    /// The fewest ready endpoints any list held.
    pub min_ready: usize,
    /// Each version answered, with how many calls answered it.
    pub versions: BTreeMap<String, u64>,
}

/// A client polling `id`'s endpoints and calling each ready one every 50 ms.
pub struct Poller {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Polled>,
}

impl Poller {
    pub fn start(api: Api, id: &str) -> Poller {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let id = id.to_string();
        let handle = std::thread::spawn(move || {
            let mut p = Polled {
                min_ready: usize::MAX,
                ..Default::default()
            };
            while !flag.load(Ordering::Relaxed) {
                let list = endpoints(&api, &id);
                p.polls += 1;
                p.min_ready = p.min_ready.min(list.len());
                for e in &list {
                    p.calls += 1;
                    match version_of(e) {
                        Some(v) => *p.versions.entry(v).or_default() += 1,
                        None => p.failed += 1,
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            p
        });
        Poller { stop, handle }
    }

    /// Stops the client and answers what it saw.
    pub fn finish(self) -> Polled {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// Waits up to `secs` until `id`'s swap has ended (`done` or
/// `rolled_back`) and answers the service's view.
pub fn wait_swap_over(api: &Api, id: &str, secs: u64) -> Value {
    api.wait_task(id, secs, "swap over", |v| {
        matches!(v["swap"]["phase"].as_str(), Some("done" | "rolled_back"))
    })
}
