//! `[storage]`: where the control plane keeps its state.
use super::key::section;
use super::ConfigError;
use std::path::PathBuf;

section! {
    /// The sled data directory and its cache.
    pub struct StorageSection = "storage" {
        /// Where sled keeps its files.
        data_dir: PathBuf = PathBuf::from("./caldera-data"), was "data-dir";
        /// sled page cache, MiB (sled's own default of 1 GiB would blow the
        /// 1 GB control-plane memory target by itself).
        cache_mb: u64 = 64, was "cache-mb";
    }
}

impl StorageSection {
    /// Checks values that would make the server misbehave.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cache_mb == 0 {
            return Err(ConfigError::new(
                "storage.cache-mb",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
}
