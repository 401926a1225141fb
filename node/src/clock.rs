//! The wall clock as the agent and its shims stamp events and exits with it.
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 on a clock set before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
