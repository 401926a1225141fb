//! Persisted, downsampled usage history (`h/`): what the idle inspector
//! samples every `scheduling.usage-sample-ms`, kept at three resolutions so a year of
//! curves costs megabytes, not gigabytes, and survives restarts.
//!
//! | tier | resolution | kept | each point is |
//! |---|---|---|---|
//! | 0 | one sample (`scheduling.usage-sample-ms`, default 10 s) | 1 day | the sample |
//! | 1 | 5 min | 30 days | mean and max of tier 0 in its 5 min |
//! | 2 | 1 h | 365 days | mean (weighted by samples) and max of tier 1 in its hour |
//!
//! A query takes the finest tier that still holds its `from`.
pub mod rollup;
pub mod series;
pub mod writer;

pub use rollup::{rollup, tier_for, Tier, TIERS};
pub use series::{pool_from_values, pool_values, PoolSample, TenantSample};
