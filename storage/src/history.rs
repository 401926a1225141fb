//! Usage history (`h/`): downsampled series of allocated vs used, per tenant
//! and for the whole pool. Each point is a fixed binary layout, not JSON,
//! because a year of history is tens of thousands of points per series:
//! `count u32 LE, n u16 LE, n × mean f32 LE, n × max f32 LE` — 6 + 8n bytes.
//! Key: `h/<tier u8><series>` then `at_ms` (u64 BE), so one series of one
//! tier is one ordered range (a query and a prune are each one range).
use crate::batch::WriteBatch;
use crate::errors::{Result, StorageError};
use crate::keys;
use crate::store::Store;

/// Which series a point belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HistorySeries {
    /// One tenant's allocated vs used.
    Tenant(String),
    /// The pool: capacity, allocated, used, idle, borrowed.
    Pool,
}

/// One point of a series at one resolution: the mean and the max of the
/// `count` samples it stands for, value by value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistoryPoint {
    /// Start of the bucket (a raw sample: when it was taken), Unix ms.
    pub at_ms: u64,
    pub count: u32,
    pub mean: Vec<f32>,
    pub max: Vec<f32>,
}

impl HistoryPoint {
    /// Bytes of an encoded point of `n` values (the key is extra).
    pub const fn encoded_len(n: usize) -> usize {
        6 + 8 * n
    }

    fn encode(&self) -> Vec<u8> {
        let n = self.mean.len().min(u16::MAX as usize);
        let mut v = Vec::with_capacity(Self::encoded_len(n));
        v.extend_from_slice(&self.count.to_le_bytes());
        v.extend_from_slice(&(n as u16).to_le_bytes());
        for x in self.mean.iter().take(n) {
            v.extend_from_slice(&x.to_le_bytes());
        }
        for i in 0..n {
            let x = self.max.get(i).copied().unwrap_or(self.mean[i]);
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    fn decode(key: &[u8], at_ms: u64, v: &[u8]) -> Result<HistoryPoint> {
        let corrupt = || StorageError::Corrupt {
            key: keys::display(key),
            source: <serde_json::Error as serde::de::Error>::custom(
                "history point of the wrong length",
            ),
        };
        let head: [u8; 6] = v
            .get(..6)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(corrupt)?;
        let count = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let n = u16::from_le_bytes([head[4], head[5]]) as usize;
        if v.len() != Self::encoded_len(n) {
            return Err(corrupt());
        }
        let f = |i: usize| {
            let at = 6 + 4 * i;
            f32::from_le_bytes([v[at], v[at + 1], v[at + 2], v[at + 3]])
        };
        Ok(HistoryPoint {
            at_ms,
            count,
            mean: (0..n).map(f).collect(),
            max: (n..2 * n).map(f).collect(),
        })
    }
}

/// `h/<tier><series>`: one series of one tier.
fn series_prefix(tier: u8, series: &HistorySeries) -> Vec<u8> {
    let mut k = keys::HISTORY.to_vec();
    k.push(tier);
    match series {
        HistorySeries::Pool => k.push(b'p'),
        HistorySeries::Tenant(t) => {
            k.push(b't');
            k.extend_from_slice(&keys::length_prefixed(b"", t));
        }
    }
    k
}

fn point_key(tier: u8, series: &HistorySeries, at_ms: u64) -> Vec<u8> {
    let mut k = series_prefix(tier, series);
    k.extend_from_slice(&at_ms.to_be_bytes());
    k
}

impl WriteBatch {
    /// Writes (or replaces) one point of `series` at resolution `tier`.
    pub fn put_history(&mut self, tier: u8, series: &HistorySeries, p: &HistoryPoint) {
        self.writes += 1;
        self.ops
            .insert(point_key(tier, series, p.at_ms), p.encode());
    }
}

impl Store {
    /// The points of `series` at `tier` with `from_ms <= at_ms < to_ms`, in time order.
    pub fn history(
        &self,
        tier: u8,
        series: &HistorySeries,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<HistoryPoint>> {
        let mut out = Vec::new();
        if from_ms >= to_ms {
            return Ok(out);
        }
        let range = point_key(tier, series, from_ms)..point_key(tier, series, to_ms);
        for kv in self.db()?.range(range) {
            let (k, v) = kv?;
            let at = keys::seq_suffix(&k).unwrap_or(0);
            out.push(HistoryPoint::decode(&k, at, &v)?);
        }
        Ok(out)
    }

    /// Adds to `batch` the deletion of the points of `series` at `tier`
    /// older than `cutoff_ms`; returns how many.
    pub fn stage_history_prune(
        &self,
        batch: &mut WriteBatch,
        tier: u8,
        series: &HistorySeries,
        cutoff_ms: u64,
    ) -> Result<usize> {
        self.stage_range_removal(
            batch,
            point_key(tier, series, 0)..point_key(tier, series, cutoff_ms),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_round_trips_and_a_short_value_is_corrupt() {
        let p = HistoryPoint {
            at_ms: 7,
            count: 30,
            mean: vec![0.5, 2.0],
            max: vec![1.0, 3.0],
        };
        let v = p.encode();
        assert_eq!(v.len(), HistoryPoint::encoded_len(2));
        assert_eq!(HistoryPoint::decode(b"k", 7, &v).ok(), Some(p));
        assert!(HistoryPoint::decode(b"k", 7, &v[..9]).is_err());
    }

    #[test]
    fn series_of_one_tenant_never_reach_into_another() {
        let a = series_prefix(0, &HistorySeries::Tenant("a".into()));
        assert!(!point_key(0, &HistorySeries::Tenant("ab".into()), 1).starts_with(&a));
        assert!(!point_key(1, &HistorySeries::Tenant("a".into()), 1).starts_with(&a));
        assert!(!point_key(0, &HistorySeries::Pool, 1).starts_with(&a));
    }
}
