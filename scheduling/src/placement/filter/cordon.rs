//! Rejects cordoned nodes: an operator's `caldera node cordon|drain`, or an
//! agent that said it is stopping. They keep what runs there (unless drained)
//! but take nothing new, and a pending reason says so.
use crate::placement::rejections::CORDONED;
use crate::placement::state::NodeState;
use crate::placement::types::Demand;

/// Plugin name.
pub const NAME: &str = "NodeCordon";

/// Nodes that are not cordoned only.
pub fn check(state: &NodeState, _demand: &Demand) -> Result<(), &'static str> {
    if state.cordoned {
        Err(CORDONED)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::types::NodeView;
    use std::collections::BTreeMap;

    #[test]
    fn a_cordoned_node_is_rejected_under_its_own_reason_and_an_open_one_passes() {
        let mut view = NodeView {
            healthy: true,
            ..NodeView::default()
        };
        let open = NodeState::of(&view, &BTreeMap::new());
        assert_eq!(check(&open, &Demand::default()), Ok(()));
        view.cordoned = true;
        let cordoned = NodeState::of(&view, &BTreeMap::new());
        assert_eq!(check(&cordoned, &Demand::default()), Err(CORDONED));
    }
}
