//! Storage errors, each with a stable code.
use thiserror::Error;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, StorageError>;

/// Everything that can go wrong between the control plane and its sled files.
///
/// Every variant has a stable [`code`](StorageError::code) (5xxxx: the caller
/// did nothing wrong, the server did) and a machine-readable
/// [`name`](StorageError::name), so the gateway can put them in its envelope.
#[derive(Debug, Error)]
pub enum StorageError {
    /// sled itself failed: I/O, a lock held by another process, a corrupt log.
    #[error("storage I/O failed: {0}")]
    Sled(#[from] sled::Error),
    /// A stored value does not decode as the record its key says it holds.
    #[error("corrupt record at key {key:?}: {source}")]
    Corrupt {
        /// The key, printable (`t/<task>`, `e/<seq>`, ...).
        key: String,
        #[source]
        source: serde_json::Error,
    },
    /// A record could not be encoded (a value serde_json refuses).
    #[error("cannot encode record for key {key:?}: {source}")]
    Encode {
        key: String,
        #[source]
        source: serde_json::Error,
    },
    /// The data directory was written by an incompatible version of Caldera.
    #[error("data directory has storage format {found}, this build reads format {expected}")]
    UnsupportedFormat { found: String, expected: u32 },
    /// A [`StoreConfig`](crate::StoreConfig) value out of range.
    #[error("invalid storage configuration: {0}")]
    Config(String),
}

impl StorageError {
    /// Stable numeric code, for API envelopes and logs.
    pub fn code(&self) -> u32 {
        match self {
            StorageError::Sled(_) => 50001,
            StorageError::Corrupt { .. } => 50002,
            StorageError::Encode { .. } => 50003,
            StorageError::UnsupportedFormat { .. } => 50004,
            StorageError::Config(_) => 50005,
        }
    }

    /// Stable machine-readable name, for API envelopes and logs.
    pub fn name(&self) -> &'static str {
        match self {
            StorageError::Sled(_) => "storage_io",
            StorageError::Corrupt { .. } => "storage_corrupt_record",
            StorageError::Encode { .. } => "storage_encode",
            StorageError::UnsupportedFormat { .. } => "storage_unsupported_format",
            StorageError::Config(_) => "storage_config",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_distinct() {
        let json_err = || serde_json::from_slice::<u8>(b"x").unwrap_err();
        let all = [
            StorageError::Sled(sled::Error::Unsupported("x".into())),
            StorageError::Corrupt {
                key: "t/a".into(),
                source: json_err(),
            },
            StorageError::Encode {
                key: "t/a".into(),
                source: json_err(),
            },
            StorageError::UnsupportedFormat {
                found: "9".into(),
                expected: 1,
            },
            StorageError::Config("x".into()),
        ];
        let mut codes: Vec<u32> = all.iter().map(StorageError::code).collect();
        let mut names: Vec<&str> = all.iter().map(StorageError::name).collect();
        codes.sort_unstable();
        codes.dedup();
        names.sort_unstable();
        names.dedup();
        assert_eq!(codes.len(), all.len());
        assert_eq!(names.len(), all.len());
    }
}
