//! The last start-estimate accuracy computed, and when: `/v1/stats/estimates`
//! and `/metrics` reuse one for a while instead of scanning every task.
use caldera_actors::control_plane::estimates::EstimateAccuracy;
use std::sync::Mutex;
use std::time::Instant;

/// The last accuracy computed and when.
#[derive(Default)]
pub struct EstimateCache(Mutex<Option<(Instant, EstimateAccuracy)>>);

impl EstimateCache {
    /// The slot, also after a panic elsewhere poisoned the lock (it only
    /// ever holds a finished value).
    pub(crate) fn slot(&self) -> std::sync::MutexGuard<'_, Option<(Instant, EstimateAccuracy)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
