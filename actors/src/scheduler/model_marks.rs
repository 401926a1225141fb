//! In-place swaps in the billing records: a replica swapped on the slice it
//! holds keeps its allocation, so its billing record says from when it
//! served which version (`model_marks`), and cost by model bills each
//! version the time it served. The Scheduler writes it, as it writes every
//! open billing record, so no two writers race on one record.
use super::Scheduler;
use crate::commit_site::CommitSite;
use crate::protocol::scheduler::ServedModel;
use actix::prelude::*;
use caldera_spec::{BillingRecord, ModelMark};

/// `r` with the mark of serving `model` from `at_ms`, or `None` when it
/// serves that version already then (a repeated report).
pub(super) fn marked(mut r: BillingRecord, model: String, at_ms: u64) -> Option<BillingRecord> {
    if r.model_at(at_ms) == Some(model.as_str()) {
        return None;
    }
    let at_ms = at_ms.max(r.start_ms);
    r.model_marks.retain(|m| m.at_ms <= at_ms);
    r.model_marks.push(ModelMark { at_ms, model });
    Some(r)
}

impl Handler<ServedModel> for Scheduler {
    type Result = ();
    fn handle(&mut self, m: ServedModel, _: &mut Context<Self>) {
        if self.core.ledger().get(&m.allocation_id).is_none() {
            return; // freed meanwhile: its record is closed
        }
        let store = self.gate.store();
        let r = match store.open_billing(&m.allocation_id) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(allocation = %m.allocation_id, error = %e, "billing record unreadable; swap not marked");
                return;
            }
        };
        let Some(r) = marked(r, m.model, m.at_ms) else {
            return;
        };
        let mut b = store.batch();
        b.put_open_billing(&r);
        if let Err(e) = self.gate.commit(CommitSite::ModelMarks, b) {
            // Nothing in memory changed; the version is billed as before.
            tracing::warn!(allocation = %m.allocation_id, error = %e, "could not record the swap in billing");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_is_marked_once_and_never_before_the_grant() {
        let r = BillingRecord {
            start_ms: 100,
            model: Some("llama:v1".into()),
            ..Default::default()
        };
        // Serving v1 already: nothing to mark.
        assert_eq!(marked(r.clone(), "llama:v1".into(), 500), None);
        let r = marked(r, "llama:v2".into(), 500).unwrap();
        assert_eq!(r.model_at(499), Some("llama:v1"));
        assert_eq!(r.model_at(500), Some("llama:v2"));
        // The same report again changes nothing.
        assert_eq!(marked(r.clone(), "llama:v2".into(), 600), None);
        // A mark dated before the grant starts at the grant.
        let early = BillingRecord {
            start_ms: 100,
            ..Default::default()
        };
        let early = marked(early, "m:1".into(), 50).unwrap();
        assert_eq!(early.model_marks[0].at_ms, 100);
    }
}
