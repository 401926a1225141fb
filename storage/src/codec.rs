//! Values are JSON; a value that does not decode is corruption, reported with
//! the key it sits under so an operator can find it.
use crate::errors::{Result, StorageError};
use crate::keys;
use serde::de::DeserializeOwned;

/// Decodes a JSON value, naming the key when it is not what it should be.
pub(crate) fn decode<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T> {
    serde_json::from_slice(value).map_err(|source| StorageError::Corrupt {
        key: keys::display(key),
        source,
    })
}
