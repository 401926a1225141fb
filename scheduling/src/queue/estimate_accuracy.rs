//! The accuracy of start estimates, from the errors of first estimates
//! (placed minus estimated, ms): what the control plane reports
//! (`GET /v1/stats/estimates`) and what `caldera sim --dynamic` reports for
//! a replay, computed by the one function. For scale, Slurm's own estimate
//! was within 1 min for only about 4-17% of jobs on ARCHER2 and Cirrus
//! (arXiv 2204.13543), and Kueue gives none (kueue#13159).
pub use caldera_spec::views::EstimateAccuracy;

/// The accuracy of `errors` (ms), with `waiting` tasks not yet placed.
pub fn summarise(mut errors: Vec<i64>, waiting: u64) -> EstimateAccuracy {
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
