//! The stages of one scheduling pass, each with one job, in the order
//! [`Core::cycle`](super::Core::cycle) runs them for every waiting task:
//!
//! 1. [`order`]: who is considered first (priority, fair share, arrival).
//! 2. [`admit`]: may the tenant hold this much more (guarantee + borrowing)?
//! 3. [`place`]: filter -> score -> select a node and GPUs, or say why none fits.
//! 4. [`backfill`]: with room found, may it start without delaying the queue's
//!    head? Without room, the first such task becomes the head.
//! 5. [`preempt`]: without room, may it stop cheaper running work instead?
//! 6. [`bind`]: commit the placement to the pool and the ledger as an allocation.
//!
//! Admission also has a per-GPU-model step that needs the chosen node, so it
//! runs after place ([`admit`]'s `model_admission`).
pub mod admit;
pub mod backfill;
pub mod bind;
pub mod order;
pub mod place;
pub mod preempt;

use super::Decision;
use crate::queue::ledger::Ledger;
use caldera_spec::Usage;
use std::collections::HashMap;
use std::sync::Arc;

/// What one pass learns as it goes, so each fact is computed once per pass.
#[derive(Default)]
pub struct Pass {
    /// The decisions so far, in the order the caller carries them out.
    pub out: Vec<Decision>,
    /// What each tenant holds, including what this pass granted it.
    held: HashMap<String, Usage>,
    /// Shapes that found no room (see [`place::ShapesWithoutRoom`]).
    pub no_room: place::ShapesWithoutRoom,
    /// Over-quota start estimates by `tenant/shape`: the same request of the
    /// same tenant waits for the same ends of its own work.
    pub quota_starts: HashMap<Arc<str>, Option<u64>>,
    /// Tasks that found no room, in queue order (their estimates are refreshed).
    pub blocked: Vec<String>,
}

impl Pass {
    /// What `tenant` holds now: the ledger's count once, then this pass's grants.
    pub fn held_by(&mut self, tenant: &str, ledger: &Ledger) -> Usage {
        if let Some(u) = self.held.get(tenant) {
            return *u;
        }
        let u = ledger.tenant_usage(tenant);
        self.held.insert(tenant.to_string(), u);
        u
    }

    /// `tenant` was granted `usage` in this pass.
    pub fn granted(&mut self, tenant: &str, usage: Usage) {
        *self.held.entry(tenant.to_string()).or_default() += usage;
    }
}
