//! A demand that runs in a container goes only to nodes whose container
//! runtime is up (their inventory says so); a process demand goes anywhere.
//! It runs right after health and cordon: a node that cannot run the
//! workload at all is that, whatever room it has.
use crate::placement::rejections::NO_CONTAINER_RUNTIME;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeRuntime";

/// See the module comment.
pub fn check(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    if demand.needs_container && !state.container_runtime {
        Err(NO_CONTAINER_RUNTIME)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::rejections::Rejections;
    use crate::placement::types::{GpuUnit, NodeView};
    use std::collections::BTreeMap;

    fn state(container_runtime: bool) -> NodeState {
        let view = NodeView {
            healthy: true,
            container_runtime,
            ..NodeView::default()
        };
        NodeState::of(&view, &BTreeMap::new())
    }

    #[test]
    fn a_container_demand_needs_a_runtime_and_a_process_demand_does_not() {
        let container = Demand {
            needs_container: true,
            ..Demand::default()
        };
        let process = Demand::default();
        // (node has a runtime up, demand, expected)
        let table = [
            (true, &container, Ok(())),
            (false, &container, Err(NO_CONTAINER_RUNTIME)),
            (true, &process, Ok(())),
            (false, &process, Ok(())),
        ];
        for (up, demand, want) in table {
            assert_eq!(
                check(&state(up), demand),
                want,
                "runtime up: {up}, {demand:?}"
            );
        }
    }

    #[test]
    fn the_reason_reads_as_what_the_nodes_lack() {
        let d = Demand {
            needs_container: true,
            ..Demand::default()
        };
        // Every node turned down for it: the one thing to fix is said first.
        let mut all = Rejections::new(GpuUnit::MiB);
        all.nodes = 3;
        all.add(NO_CONTAINER_RUNTIME, 3);
        assert_eq!(
            all.summary(&d),
            "no node with a container runtime up: 3 nodes run processes only"
        );
        let mut one = Rejections::new(GpuUnit::MiB);
        one.nodes = 1;
        one.add(NO_CONTAINER_RUNTIME, 1);
        assert_eq!(
            one.summary(&d),
            "no node with a container runtime up: 1 node runs processes only"
        );
        // Some nodes have one, and are full: both counts are told.
        let mut some = Rejections::new(GpuUnit::MiB);
        some.nodes = 3;
        some.add(NO_CONTAINER_RUNTIME, 2);
        some.add(crate::placement::rejections::CPU, 1);
        assert_eq!(
            some.summary(&d),
            "3 nodes: 2 run processes only (no container runtime up), 1 less than 0 cores free"
        );
    }
}
