//! GPU model and per-GPU room (the fix for the seed's fragmentation incident:
//! room is checked on each GPU, never on the node's total).
use crate::placement::fit;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "GpuFit";

/// See [`fit::check_gpus`].
pub fn check(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    fit::check_gpus(state, demand)
}
