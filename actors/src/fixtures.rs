//! Records the unit tests of the pure modules share.
use caldera_spec::Allocation;

/// Allocation `id` of `task` on `node`: one CPU core, 1 GiB, no GPU, epoch 1.
pub fn allocation(id: &str, task: &str, node: &str) -> Allocation {
    Allocation {
        allocation_id: id.into(),
        task_id: task.into(),
        tenant: "acme".into(),
        node: node.into(),
        gpus: vec![],
        cpu_milli: 1000,
        memory_mb: 1024,
        disk_mb: 0,
        exclusive: false,
        epoch: 1,
        created_ms: 0,
        borrowed: false,
        priority: 0,
        image_digest: None,
    }
}
