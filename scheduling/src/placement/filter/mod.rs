//! Filter plugins (kube-scheduler "Filter" extension point): each answers "can this
//! node state host the demand at all?" and names the reason when it cannot. They
//! run in order; a node is counted under the first filter that rejects it.
mod cordon;
mod exclusive;
mod gpu;
mod health;
mod labels;
mod resources;
mod runtime;
pub mod weights;

use super::state::NodeState;
use super::types::Demand;

/// A filter plugin: a name and a check returning the rejection reason code.
pub struct FilterPlugin {
    /// Plugin name (for logs and docs).
    pub name: &'static str,
    /// `Err(reason code)` when the node cannot host the demand.
    pub check: fn(&NodeState, &Demand) -> Result<(), &'static str>,
}

/// All filters, cheapest and most decisive first.
pub const FILTERS: [FilterPlugin; 7] = [
    FilterPlugin {
        name: health::NAME,
        check: health::check,
    },
    FilterPlugin {
        name: cordon::NAME,
        check: cordon::check,
    },
    FilterPlugin {
        name: runtime::NAME,
        check: runtime::check,
    },
    FilterPlugin {
        name: exclusive::NAME,
        check: exclusive::check,
    },
    FilterPlugin {
        name: labels::NAME,
        check: labels::check,
    },
    FilterPlugin {
        name: gpu::NAME,
        check: gpu::check,
    },
    FilterPlugin {
        name: resources::NAME,
        check: resources::check,
    },
];

/// Run every filter; `Err` carries the first failing reason.
pub fn feasible(state: &NodeState, demand: &Demand) -> Result<(), &'static str> {
    for f in &FILTERS {
        (f.check)(state, demand)?;
    }
    Ok(())
}
