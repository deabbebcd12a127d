//! How values cross the sled boundary: records as JSON, sled's errors as [`StoreError`]s.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;

/// sled's IO errors (a full disk among them) make the store unavailable until it reopens.
pub(super) fn engine(error: sled::Error) -> StoreError {
    match error {
        sled::Error::Io(error) => StoreError::Unavailable(error.to_string()),
        other => StoreError::Engine(other.to_string()),
    }
}

/// A record as stored.
pub(super) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialise")
}

/// A stored record of `tree`; `Corrupt` when it does not decode.
pub(super) fn decode<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt { tree, reason: error.to_string() })
}
