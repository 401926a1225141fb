//! The tiers and the one downsampling rule: a coarser point is the mean
//! (weighted by how many samples each finer point stands for) and the max of
//! the finer points in its bucket.
use caldera_storage::HistoryPoint;

/// One resolution of the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tier {
    /// The `tier` byte of its keys.
    pub id: u8,
    /// Bucket width, ms (0: raw samples, one per inspector pass).
    pub resolution_ms: u64,
    /// How long its points are kept, ms.
    pub keep_ms: u64,
}

const DAY: u64 = 86_400_000;

/// Finest first.
pub const TIERS: [Tier; 3] = [
    Tier {
        id: 0,
        resolution_ms: 0,
        keep_ms: DAY,
    },
    Tier {
        id: 1,
        resolution_ms: 300_000,
        keep_ms: 30 * DAY,
    },
    Tier {
        id: 2,
        resolution_ms: 3_600_000,
        keep_ms: 365 * DAY,
    },
];

/// Slack of [`tier_for`]: "the last day", computed a moment before the
/// tier is chosen, still reads the finest tier.
const SLACK_MS: u64 = 60_000;

/// The finest tier that still holds points from `from_ms` at `now_ms`
/// (the coarsest when none does: it is the longest record there is).
pub fn tier_for(from_ms: u64, now_ms: u64) -> Tier {
    TIERS
        .iter()
        .copied()
        .find(|t| from_ms.saturating_add(SLACK_MS) >= now_ms.saturating_sub(t.keep_ms))
        .unwrap_or(TIERS[TIERS.len() - 1])
}

/// The point at `at_ms` that stands for `finer` (None when it is empty):
/// per value, the mean weighted by each point's `count`, and the max of the maxes.
pub fn rollup(at_ms: u64, finer: &[HistoryPoint]) -> Option<HistoryPoint> {
    let n = finer.iter().map(|p| p.mean.len()).max()?;
    let count: u64 = finer.iter().map(|p| u64::from(p.count.max(1))).sum();
    let mut sum = vec![0f64; n];
    let mut max = vec![f32::MIN; n];
    for p in finer {
        let w = f64::from(p.count.max(1));
        for i in 0..n {
            let mean = p.mean.get(i).copied().unwrap_or(0.0);
            sum[i] += f64::from(mean) * w;
            max[i] = max[i].max(p.max.get(i).copied().unwrap_or(mean));
        }
    }
    Some(HistoryPoint {
        at_ms,
        count: u32::try_from(count).unwrap_or(u32::MAX),
        mean: sum.iter().map(|s| (s / count as f64) as f32).collect(),
        max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(at_ms: u64, v: f32) -> HistoryPoint {
        HistoryPoint {
            at_ms,
            count: 1,
            mean: vec![v],
            max: vec![v],
        }
    }

    /// 30 samples of 10 s in 5 min: 0, 1, …, 29 → mean 14.5, max 29. Twelve
    /// such 5-min points (means 14.5 + k, k = 0..11) → hour mean 20, max 40.
    #[test]
    fn ten_seconds_roll_into_five_minutes_then_into_an_hour() {
        let mut five = Vec::new();
        for k in 0..12u64 {
            let samples: Vec<HistoryPoint> = (0..30u64)
                .map(|i| raw(k * 300_000 + i * 10_000, (i + k) as f32))
                .collect();
            let p = rollup(k * 300_000, &samples).unwrap_or_default();
            assert_eq!(p.count, 30);
            assert_eq!(p.mean, vec![14.5 + k as f32]);
            assert_eq!(p.max, vec![29.0 + k as f32]);
            five.push(p);
        }
        let hour = rollup(0, &five).unwrap_or_default();
        assert_eq!(
            (hour.count, hour.mean.clone(), hour.max.clone()),
            (360, vec![20.0], vec![40.0])
        );
    }

    /// A 5-min point that stands for 1 sample (a restart) weighs 1, not 30.
    #[test]
    fn the_mean_is_weighted_by_how_many_samples_a_point_stands_for() {
        let a = HistoryPoint {
            at_ms: 0,
            count: 30,
            mean: vec![10.0],
            max: vec![12.0],
        };
        let b = HistoryPoint {
            at_ms: 300_000,
            count: 10,
            mean: vec![50.0],
            max: vec![60.0],
        };
        let p = rollup(0, &[a, b]).unwrap_or_default();
        assert_eq!((p.count, p.mean, p.max), (40, vec![20.0], vec![60.0]));
        assert_eq!(rollup(0, &[]), None);
    }

    /// Now = day 40: from an hour ago reads tier 0, from 3 days ago tier 1,
    /// from 35 days ago (and from before any tier) tier 2.
    #[test]
    fn a_range_query_takes_the_finest_tier_that_holds_its_start() {
        let now = 40 * DAY;
        assert_eq!(tier_for(now - 3_600_000, now).id, 0);
        assert_eq!(tier_for(now - DAY, now).id, 0);
        assert_eq!(tier_for(now - DAY - 1000, now).id, 0, "within the slack");
        assert_eq!(tier_for(now - DAY - 120_000, now).id, 1);
        assert_eq!(tier_for(now - 3 * DAY, now).id, 1);
        assert_eq!(tier_for(now - 35 * DAY, now).id, 2);
        assert_eq!(tier_for(0, 400 * DAY).id, 2);
    }
}
