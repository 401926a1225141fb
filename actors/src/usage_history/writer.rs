//! Writing the history: each inspector pass stages its raw samples, and,
//! when a 5-min or 1-h bucket has closed since the last roll-up, the
//! coarser points of every series, and the pruning of what is past its
//! tier's keep (and of billing records past `chargeback.billing-retention-days`),
//! all into the pass's ONE batch: one commit, one flush per sample period.
//!
//! How far each tier is rolled up is itself stored (`m/history-rolled-<tier>`),
//! in the same batch, so a restarted control plane rolls up the buckets that
//! closed while it was down, and never rolls one up twice.
use super::rollup::{rollup, TIERS};
use super::series::{PoolSample, TenantSample};
use caldera_storage::{HistoryPoint, HistorySeries, Result, Store, WriteBatch};
use std::collections::HashMap;

fn marker_key(tier: u8) -> String {
    format!("history-rolled-{tier}")
}

fn raw(at_ms: u64, values: Vec<f32>) -> HistoryPoint {
    HistoryPoint {
        at_ms,
        count: 1,
        max: values.clone(),
        mean: values,
    }
}

/// What one pass stages, beyond its raw samples.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Staged {
    /// Coarser points written.
    pub rolled: usize,
    /// Points and billing records deleted as expired.
    pub pruned: usize,
}

/// Stages one pass at `now_ms`: a raw point per tenant and for the pool,
/// then what closed buckets and retention call for. `billing_keep_ms`:
/// billing records that ended longer ago are deleted.
pub fn stage(
    store: &Store,
    b: &mut WriteBatch,
    now_ms: u64,
    tenants: &[(String, TenantSample)],
    pool: &PoolSample,
    billing_keep_ms: u64,
) -> Result<Staged> {
    for (t, s) in tenants {
        b.put_history(
            TIERS[0].id,
            &HistorySeries::Tenant(t.clone()),
            &raw(now_ms, s.to_values()),
        );
    }
    b.put_history(
        TIERS[0].id,
        &HistorySeries::Pool,
        &raw(now_ms, super::pool_values(pool)),
    );
    let mut out = Staged::default();
    // Points rolled up in this pass, not yet in the store: the hour that
    // closes with a 5-min bucket reads that bucket from here.
    let mut fresh: HashMap<(u8, HistorySeries), Vec<HistoryPoint>> = HashMap::new();
    let mut series: Option<Vec<HistorySeries>> = None;
    for w in TIERS.windows(2) {
        let (finer, tier) = (w[0], w[1]);
        let end = now_ms / tier.resolution_ms * tier.resolution_ms;
        let marker = store
            .meta_get(&marker_key(tier.id))?
            .and_then(|v| v.try_into().ok())
            .map(u64::from_be_bytes);
        b.meta_put(
            &marker_key(tier.id),
            &end.max(marker.unwrap_or(0)).to_be_bytes(),
        );
        let Some(done) = marker.filter(|m| *m < end) else {
            // First pass ever (nothing before it to roll), or nothing closed.
            continue;
        };
        let all = match &series {
            Some(s) => s.clone(),
            None => {
                let mut s: Vec<HistorySeries> = store
                    .tenants()?
                    .into_iter()
                    .map(|t| HistorySeries::Tenant(t.name))
                    .collect();
                s.push(HistorySeries::Pool);
                series = Some(s.clone());
                s
            }
        };
        // After a long outage: the buckets the finer tier can still hold
        // (bounded work, and nothing older is left to read).
        let span = finer.keep_ms + 2 * tier.resolution_ms;
        let first = done.max(end.saturating_sub(span) / tier.resolution_ms * tier.resolution_ms);
        for s in &all {
            let mut at = first;
            while at < end {
                let until = at + tier.resolution_ms;
                let mut points = store.history(finer.id, s, at, until)?;
                if let Some(f) = fresh.get(&(finer.id, s.clone())) {
                    points.extend(
                        f.iter()
                            .filter(|p| p.at_ms >= at && p.at_ms < until)
                            .cloned(),
                    );
                }
                if let Some(p) = rollup(at, &points) {
                    b.put_history(tier.id, s, &p);
                    fresh.entry((tier.id, s.clone())).or_default().push(p);
                    out.rolled += 1;
                }
                at = until;
            }
            for t in TIERS.iter().take(tier.id as usize + 1) {
                out.pruned +=
                    store.stage_history_prune(b, t.id, s, now_ms.saturating_sub(t.keep_ms))?;
            }
            if let (HistorySeries::Tenant(name), true) = (s, tier.id as usize == TIERS.len() - 1) {
                out.pruned +=
                    store.stage_billing_prune(b, name, now_ms.saturating_sub(billing_keep_ms))?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_spec::{TenantRecord, Usage};
    use caldera_storage::StoreConfig;

    const MIN: u64 = 60_000;

    fn sample(gpus: f64) -> TenantSample {
        TenantSample {
            allocated: Usage {
                gpus,
                ..Default::default()
            },
            used: Usage::default(),
        }
    }

    fn pass(store: &Store, now: u64, gpus: f64) -> Staged {
        let mut b = store.batch();
        let s = stage(
            store,
            &mut b,
            now,
            &[("t".into(), sample(gpus))],
            &PoolSample::default(),
            400 * 24 * 60 * MIN,
        );
        let staged = s.unwrap_or_default();
        assert!(store.commit(b).is_ok());
        staged
    }

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let store = Store::open(dir.path(), &StoreConfig::default())
            .unwrap_or_else(|e| panic!("open: {e}"));
        let t: TenantRecord = serde_json::from_value(
            serde_json::json!({"name": "t", "quota": {}, "created_ms": 0, "token_sha256": ""}),
        )
        .unwrap_or_else(|e| panic!("tenant: {e}"));
        let mut b = store.batch();
        b.put_tenant(&t);
        assert!(store.commit(b).is_ok());
        (dir, store)
    }

    /// Samples every 10 s for 65 min, the GPUs allocated going 1 then 3: the
    /// 5-min points are the means of their 30 samples, the first hour the
    /// mean of its twelve, and its max the max; a day later tier 0 is empty.
    #[test]
    fn passes_roll_up_closed_buckets_and_prune_expired_tiers() {
        let (_dir, store) = open();
        let series = HistorySeries::Tenant("t".into());
        for i in 0..(65 * 6) {
            let now = i * 10_000;
            // First 30 min at 1 GPU, then 3.
            pass(&store, now, if now < 30 * MIN { 1.0 } else { 3.0 });
        }
        let five = store.history(1, &series, 0, 65 * MIN).unwrap_or_default();
        assert_eq!(five.len(), 13 - 1, "buckets 0..60 min are closed at 64:50");
        assert_eq!(five[0].count, 30);
        assert_eq!(five[0].mean[0], 1.0);
        assert_eq!(five[6].mean[0], 3.0);
        let hour = store.history(2, &series, 0, 65 * MIN).unwrap_or_default();
        assert_eq!(hour.len(), 1);
        assert_eq!(
            (hour[0].count, hour[0].mean[0], hour[0].max[0]),
            (360, 2.0, 3.0)
        );
        // A day and a bit later (a restart in between changes nothing:
        // the markers are in the store): tier 0 of the first day is gone.
        let later = 24 * 60 * MIN + 70 * MIN;
        let s = pass(&store, later, 1.0);
        assert!(s.pruned >= 390, "{s:?}");
        assert_eq!(
            store
                .history(0, &series, 0, 24 * 60 * MIN)
                .unwrap_or_default()
                .len(),
            0
        );
        // The 5-min and 1-h points survive (kept 30 days, a year), and the
        // bucket 60-65 min, closed while no pass ran, was rolled up late.
        assert_eq!(
            store
                .history(1, &series, 0, 65 * MIN)
                .unwrap_or_default()
                .len(),
            13
        );
        // So is the hour 60-120 min, from that one 5-min point (30 samples of 3).
        let hours = store.history(2, &series, 0, 65 * MIN).unwrap_or_default();
        assert_eq!(hours.len(), 2);
        assert_eq!(
            (hours[1].at_ms, hours[1].count, hours[1].mean[0]),
            (60 * MIN, 30, 3.0)
        );
    }
}
