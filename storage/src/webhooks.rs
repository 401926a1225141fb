//! Webhook subscriptions (`w/`), their deliveries (`d/r/`) and each
//! subscription's queue of pending deliveries by due time (`d/q/`).
//!
//! The queue is per subscription so that the dispatcher can take the due
//! head of every subscription in turn: a receiver with thousands of overdue
//! retries never hides another subscription's first delivery behind them.
use crate::batch::WriteBatch;
use crate::codec::decode;
use crate::errors::Result;
use crate::keys;
use crate::store::Store;
use caldera_spec::webhook::{DeliveryRecord, WebhookRecord};

/// A pending delivery's place in its subscription's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub due_ms: u64,
    /// The event's seq (the delivery's event id).
    pub seq: u64,
}

fn delivery_prefix(webhook_id: &str) -> Vec<u8> {
    let mut k = keys::record(keys::DELIVERY, webhook_id);
    k.push(b'/');
    k
}

fn delivery_key(webhook_id: &str, seq: u64) -> Vec<u8> {
    let mut k = delivery_prefix(webhook_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn queue_prefix(webhook_id: &str) -> Vec<u8> {
    let mut k = keys::record(keys::DELIVERY_QUEUE, webhook_id);
    k.push(b'/');
    k
}

fn queue_key(webhook_id: &str, due: Due) -> Vec<u8> {
    let mut k = queue_prefix(webhook_id);
    k.extend_from_slice(&due.due_ms.to_be_bytes());
    k.extend_from_slice(&due.seq.to_be_bytes());
    k
}

/// The `Due` at the end of a queue key.
fn due_of(key: &[u8], prefix_len: usize) -> Option<Due> {
    let tail = key.get(prefix_len..)?;
    let due_ms = u64::from_be_bytes(tail.get(..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(tail.get(8..16)?.try_into().ok()?);
    Some(Due { due_ms, seq })
}

impl Store {
    /// One subscription by id.
    pub fn webhook(&self, id: &str) -> Result<Option<WebhookRecord>> {
        self.get(&keys::record(keys::WEBHOOK, id))
    }

    /// Every subscription, ordered by id.
    pub fn webhooks(&self) -> Result<Vec<WebhookRecord>> {
        self.scan(keys::WEBHOOK).collect()
    }

    /// One delivery: event `seq` to subscription `webhook_id`.
    pub fn delivery(&self, webhook_id: &str, seq: u64) -> Result<Option<DeliveryRecord>> {
        self.get(&delivery_key(webhook_id, seq))
    }

    /// A subscription's deliveries with event ids after `after_seq`,
    /// ascending, at most `limit`.
    pub fn deliveries(
        &self,
        webhook_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<DeliveryRecord>> {
        let prefix = delivery_prefix(webhook_id);
        let Some(first) = after_seq.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for kv in self.db()?.range(delivery_key(webhook_id, first)..) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = kv?;
            if !k.starts_with(&prefix) {
                break;
            }
            out.push(decode(&k, &v)?);
        }
        Ok(out)
    }

    /// The head of a subscription's queue: up to `limit` pending deliveries
    /// due at or before `now_ms`, earliest first.
    pub fn due_deliveries(&self, webhook_id: &str, now_ms: u64, limit: usize) -> Result<Vec<Due>> {
        let prefix = queue_prefix(webhook_id);
        let mut out = Vec::new();
        for k in self.db()?.scan_prefix(&prefix).keys() {
            let k = k?;
            let Some(due) = due_of(&k, prefix.len()) else {
                continue;
            };
            if due.due_ms > now_ms || out.len() >= limit {
                break;
            }
            out.push(due);
        }
        Ok(out)
    }

    /// How many deliveries subscription `webhook_id` has on record (a
    /// key-only scan: once per subscription per start of the dispatcher).
    pub fn delivery_count(&self, webhook_id: &str) -> Result<usize> {
        let mut n = 0;
        for k in self.db()?.scan_prefix(delivery_prefix(webhook_id)).keys() {
            k?;
            n += 1;
        }
        Ok(n)
    }

    /// How many deliveries of subscription `webhook_id` are queued (pending).
    pub fn queued_count(&self, webhook_id: &str) -> Result<usize> {
        let mut n = 0;
        for k in self.db()?.scan_prefix(queue_prefix(webhook_id)).keys() {
            k?;
            n += 1;
        }
        Ok(n)
    }

    /// A batch deleting everything of subscription `id`: its record, its
    /// deliveries and its queue (a scan; deleting is rare).
    pub fn forget_webhook(&self, id: &str) -> Result<WriteBatch> {
        let mut b = self.batch();
        b.remove(keys::record(keys::WEBHOOK, id));
        for prefix in [delivery_prefix(id), queue_prefix(id)] {
            for k in self.db()?.scan_prefix(&prefix).keys() {
                b.remove(k?.to_vec());
            }
        }
        Ok(b)
    }
}

impl WriteBatch {
    /// Inserts or replaces a subscription.
    pub fn put_webhook(&mut self, w: &WebhookRecord) {
        self.put_json(keys::record(keys::WEBHOOK, &w.id), w);
    }

    /// Inserts or replaces a delivery, and moves its queue entry: out of
    /// the queue at `was_due` (if it was queued), in at its
    /// `next_attempt_ms` (if it is still pending).
    pub fn put_delivery(&mut self, d: &DeliveryRecord, was_due: Option<u64>) {
        self.put_json(delivery_key(&d.webhook_id, d.event_id), d);
        if let Some(due_ms) = was_due {
            let due = Due {
                due_ms,
                seq: d.event_id,
            };
            self.remove(queue_key(&d.webhook_id, due));
        }
        let pending = d.state == caldera_spec::webhook::DeliveryState::Pending;
        if let (true, Some(due_ms)) = (pending, d.next_attempt_ms) {
            let due = Due {
                due_ms,
                seq: d.event_id,
            };
            self.put_marker(queue_key(&d.webhook_id, due));
        }
    }

    /// Deletes a finished delivery's record (it has no queue entry).
    pub fn remove_delivery(&mut self, webhook_id: &str, seq: u64) {
        self.remove(delivery_key(webhook_id, seq));
    }

    /// Takes a queue entry out without a record (its delivery is gone).
    pub fn unqueue_delivery(&mut self, webhook_id: &str, due: Due) {
        self.remove(queue_key(webhook_id, due));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::webhook::{Attempt, DeliveryState};

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path(), &Default::default()).unwrap();
        (dir, s)
    }

    #[test]
    fn the_queue_orders_by_due_time_and_moves_with_each_attempt() {
        let (_d, s) = store();
        let mut b = s.batch();
        for (seq, due) in [(3, 300), (1, 100), (2, 200)] {
            let mut d = DeliveryRecord::new("wh-a", seq, "task.failed", 0);
            d.next_attempt_ms = Some(due);
            b.put_delivery(&d, None);
        }
        // Another subscription's entry never shows in wh-a's queue.
        b.put_delivery(&DeliveryRecord::new("wh-ab", 9, "task.failed", 0), None);
        s.commit(b).unwrap();
        let due: Vec<u64> = s
            .due_deliveries("wh-a", 250, 10)
            .unwrap()
            .iter()
            .map(|d| d.seq)
            .collect();
        assert_eq!(due, vec![1, 2], "due at 100 and 200, not 300");
        // Event 1 fails once and is due again at 400; event 2 is delivered.
        let mut d1 = s.delivery("wh-a", 1).unwrap().unwrap();
        d1.push_attempt(Attempt {
            at_ms: 110,
            status: Some(500),
            error: None,
            duration_ms: 1,
        });
        d1.next_attempt_ms = Some(400);
        let mut d2 = s.delivery("wh-a", 2).unwrap().unwrap();
        d2.state = DeliveryState::Delivered;
        let mut b = s.batch();
        b.put_delivery(&d1, Some(100));
        b.put_delivery(&d2, Some(200));
        s.commit(b).unwrap();
        let due: Vec<(u64, u64)> = s
            .due_deliveries("wh-a", u64::MAX, 10)
            .unwrap()
            .iter()
            .map(|d| (d.due_ms, d.seq))
            .collect();
        assert_eq!(due, vec![(300, 3), (400, 1)]);
        assert_eq!(
            (
                s.delivery_count("wh-a").unwrap(),
                s.queued_count("wh-a").unwrap()
            ),
            (3, 2),
            "three on record, two of them pending"
        );
        let mut b = s.batch();
        b.remove_delivery("wh-a", 2);
        s.commit(b).unwrap();
        assert_eq!(s.delivery_count("wh-a").unwrap(), 2);
        assert_eq!(
            s.delivery_count("wh-ab").unwrap(),
            1,
            "a prefix of another id is not counted"
        );
        let mut b = s.batch();
        b.put_delivery(&d2, None);
        s.commit(b).unwrap();
        let listed: Vec<u64> = s
            .deliveries("wh-a", 1, 10)
            .unwrap()
            .iter()
            .map(|d| d.event_id)
            .collect();
        assert_eq!(listed, vec![2, 3], "after event 1, wh-a's only");
        let b = s.forget_webhook("wh-a").unwrap();
        s.commit(b).unwrap();
        assert!(s.deliveries("wh-a", 0, 10).unwrap().is_empty());
        assert!(s.due_deliveries("wh-a", u64::MAX, 10).unwrap().is_empty());
        assert_eq!(s.deliveries("wh-ab", 0, 10).unwrap().len(), 1);
    }
}
