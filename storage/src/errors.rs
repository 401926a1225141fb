//! Storage errors, each with a stable code.
use caldera_spec::codes::{self, ErrorCode};
use thiserror::Error;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, StorageError>;

/// Everything that can go wrong between the control plane and its sled files.
///
/// Every variant maps to its own entry of the registry (`caldera_spec::codes`,
/// 500xx: the caller did nothing wrong, the server did), so the gateway can
/// put it in its envelope.
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
    /// This error's entry in the registry: one distinct code per kind, so a
    /// corrupt record is never mistaken for a full disk.
    pub fn error_code(&self) -> &'static ErrorCode {
        match self {
            StorageError::Sled(_) => &codes::STORAGE_IO,
            StorageError::Corrupt { .. } => &codes::STORAGE_CORRUPT_RECORD,
            StorageError::Encode { .. } => &codes::STORAGE_ENCODE,
            StorageError::UnsupportedFormat { .. } => &codes::STORAGE_UNSUPPORTED_FORMAT,
            StorageError::Config(_) => &codes::STORAGE_CONFIG,
        }
    }

    /// Stable numeric code, for API envelopes and logs.
    pub fn code(&self) -> u32 {
        self.error_code().code
    }

    /// Stable machine-readable name, for API envelopes and logs.
    pub fn name(&self) -> &'static str {
        self.error_code().name
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
