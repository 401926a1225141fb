//! How good start estimates are: for every task that waited with an
//! estimate before its first placement, the error of that first estimate
//! (placed minus estimated; the task record keeps both). For scale, Slurm's
//! own estimate was within 1 min for only about 4-17% of jobs on ARCHER2 and
//! Cirrus (arXiv 2204.13543), and Kueue gives none (kueue#13159).
pub use caldera_scheduling::queue::estimate_accuracy::{summarise, EstimateAccuracy};
use caldera_spec::TaskRecord;

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
