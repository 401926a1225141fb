//! The text of the event recorded when a node's session opens.
use caldera_spec::NodeInventory;

/// `returned`: the node had been declared lost.
pub(super) fn join_notice(node: &str, epoch: u64, returned: bool, inv: &NodeInventory) -> String {
    let sim = if inv.any_simulated() {
        " (simulated)"
    } else {
        ""
    };
    format!(
        "node {node} joined with epoch {epoch} ({}): {} GPUs{sim}, {} cores, {} MiB memory, isolation {}",
        if returned {
            "returned after loss"
        } else {
            "session"
        },
        inv.gpus.len(),
        inv.cpu_cores,
        inv.memory_total_mb,
        inv.isolation
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_notice_says_whether_the_node_returned() {
        let inv = NodeInventory {
            runtimes: Vec::new(),
            hostname: "h".into(),
            gpus: vec![],
            cpu_cores: 8,
            memory_total_mb: 4096,
            disks: vec![],
            disk_offered_mb: 0,
            labels: Default::default(),
            simulated_host: true,
            isolation: "none".into(),
            gpu_source: "none".into(),
        };
        assert_eq!(
            join_notice("n1", 4, true, &inv),
            "node n1 joined with epoch 4 (returned after loss): 0 GPUs (simulated), 8 cores, 4096 MiB memory, isolation none"
        );
        let real = NodeInventory {
            simulated_host: false,
            ..inv
        };
        assert!(join_notice("n1", 1, false, &real).contains("(session): 0 GPUs, 8 cores"));
    }
}
