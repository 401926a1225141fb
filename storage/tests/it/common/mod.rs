//! Records for the storage tests.
#![allow(dead_code)]
use caldera_spec::{
    Allocation, Event, EventKind, GpuGrant, NodeInventory, NodeRecord, NodeState, Quota,
    TaskRecord, TaskSpec, TaskState, TenantRecord,
};
use caldera_storage::{Store, StoreConfig};
use std::path::Path;

/// Opens the store, waiting (up to 5 s) for a just-dropped handle to let go:
/// sled's background flusher of the previous handle can still hold the
/// directory's lock for a moment after the drop, longest on a loaded machine.
pub fn open(dir: &Path) -> Store {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match Store::open(dir, &StoreConfig::default()) {
            Ok(store) => return store,
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("store not open yet ({e}); retrying");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open store: {e}"),
        }
    }
}

pub fn task(id: &str, tenant: &str, seq: u64) -> TaskRecord {
    let spec: TaskSpec = serde_json::from_value(serde_json::json!({
        "task_id": id,
        "task_type": "training",
        "resources": {"gpu": {"count": 1, "memory_gb": 20, "model": "A100"}, "cpu": {"cores": 4}},
        "duration": "01:00:00",
        "command": ["python", "train.py"],
    }))
    .expect("task spec");
    TaskRecord::new(spec, tenant.to_string(), 1_000 + seq, seq)
}

pub fn allocation(id: &str, task: &str, tenant: &str, node: &str) -> Allocation {
    Allocation {
        allocation_id: id.to_string(),
        task_id: task.to_string(),
        tenant: tenant.to_string(),
        node: node.to_string(),
        gpus: vec![GpuGrant {
            index: 3,
            uuid: "GPU-3".to_string(),
            model: "A100-80GB".to_string(),
            memory_mb: 20_480,
            simulated: true,
        }],
        cpu_milli: 4_000,
        memory_mb: 8_192,
        disk_mb: 0,
        exclusive: false,
        epoch: 7,
        created_ms: 5_000,
        borrowed: false,
        priority: 500,
        image_digest: None,
    }
}

/// A task that holds `alloc` (state Scheduled).
pub fn scheduled(task_id: &str, tenant: &str, seq: u64, alloc: &Allocation) -> TaskRecord {
    let mut t = task(task_id, tenant, seq);
    t.transition(TaskState::Scheduled, 2_000 + seq, None);
    t.allocation = Some(alloc.clone());
    t
}

pub fn tenant(name: &str) -> TenantRecord {
    TenantRecord {
        name: name.to_string(),
        token_sha256: format!("sha-of-{name}"),
        quota: Quota {
            gpus: Some(8.0),
            ..Quota::default()
        },
        borrowing_limit: Quota::default(),
        created_ms: 1,
    }
}

pub fn node(name: &str) -> NodeRecord {
    NodeRecord {
        name: name.to_string(),
        inventory: NodeInventory {
            runtimes: Vec::new(),
            hostname: name.to_string(),
            gpus: Vec::new(),
            cpu_cores: 96,
            memory_total_mb: 1 << 20,
            disks: Vec::new(),
            disk_offered_mb: 1 << 22,
            labels: [("zone".to_string(), "a".to_string())].into(),
            simulated_host: true,
            isolation: "none (test)".to_string(),
            gpu_source: "simulated".to_string(),
        },
        epoch: 3,
        state: NodeState::Ready,
        joined_ms: 10,
        last_seen_ms: 20,
        secret_sha256: None,
        revoked: false,
        cordon: None,
    }
}

pub fn event(
    kind: EventKind,
    task: Option<&str>,
    tenant: Option<&str>,
    node: Option<&str>,
) -> Event {
    let mut e = Event::new(42, kind, format!("{kind:?}"));
    e.task = task.map(str::to_string);
    e.tenant = tenant.map(str::to_string);
    e.node = node.map(str::to_string);
    e
}
