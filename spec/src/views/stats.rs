//! The control plane's own figures as the API shows them: liveness
//! (`/healthz`), start-estimate accuracy (`GET /v1/stats/estimates`) and
//! the pool's use over time (`GET /v1/utilization/history`).
use crate::Usage;
use serde::{Deserialize, Serialize};

/// The process answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    #[cfg_attr(feature = "openapi", schema(example = "ok"))]
    pub status: String,
}

/// The accuracy of first start estimates over the tasks that had one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

/// The pool at one instant (or the mean over a bucket). `idle` is what
/// allocations measured idle hold; `borrowed` what is lent beyond guarantees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PoolSample {
    pub capacity: Usage,
    pub allocated: Usage,
    pub used: Usage,
    pub idle: Usage,
    pub borrowed: Usage,
}

/// One point of the pool's curve: the mean over its bucket, and the max.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PoolPoint {
    /// RFC 3339 of the bucket's start.
    pub at: String,
    pub at_ms: u64,
    pub mean: PoolSample,
    pub max: PoolSample,
    pub samples: u32,
}

/// `GET /v1/utilization/history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PoolHistoryView {
    pub from: String,
    pub to: String,
    pub from_ms: u64,
    pub to_ms: u64,
    pub resolution_ms: u64,
    pub points: Vec<PoolPoint>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_history_reads_back_as_written() {
        let s = PoolSample {
            idle: Usage {
                gpus: 1.5,
                ..Usage::default()
            },
            ..PoolSample::default()
        };
        let h = PoolHistoryView {
            from: "a".into(),
            to: "b".into(),
            from_ms: 0,
            to_ms: 10_000,
            resolution_ms: 10_000,
            points: vec![PoolPoint {
                at: "a".into(),
                at_ms: 0,
                mean: s,
                max: s,
                samples: 1,
            }],
        };
        let wire = serde_json::to_value(&h).expect("serializes");
        assert_eq!(wire["points"][0]["mean"]["idle"]["gpus"], 1.5);
        assert_eq!(
            serde_json::from_value::<PoolHistoryView>(wire).ok(),
            Some(h)
        );
    }
}
