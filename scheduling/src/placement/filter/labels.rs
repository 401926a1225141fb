//! Node labels: the node must carry every label the request names, same value.
use crate::placement::rejections::LABELS;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeLabels";

/// See the module comment.
pub fn check(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    if demand
        .labels
        .iter()
        .all(|(k, v)| state.labels.get(k) == Some(v))
    {
        Ok(())
    } else {
        Err(LABELS)
    }
}
