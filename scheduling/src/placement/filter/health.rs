//! Rejects unhealthy nodes (lost heartbeats, drained).
use crate::placement::rejections::UNHEALTHY;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeHealth";

/// Healthy nodes only.
pub fn check(state: &NodeState, _demand: &Demand) -> Result<(), &'static str> {
    if state.healthy {
        Ok(())
    } else {
        Err(UNHEALTHY)
    }
}
