//! How many deliveries are kept. Pending ones are bounded by the tenant's
//! queue limit (`webhooks.max-pending-per-tenant`); finished ones
//! (delivered, failed) by a count per subscription
//! (`webhooks.deliveries-kept`) and an age (`webhooks.delivery-retention-ms`),
//! the oldest going first as new ones come. So one subscription's records
//! stay under kept + pending, whatever a tenant subscribes to.
use caldera_spec::webhook::DeliveryRecord;
use caldera_storage::{StorageError, Store, WriteBatch};

/// Records read per subscription per pruning pass, past its pending ones.
const PAGE: usize = 64;

/// A subscription's deliveries as the dispatcher counts them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub records: usize,
    pub pending: usize,
}

impl Counts {
    /// Read from sled (key-only scans), once per subscription per start.
    pub fn load(store: &Store, webhook_id: &str) -> Result<Counts, StorageError> {
        Ok(Counts {
            records: store.delivery_count(webhook_id)?,
            pending: store.queued_count(webhook_id)?,
        })
    }
}

/// The two bounds on finished deliveries.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub kept: usize,
    pub max_age_ms: u64,
}

/// Of a subscription's oldest deliveries (ascending by event id), the ids
/// to delete: finished ones only, the `excess` oldest of them, then any
/// created before `cutoff_ms`.
pub fn doomed(oldest: &[DeliveryRecord], excess: usize, cutoff_ms: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for d in oldest.iter().filter(|d| d.finished()) {
        if out.len() < excess || d.created_ms < cutoff_ms {
            out.push(d.event_id);
        } else {
            break;
        }
    }
    out
}

/// Adds to `b` the deletions that bring subscription `webhook_id` within
/// `bounds` (as far as one page reaches; the next pass goes on), and
/// counts them out of `counts`. How many it deleted.
pub fn prune(
    store: &Store,
    b: &mut WriteBatch,
    webhook_id: &str,
    counts: &mut Counts,
    bounds: Bounds,
    now_ms: u64,
) -> Result<usize, StorageError> {
    let finished = counts.records.saturating_sub(counts.pending);
    let excess = finished.saturating_sub(bounds.kept);
    let cutoff = now_ms.saturating_sub(bounds.max_age_ms);
    let page = store.deliveries(webhook_id, 0, counts.pending + excess + PAGE)?;
    let ids = doomed(&page, excess, cutoff);
    for seq in &ids {
        b.remove_delivery(webhook_id, *seq);
    }
    counts.records = counts.records.saturating_sub(ids.len());
    Ok(ids.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::webhook::DeliveryState;

    fn rec(seq: u64, created_ms: u64, state: DeliveryState) -> DeliveryRecord {
        let mut d = DeliveryRecord::new("wh-1", seq, "task.failed", created_ms);
        d.state = state;
        d
    }

    #[test]
    fn the_oldest_finished_go_first_and_pending_ones_stay() {
        use DeliveryState::*;
        let page = [
            rec(1, 100, Pending),
            rec(2, 110, Delivered),
            rec(3, 120, Failed),
            rec(4, 130, Delivered),
            rec(5, 140, Delivered),
        ];
        // Two too many, nothing too old: 2 and 3 (1 is still pending).
        assert_eq!(doomed(&page, 2, 0), vec![2, 3]);
        // None too many, older than 125: 2 and 3.
        assert_eq!(doomed(&page, 0, 125), vec![2, 3]);
        // One too many and older than 135: 2, 3, 4.
        assert_eq!(doomed(&page, 1, 135), vec![2, 3, 4]);
        assert!(doomed(&page, 0, 50).is_empty());
    }

    #[test]
    fn pruning_keeps_a_subscription_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default()).unwrap();
        let mut b = store.batch();
        for seq in 1..=30 {
            let state = if seq % 10 == 0 {
                DeliveryState::Pending
            } else {
                DeliveryState::Delivered
            };
            b.put_delivery(&rec(seq, seq * 10, state), None);
        }
        store.commit(b).unwrap();
        let mut counts = Counts::load(&store, "wh-1").unwrap();
        assert_eq!(
            counts,
            Counts {
                records: 30,
                pending: 3
            }
        );
        let bounds = Bounds {
            kept: 5,
            max_age_ms: u64::MAX,
        };
        let mut b = store.batch();
        let gone = prune(&store, &mut b, "wh-1", &mut counts, bounds, 1_000).unwrap();
        store.commit(b).unwrap();
        assert_eq!((gone, counts.records), (22, 8));
        let left: Vec<u64> = store
            .deliveries("wh-1", 0, 100)
            .unwrap()
            .iter()
            .map(|d| d.event_id)
            .collect();
        assert_eq!(
            left,
            vec![10, 20, 25, 26, 27, 28, 29, 30],
            "the pending ones and the newest 5"
        );
        assert_eq!(Counts::load(&store, "wh-1").unwrap(), counts);
    }
}
