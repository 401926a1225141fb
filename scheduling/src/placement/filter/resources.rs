//! CPU, memory and disk room (kube-scheduler's NodeResourcesFit).
use crate::placement::rejections::{CPU, DISK, MEMORY};
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeResourcesFit";

/// See the module comment.
pub fn check(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    if state.cpu_free < demand.cpu_milli {
        Err(CPU)
    } else if state.memory_free < demand.memory_mib {
        Err(MEMORY)
    } else if state.disk_free < demand.disk_mib {
        Err(DISK)
    } else {
        Ok(())
    }
}
