//! How values cross the sled boundary: a database opened (waiting for a lock being released),
//! records as JSON, sled's errors as [`StoreError`]s, bulk writes in batches.

use serde::Serialize;
use serde::de::DeserializeOwned;

use std::path::Path;

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

/// Records written per batch by a [`Batched`] writer.
const BATCH: usize = 10_000;

/// Bulk inserts into one tree, applied every [`BATCH`] records (copies and upgrades).
pub(super) struct Batched<'a> {
    tree: &'a sled::Tree,
    batch: sled::Batch,
    pending: usize,
    /// Records inserted so far.
    pub(super) written: u64,
}

impl<'a> Batched<'a> {
    /// A writer into `tree`.
    pub(super) fn into(tree: &'a sled::Tree) -> Batched<'a> {
        Batched { tree, batch: sled::Batch::default(), pending: 0, written: 0 }
    }

    /// Inserts one record (applied with its batch).
    pub(super) fn insert(
        &mut self,
        key: impl Into<sled::IVec>,
        value: impl Into<sled::IVec>,
    ) -> Result<(), StoreError> {
        self.batch.insert(key, value);
        self.pending += 1;
        self.written += 1;
        if self.pending == BATCH {
            self.tree.apply_batch(std::mem::take(&mut self.batch)).map_err(engine)?;
            self.pending = 0;
        }
        Ok(())
    }

    /// Applies what is left; the records written.
    pub(super) fn finish(self) -> Result<u64, StoreError> {
        self.tree.apply_batch(self.batch).map_err(engine)?;
        Ok(self.written)
    }
}

/// Copies every record of `from` into `to` as it is; the records copied.
pub(super) fn copy_tree(from: &sled::Tree, to: &sled::Tree) -> Result<u64, StoreError> {
    let mut writer = Batched::into(to);
    for entry in from.iter() {
        let (key, value) = entry.map_err(engine)?;
        writer.insert(key, value)?;
    }
    writer.finish()
}

/// How long opening waits for the file lock: a store closed a moment ago (a restart, or sled's
/// own flusher thread winding down) releases it shortly.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens the sled database in `path`, waiting up to [`LOCK_PATIENCE`] for another handle to let go.
pub(super) fn open_waiting_for_lock(path: &Path, cache_bytes: u64) -> Result<sled::Db, StoreError> {
    let started = std::time::Instant::now();
    loop {
        match sled::Config::new().path(path).cache_capacity(cache_bytes).open() {
            // sled reports a held lock as `ErrorKind::Other`, with the reason in the message.
            Err(sled::Error::Io(error))
                if error.to_string().contains("could not acquire lock")
                    && started.elapsed() < LOCK_PATIENCE =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            outcome => return outcome.map_err(engine),
        }
    }
}
