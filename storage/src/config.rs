//! How the store is opened.
use serde::{Deserialize, Serialize};

/// 64 MiB: see [`StoreConfig::cache_capacity_bytes`].
pub const DEFAULT_CACHE_CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

/// Smallest page cache sled works sensibly with.
const MIN_CACHE_CAPACITY_BYTES: u64 = 1024 * 1024;

/// Settings of the sled store (config keys in kebab-case).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Size of sled's page cache in bytes. Default: 64 MiB (67108864).
    ///
    /// Why 64 MiB and not sled's default of 1 GiB: the control plane must hold
    /// 1,000 nodes and 100,000 tasks in under 1 GB resident, and sled's cache
    /// is a soft limit that the process may overshoot (sled counts page
    /// sizes approximately, and its log buffers come on top). The actors keep
    /// every live task, node and tenant in their own memory after boot, so
    /// sled's cache only serves the boot-time scan (a sequential read that
    /// needs no cache), event queries (recent events are hot) and the writes
    /// of the moment. 100,000 task records are roughly 100-150 MB of JSON:
    /// caching all of them would double what the actors already hold.
    /// 64 MiB keeps the recent event log and every index page warm while
    /// leaving more than 800 MB for the actors.
    pub cache_capacity_bytes: u64,
    /// Interval of sled's background flush in milliseconds. Default: none —
    /// the control plane flushes explicitly ([`Store::flush_async`]) at the
    /// points where it promises durability (group commit before an
    /// acknowledgement), so a timer would only add disk writes.
    ///
    /// [`Store::flush_async`]: crate::Store::flush_async
    pub flush_every_ms: Option<u64>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            cache_capacity_bytes: DEFAULT_CACHE_CAPACITY_BYTES,
            flush_every_ms: None,
        }
    }
}

/// A [`StoreConfig`] value out of range; the words name the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreConfigError {
    #[error(
        "cache-capacity-bytes must be at least {}, not {bytes}",
        MIN_CACHE_CAPACITY_BYTES
    )]
    CacheTooSmall { bytes: u64 },
    #[error("flush-every-ms must be at least 1 (or absent for none)")]
    NoFlushInterval,
}

impl StoreConfig {
    /// Range check; [`Store::open`](crate::Store::open) calls it too.
    pub fn validate(&self) -> Result<(), StoreConfigError> {
        if self.cache_capacity_bytes < MIN_CACHE_CAPACITY_BYTES {
            return Err(StoreConfigError::CacheTooSmall {
                bytes: self.cache_capacity_bytes,
            });
        }
        if self.flush_every_ms == Some(0) {
            return Err(StoreConfigError::NoFlushInterval);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let cfg = StoreConfig::default();
        assert_eq!(cfg.cache_capacity_bytes, 64 * 1024 * 1024);
        assert_eq!(cfg.flush_every_ms, None);
        assert_eq!(cfg.validate(), Ok(()));
    }

    #[test]
    fn bad_values_are_refused() {
        let tiny = StoreConfig {
            cache_capacity_bytes: 10,
            ..StoreConfig::default()
        };
        assert_eq!(
            tiny.validate(),
            Err(StoreConfigError::CacheTooSmall { bytes: 10 })
        );
        assert_eq!(
            tiny.validate().unwrap_err().to_string(),
            "cache-capacity-bytes must be at least 1048576, not 10"
        );
        let zero = StoreConfig {
            flush_every_ms: Some(0),
            ..StoreConfig::default()
        };
        assert_eq!(zero.validate(), Err(StoreConfigError::NoFlushInterval));
        assert!(zero
            .validate()
            .unwrap_err()
            .to_string()
            .contains("flush-every-ms"));
    }

    #[test]
    fn kebab_case_keys_with_defaults() {
        let cfg: StoreConfig = serde_json::from_str(r#"{"flush-every-ms": 500}"#).unwrap();
        assert_eq!(cfg.flush_every_ms, Some(500));
        assert_eq!(cfg.cache_capacity_bytes, DEFAULT_CACHE_CAPACITY_BYTES);
    }
}
