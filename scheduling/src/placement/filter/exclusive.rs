//! Exclusivity: nothing lands on a node a task holds exclusively, and an exclusive
//! request needs a node with no allocation at all.
use crate::placement::rejections::EXCLUSIVE;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeExclusive";

/// See the module comment.
pub fn check(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    if state.exclusive_held || (demand.exclusive && state.in_use) {
        Err(EXCLUSIVE)
    } else {
        Ok(())
    }
}
