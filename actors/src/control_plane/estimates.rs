//! How good start estimates are: for every task that waited with an
//! estimate before its first placement, the error of that first estimate
//! (placed minus estimated; the task record keeps both). For scale, Slurm's
//! own estimate was within 1 min for only about 4-17% of jobs on ARCHER2 and
//! Cirrus (arXiv 2204.13543), and Kueue gives none (kueue#13159).
use caldera_spec::TaskRecord;
use serde::Serialize;

/// The accuracy of first start estimates over the tasks that had one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EstimateAccuracy {
    /// Tasks placed after waiting with an estimate.
    pub tasks: u64,
    /// Share of them placed within 1 minute of their first estimate (0..1).
    pub within_1m: f64,
    /// Share within 10 minutes.
    pub within_10m: f64,
    /// Median of |placed - estimated|, seconds.
    pub median_abs_error_s: f64,
    /// Median of placed - estimated, seconds (negative: placed early).
    pub median_error_s: f64,
    /// Tasks still waiting that have a first estimate (not counted above).
    pub waiting_with_estimate: u64,
}

/// The errors of a scan so far: one i64 per measured task, nothing else
/// of the records is kept.
#[derive(Debug, Default)]
pub struct Tally {
    errors: Vec<i64>,
    waiting: u64,
}

impl Tally {
    pub fn add(&mut self, r: &TaskRecord) {
        match (r.estimate_error_ms, r.first_estimate_ms) {
            (Some(e), _) => self.errors.push(e),
            (None, Some(_)) => self.waiting += 1,
            _ => {}
        }
    }

    pub fn finish(self) -> EstimateAccuracy {
        summarise(self.errors, self.waiting)
    }
}

/// The accuracy over `records`.
pub fn accuracy<'a>(records: impl IntoIterator<Item = &'a TaskRecord>) -> EstimateAccuracy {
    let mut t = Tally::default();
    records.into_iter().for_each(|r| t.add(r));
    t.finish()
}

fn summarise(mut errors: Vec<i64>, waiting: u64) -> EstimateAccuracy {
    let n = errors.len();
    if n == 0 {
        return EstimateAccuracy {
            waiting_with_estimate: waiting,
            ..Default::default()
        };
    }
    let share =
        |limit_ms: i64| errors.iter().filter(|e| e.abs() <= limit_ms).count() as f64 / n as f64;
    let (within_1m, within_10m) = (share(60_000), share(600_000));
    let mut abs: Vec<i64> = errors.iter().map(|e| e.abs()).collect();
    EstimateAccuracy {
        tasks: n as u64,
        within_1m,
        within_10m,
        median_abs_error_s: median(&mut abs) / 1000.0,
        median_error_s: median(&mut errors) / 1000.0,
        waiting_with_estimate: waiting,
    }
}

/// The median of a non-empty list (the mean of the middle two for an even one).
fn median(v: &mut [i64]) -> f64 {
    v.sort_unstable();
    let m = v.len() / 2;
    match v.len() % 2 {
        1 => v[m] as f64,
        _ => (v[m - 1] as f64 + v[m] as f64) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(first: Option<u64>, error: Option<i64>) -> TaskRecord {
        let spec = caldera_spec::parse_task_spec(
            br#"{"task_id":"t","task_type":"training","resources":{"cpu":{"cores":1}}}"#,
        )
        .unwrap();
        let mut r = TaskRecord::new(spec, "a".into(), 0, 0);
        r.first_estimate_ms = first;
        r.estimate_error_ms = error;
        r
    }

    #[test]
    fn shares_and_medians_come_from_the_first_estimates_errors() {
        let recs = [
            rec(Some(1), Some(-30_000)),
            rec(Some(1), Some(50_000)),
            rec(Some(1), Some(300_000)),
            rec(Some(1), Some(1_200_000)),
            rec(Some(1), None),
            rec(None, None),
        ];
        let a = accuracy(&recs);
        assert_eq!(a.tasks, 4);
        assert_eq!(a.waiting_with_estimate, 1);
        assert_eq!((a.within_1m, a.within_10m), (0.5, 0.75));
        assert_eq!(a.median_abs_error_s, 175.0);
        assert_eq!(a.median_error_s, 175.0);
        assert_eq!(accuracy(&[rec(None, None)]), EstimateAccuracy::default());
    }
}
