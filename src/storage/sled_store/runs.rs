//! Run records in sled: `runs` (run id → record; run ids are UUIDv7, ordered by the time they
//! were made, so a reverse scan is newest first) and `resource_runs` (resource | run id → (),
//! for a resource's runs and for deleting them with it). A record is written before its index
//! entry: a crash in between leaves a record only the full list finds, never an entry without
//! its record.

use std::sync::atomic::Ordering;

use super::{Inner, StoreError, decode, encode, engine, keys};
use crate::domain::RunRecord;
use crate::storage::{RunFilter, RunPage};

/// `run_count` before it was counted.
pub(super) const UNCOUNTED: u64 = u64::MAX;

impl Inner {
    /// How many records are kept: counted once (a scan), then kept up by saves and removals.
    fn run_count(&self) -> u64 {
        let count = self.run_count.load(Ordering::Relaxed);
        if count != UNCOUNTED {
            return count;
        }
        let counted = self.runs.len() as u64;
        let _ = self.run_count.compare_exchange(UNCOUNTED, counted, Ordering::Relaxed, Ordering::Relaxed);
        self.run_count.load(Ordering::Relaxed)
    }

    fn count_runs(&self, change: impl Fn(u64) -> u64) {
        let _ = self.run_count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |count| {
            (count != UNCOUNTED).then(|| change(count))
        });
    }

    pub(super) fn save_run_records(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        let mut new = 0;
        for record in records {
            let key = keys::run_id(&record.run_id);
            if self.runs.insert(&key, encode(record)).map_err(engine)?.is_none() {
                new += 1;
            }
            if !record.resource_id.is_empty() {
                self.resource_runs
                    .insert(keys::resource_run(&record.resource_id, &key), &[])
                    .map_err(engine)?;
            }
        }
        self.count_runs(|count| count + new);
        Ok(())
    }

    pub(super) fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        let after = keys::decode_cursor(cursor).unwrap_or_default();
        let run_keys: Box<dyn Iterator<Item = sled::Result<sled::IVec>>> = if filter.resource_id.is_empty() {
            Box::new(
                if after.is_empty() { self.runs.iter() } else { self.runs.range(..after.clone()) }
                    .keys()
                    .rev(),
            )
        } else {
            let prefix = keys::resource_runs_prefix(&filter.resource_id);
            let skip = prefix.len();
            let scan = if after.is_empty() {
                self.resource_runs.scan_prefix(&prefix)
            } else {
                self.resource_runs.range(prefix.clone()..[prefix.as_slice(), &after].concat())
            };
            Box::new(scan.keys().rev().map(move |key| key.map(|key| sled::IVec::from(&key[skip..]))))
        };
        let mut runs: Vec<RunRecord> = Vec::new();
        for key in run_keys {
            let key = key.map_err(engine)?;
            let Some(bytes) = self.runs.get(&key).map_err(engine)? else { continue };
            let record: RunRecord = decode("runs", &bytes)?;
            if !filter.matches(&record) {
                continue;
            }
            if runs.len() == limit {
                let next_cursor = keys::encode_cursor(&keys::run_id(&runs.last().expect("limit > 0").run_id));
                return Ok(RunPage { runs, next_cursor });
            }
            runs.push(record);
        }
        Ok(RunPage { runs, next_cursor: String::new() })
    }

    pub(super) fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        match self.runs.get(keys::run_id(run_id)).map_err(engine)? {
            Some(bytes) => decode("runs", &bytes).map(Some),
            None => Ok(None),
        }
    }

    pub(super) fn prune_run_records(
        &self,
        before: Option<i64>,
        keep: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut doomed = Vec::new();
        // Oldest first, while too old.
        for entry in self.runs.iter() {
            let (key, bytes) = entry.map_err(engine)?;
            let record: RunRecord = decode("runs", &bytes)?;
            if before.is_none_or(|before| record.started_at >= before) {
                break;
            }
            doomed.push((key.to_vec(), record.resource_id));
        }
        if let Some(keep) = keep {
            let excess = self.run_count().saturating_sub(doomed.len() as u64).saturating_sub(keep) as usize;
            for entry in self.runs.iter().skip(doomed.len()).take(excess) {
                let (key, bytes) = entry.map_err(engine)?;
                let record: RunRecord = decode("runs", &bytes)?;
                doomed.push((key.to_vec(), record.resource_id));
            }
        }
        self.remove_run_records(&doomed)?;
        Ok(doomed.len() as u64)
    }

    pub(super) fn delete_resource_runs(&self, resource_id: &str) -> Result<(), StoreError> {
        let prefix = keys::resource_runs_prefix(resource_id);
        let mut doomed = Vec::new();
        for key in self.resource_runs.scan_prefix(&prefix).keys() {
            doomed.push((key.map_err(engine)?[prefix.len()..].to_vec(), resource_id.to_owned()));
        }
        self.remove_run_records(&doomed)
    }

    /// Removes records (by `runs` key, with their resource): the index entry first.
    fn remove_run_records(&self, doomed: &[(Vec<u8>, String)]) -> Result<(), StoreError> {
        let mut removed = 0;
        for (key, resource_id) in doomed {
            if !resource_id.is_empty() {
                self.resource_runs.remove(keys::resource_run(resource_id, key)).map_err(engine)?;
            }
            if self.runs.remove(key).map_err(engine)?.is_some() {
                removed += 1;
            }
        }
        self.count_runs(|count| count.saturating_sub(removed));
        Ok(())
    }
}
