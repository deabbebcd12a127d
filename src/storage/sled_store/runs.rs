//! Run records in sled: `runs` (the start inverted | run id → record: a forward scan is newest
//! first), `run_ids` (run id → `runs` key) and `resource_runs` (resource | `runs` key → ()), all
//! written in one transaction.

use sled::Transactional;
use sled::transaction::ConflictableTransactionError;

use super::{Inner, StoreError, decode, encode, engine, keys, transaction};
use crate::domain::RunRecord;
use crate::storage::{RunFilter, RunPage};

impl Inner {
    pub(super) fn save_run_records(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        transaction((&self.runs, &self.run_ids, &self.resource_runs).transaction(|(runs, ids, resources)| {
            for record in records {
                let key = keys::run(record.started_at, &record.run_id);
                runs.insert(key.as_slice(), encode(record))?;
                ids.insert(keys::run_id(&record.run_id), key.as_slice())?;
                if !record.resource_id.is_empty() {
                    resources.insert(keys::resource_run(&record.resource_id, &key), &[])?;
                }
            }
            Ok::<_, ConflictableTransactionError<StoreError>>(())
        }))
    }

    pub(super) fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        let after = keys::decode_cursor(cursor).unwrap_or_default();
        // Newest first: the first key of a run started before `until` is where the scan begins.
        let from = match filter.until {
            Some(until) => keys::run(until.saturating_sub(1), "")[..8].to_vec(),
            None => Vec::new(),
        };
        let run_keys: Box<dyn Iterator<Item = sled::Result<sled::IVec>>> = if filter.resource_id.is_empty() {
            Box::new(self.runs.range(from..).keys())
        } else {
            let prefix = keys::resource_runs_prefix(&filter.resource_id);
            let skip = prefix.len();
            Box::new(
                self.resource_runs
                    .range([prefix.as_slice(), &from].concat()..)
                    .keys()
                    .take_while(move |key| key.as_ref().map_or(true, |key| key.starts_with(&prefix)))
                    .map(move |key| key.map(|key| sled::IVec::from(&key[skip..]))),
            )
        };
        let mut runs = Vec::new();
        for key in run_keys {
            let key = key.map_err(engine)?;
            if !after.is_empty() && key.as_ref() <= after.as_slice() {
                continue;
            }
            let Some(bytes) = self.runs.get(&key).map_err(engine)? else { continue };
            let record: RunRecord = decode("runs", &bytes)?;
            if filter.since.is_some_and(|since| record.started_at < since) {
                break; // older ones only from here on
            }
            if !filter.matches(&record) {
                continue;
            }
            if runs.len() == limit {
                let last: &RunRecord = runs.last().expect("limit > 0");
                let next_cursor = keys::encode_cursor(&keys::run(last.started_at, &last.run_id));
                return Ok(RunPage { runs, next_cursor });
            }
            runs.push(record);
        }
        Ok(RunPage { runs, next_cursor: String::new() })
    }

    pub(super) fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let Some(key) = self.run_ids.get(keys::run_id(run_id)).map_err(engine)? else { return Ok(None) };
        match self.runs.get(key).map_err(engine)? {
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
        // Oldest first.
        for entry in self.runs.iter().rev() {
            let (key, bytes) = entry.map_err(engine)?;
            let record: RunRecord = decode("runs", &bytes)?;
            if before.is_none_or(|before| record.started_at >= before) {
                break;
            }
            doomed.push((key.to_vec(), record));
        }
        if let Some(keep) = keep {
            let kept = self.runs.len() as u64 - doomed.len() as u64;
            let excess = kept.saturating_sub(keep) as usize;
            for entry in self.runs.iter().rev().skip(doomed.len()).take(excess) {
                let (key, bytes) = entry.map_err(engine)?;
                doomed.push((key.to_vec(), decode("runs", &bytes)?));
            }
        }
        for chunk in doomed.chunks(1000) {
            self.remove_run_records(chunk)?;
        }
        Ok(doomed.len() as u64)
    }

    pub(super) fn delete_resource_runs(&self, resource_id: &str) -> Result<(), StoreError> {
        let prefix = keys::resource_runs_prefix(resource_id);
        let mut doomed = Vec::new();
        for key in self.resource_runs.scan_prefix(&prefix).keys() {
            let run_key = key.map_err(engine)?[prefix.len()..].to_vec();
            if let Some(bytes) = self.runs.get(&run_key).map_err(engine)? {
                doomed.push((run_key, decode("runs", &bytes)?));
            }
        }
        for chunk in doomed.chunks(1000) {
            self.remove_run_records(chunk)?;
        }
        Ok(())
    }

    fn remove_run_records(&self, doomed: &[(Vec<u8>, RunRecord)]) -> Result<(), StoreError> {
        transaction((&self.runs, &self.run_ids, &self.resource_runs).transaction(|(runs, ids, resources)| {
            for (key, record) in doomed {
                runs.remove(key.as_slice())?;
                ids.remove(keys::run_id(&record.run_id))?;
                if !record.resource_id.is_empty() {
                    resources.remove(keys::resource_run(&record.resource_id, key))?;
                }
            }
            Ok::<_, ConflictableTransactionError<StoreError>>(())
        }))
    }
}
