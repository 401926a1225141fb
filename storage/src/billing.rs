//! Billing records (`b/`): the allocation history chargeback is computed
//! from. A held allocation's record is open (`b/o/<allocation_id>`); the
//! batch that frees it moves it to the closed records of its tenant, keyed
//! by when it ended (`b/c/<tenant><end_ms>…`), so a report for a period
//! reads only what ended after the period began, plus the few open ones,
//! and retention deletes a prefix.
use crate::batch::WriteBatch;
use crate::codec::decode;
use crate::errors::Result;
use crate::keys;
use crate::store::Store;
use caldera_spec::BillingRecord;

/// `b/o/<allocation_id>`.
fn open_key(allocation_id: &str) -> Vec<u8> {
    keys::record(keys::BILLING_OPEN, allocation_id)
}

/// `b/c/<len u32 BE><tenant>`: the closed records of one tenant.
fn closed_prefix(tenant: &str) -> Vec<u8> {
    keys::length_prefixed(keys::BILLING_CLOSED, tenant)
}

/// `closed_prefix(tenant)` then `end_ms` (u64 BE): where records that ended
/// at or after `end_ms` begin.
fn closed_from(tenant: &str, end_ms: u64) -> Vec<u8> {
    let mut k = closed_prefix(tenant);
    k.extend_from_slice(&end_ms.to_be_bytes());
    k
}

fn closed_key(r: &BillingRecord, end_ms: u64) -> Vec<u8> {
    let mut k = closed_from(&r.tenant, end_ms);
    k.extend_from_slice(r.allocation_id.as_bytes());
    k
}

impl WriteBatch {
    /// Writes (or rewrites) the open record of a held allocation: at the
    /// grant, and when its idle time or borrowed mark changes.
    pub fn put_open_billing(&mut self, r: &BillingRecord) {
        self.put_json(open_key(&r.allocation_id), r);
    }

    /// Closes a record: its open key goes, and it is kept under its tenant
    /// by `end_ms` (a record without `end_ms` is closed at `start_ms`).
    pub fn close_billing(&mut self, r: &BillingRecord) {
        self.remove(open_key(&r.allocation_id));
        let end = r.end_ms.unwrap_or(r.start_ms);
        self.put_json(closed_key(r, end), r);
    }
}

impl Store {
    /// The open record of a held allocation.
    pub fn open_billing(&self, allocation_id: &str) -> Result<Option<BillingRecord>> {
        self.get(&open_key(allocation_id))
    }

    /// Every open record (held allocations), ordered by allocation id.
    pub fn open_billings(&self) -> impl Iterator<Item = Result<BillingRecord>> {
        self.scan(keys::BILLING_OPEN)
    }

    /// `tenant`'s records that overlap `[from_ms, to_ms)`: closed ones that
    /// ended after `from_ms` and began before `to_ms`, then the open ones
    /// that began before `to_ms`.
    pub fn billing_between(
        &self,
        tenant: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<BillingRecord>> {
        let mut out = Vec::new();
        let start = closed_from(tenant, from_ms.saturating_add(1));
        let end = keys::prefix_end(&closed_prefix(tenant));
        for kv in self.db()?.range(start..end) {
            let (k, v) = kv?;
            let r: BillingRecord = decode(&k, &v)?;
            if r.start_ms < to_ms {
                out.push(r);
            }
        }
        for r in self.open_billings() {
            let r = r?;
            if r.tenant == tenant && r.start_ms < to_ms {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// Adds to `batch` the deletion of `tenant`'s closed records that ended
    /// before `cutoff_ms` (retention); returns how many.
    pub fn stage_billing_prune(
        &self,
        batch: &mut WriteBatch,
        tenant: &str,
        cutoff_ms: u64,
    ) -> Result<usize> {
        self.stage_range_removal(batch, closed_prefix(tenant)..closed_from(tenant, cutoff_ms))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Store, StoreConfig};
    use caldera_spec::BillingRecord;

    fn rec(tenant: &str, id: &str, start: u64, end: Option<u64>) -> BillingRecord {
        BillingRecord {
            allocation_id: format!("{tenant}/{id}.1"),
            tenant: tenant.into(),
            start_ms: start,
            end_ms: end,
            ..Default::default()
        }
    }

    /// Closed records are found by their end, open ones always; another
    /// tenant's (`ab` next to `a`) never; retention removes what ended before the cutoff.
    #[test]
    fn a_period_reads_what_overlaps_it_and_retention_drops_what_ended_before() -> crate::Result<()>
    {
        let dir = tempfile::tempdir().map_err(|e| crate::StorageError::Sled(sled::Error::Io(e)))?;
        let store = Store::open(dir.path(), &StoreConfig::default())?;
        let mut b = store.batch();
        for r in [
            rec("a", "old", 0, Some(100)),
            rec("a", "mid", 50, Some(300)),
            rec("a", "late", 500, Some(600)),
            rec("ab", "x", 0, Some(1000)),
        ] {
            b.put_open_billing(&r);
            b.close_billing(&r);
        }
        b.put_open_billing(&rec("a", "live", 200, None));
        store.commit(b)?;
        let ids =
            |v: Vec<BillingRecord>| v.into_iter().map(|r| r.allocation_id).collect::<Vec<_>>();
        // [150, 550): "old" ended at 100, before; "mid", "late" overlap; "live" is open.
        assert_eq!(
            ids(store.billing_between("a", 150, 550)?),
            ["a/mid.1", "a/late.1", "a/live.1"]
        );
        // [0, 150): "live" began at 200, after.
        assert_eq!(
            ids(store.billing_between("a", 0, 150)?),
            ["a/old.1", "a/mid.1"]
        );
        let mut p = store.batch();
        assert_eq!(store.stage_billing_prune(&mut p, "a", 301)?, 2);
        store.commit(p)?;
        assert_eq!(
            ids(store.billing_between("a", 0, 10_000)?),
            ["a/late.1", "a/live.1"]
        );
        assert_eq!(ids(store.billing_between("ab", 0, 10_000)?), ["ab/x.1"]);
        assert_eq!(store.open_billings().count(), 1);
        Ok(())
    }
}
