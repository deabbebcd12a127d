//! Whether the store takes writes now, and why not. The store keeps it current (free space on
//! its disk, a write the engine could not make); the server watches it for health and metrics,
//! and a run that would write is refused up front while the store cannot take it.

use super::StoreError;

/// The store's ability to take writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writability {
    /// Writes work.
    Writable,
    /// The disk under the store has less free space than the configured reserve: writes are
    /// refused before they reach the engine (deletes still work, to make room), reads work.
    DiskLow {
        /// Free bytes on the disk now.
        free_bytes: u64,
        /// The reserve, `[storage] min_free_mb`.
        min_free_bytes: u64,
    },
    /// The engine failed to write (e.g. the disk filled under it): the store is closed and
    /// reopened from what is on disk as soon as it can write again; until then every call fails.
    Failed(String),
}

impl Writability {
    /// `Ok` when writes work, else the error a write gets.
    pub fn check(&self) -> Result<(), StoreError> {
        match self {
            Writability::Writable => Ok(()),
            Writability::DiskLow { free_bytes, min_free_bytes } => {
                Err(StoreError::DiskLow { free_bytes: *free_bytes, min_free_bytes: *min_free_bytes })
            }
            Writability::Failed(reason) => Err(StoreError::Unavailable(reason.clone())),
        }
    }

    /// A short name of the state, for metrics and logs: `writable`, `disk_low`, `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Writability::Writable => "writable",
            Writability::DiskLow { .. } => "disk_low",
            Writability::Failed(_) => "failed",
        }
    }

    /// True when both are the same state, whatever their figures.
    pub fn same_state(&self, other: &Writability) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}
