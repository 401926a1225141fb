//! Records the Scheduler integration tests build their stores from.
#![allow(dead_code)] // each test file uses some of these
use caldera_spec::{Allocation, NodeInventory};

/// Allocation `id` of `task` (tenant `t`) on node `n` under `epoch`: one CPU
/// core, no GPU.
pub fn allocation(id: &str, task: &str, epoch: u64) -> Allocation {
    Allocation {
        allocation_id: id.into(),
        task_id: task.into(),
        tenant: "t".into(),
        node: "n".into(),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mb: 0,
        disk_mb: 0,
        exclusive: false,
        epoch,
        created_ms: 2,
        borrowed: false,
        priority: 500,
        image_digest: None,
    }
}

/// Node `n`: 8 cores, 1 GiB, no GPU, simulated.
pub fn inventory() -> NodeInventory {
    NodeInventory {
        runtimes: Vec::new(),
        hostname: "n".into(),
        gpus: vec![],
        cpu_cores: 8,
        memory_total_mb: 1024,
        disks: vec![],
        disk_offered_mb: 1024,
        labels: Default::default(),
        simulated_host: true,
        isolation: "none".into(),
        gpu_source: "simulated".into(),
    }
}
