//! Run records in sled, in pages of a few records (`run_pages.rs`): saving a batch is one
//! transaction, listing walks the in-memory index newest first and reads each record from its
//! page, and removing records (retention, `DeleteResource`) rewrites the pages they were in.
//! Stores written before pages (a `runs` tree, a key per record) are moved into pages when the
//! index is first built.

use std::collections::{BTreeMap, HashMap};
use std::sync::MutexGuard;

use sled::Transactional;

use super::run_pages::{PART_BYTES, PagedRun, RunIndex, page_record, page_records, paged};
use super::{Inner, StoreError, decode, encode, engine, keys, transaction};
use crate::domain::RunRecord;
use crate::storage::{RunFilter, RunPage};

/// Records moved into pages in one transaction from a store written before pages.
const LEGACY_BATCH: usize = 256;

/// Pages a listing keeps read at once (the newest runs lie in a few pages).
const PAGES_HELD: usize = 8;

fn page_key(page: u64) -> [u8; 8] {
    page.to_be_bytes()
}

/// The key of a page's part.
fn part_key(page: u64, part: usize) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&page_key(page));
    key[8..]
        .copy_from_slice(&u32::try_from(part).expect("a page of fewer than 4 billion parts").to_be_bytes());
    key
}

fn page_of(key: &[u8]) -> Result<u64, StoreError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| StoreError::Corrupt {
        tree: "run_pages",
        reason: format!("a page key of {} bytes", key.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

impl Inner {
    /// The index of every run's place, built on first use.
    fn run_index(&self) -> Result<MutexGuard<'_, Option<RunIndex>>, StoreError> {
        let mut index = self.run_index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if index.is_none() {
            let entries = self.run_page_index.iter().map(|entry| {
                let (key, value) = entry.map_err(engine)?;
                Ok((page_of(&key)?, value.to_vec()))
            });
            let mut loaded = RunIndex::load(entries)?;
            self.move_legacy_runs(&mut loaded)?;
            *index = Some(loaded);
        }
        Ok(index)
    }

    /// Writes `pages` (number, bytes, runs) in one transaction, in parts of at most
    /// [`PART_BYTES`], replacing whatever parts they had, and tells `index`.
    fn write_pages(
        &self,
        index: &mut RunIndex,
        pages: Vec<(u64, Vec<u8>, Vec<PagedRun>)>,
    ) -> Result<(), StoreError> {
        let stale = self.part_keys(pages.iter().map(|(page, _, _)| *page))?;
        let listed: Vec<Vec<u8>> = pages.iter().map(|(_, _, runs)| encode(runs)).collect();
        transaction((&self.run_pages, &self.run_page_index).transaction(|(parts, listing)| {
            for key in &stale {
                parts.remove(key)?;
            }
            for ((page, body, _), listed) in pages.iter().zip(&listed) {
                for (part, bytes) in body.chunks(PART_BYTES).enumerate() {
                    parts.insert(&part_key(*page, part), bytes)?;
                }
                listing.insert(&page_key(*page), listed.as_slice())?;
            }
            Ok(())
        }))?;
        for (page, _, runs) in pages {
            index.add(page, runs);
        }
        Ok(())
    }

    /// The keys of every part of `pages` that is stored.
    fn part_keys(&self, pages: impl Iterator<Item = u64>) -> Result<Vec<sled::IVec>, StoreError> {
        let mut keys = Vec::new();
        for page in pages {
            for key in self.run_pages.scan_prefix(page_key(page)).keys() {
                keys.push(key.map_err(engine)?);
            }
        }
        Ok(keys)
    }

    /// Writes `records` into new pages.
    fn write_new_pages(&self, index: &mut RunIndex, records: &[RunRecord]) -> Result<(), StoreError> {
        let pages = paged(records).into_iter().map(|(body, runs)| (index.take_page(), body, runs)).collect();
        self.write_pages(index, pages)
    }

    pub(super) fn save_run_records(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut index = self.run_index()?;
        self.write_new_pages(index.as_mut().expect("loaded"), records)
    }

    /// A page's bytes, its parts joined.
    fn read_page(&self, page: u64) -> Result<sled::IVec, StoreError> {
        let mut parts = self.run_pages.scan_prefix(page_key(page)).values();
        let first = parts.next().transpose().map_err(engine)?.ok_or_else(|| StoreError::Corrupt {
            tree: "run_pages",
            reason: format!("page {page} is indexed but missing"),
        })?;
        let Some(second) = parts.next().transpose().map_err(engine)? else { return Ok(first) };
        let mut joined = [first.as_ref(), second.as_ref()].concat();
        for part in parts {
            joined.extend_from_slice(&part.map_err(engine)?);
        }
        Ok(joined.into())
    }

    pub(super) fn list_run_records(
        &self,
        filter: &RunFilter,
        cursor: &str,
        limit: usize,
    ) -> Result<RunPage, StoreError> {
        let before =
            keys::decode_cursor(cursor).and_then(|bytes| String::from_utf8(bytes).ok()).unwrap_or_default();
        let index = self.run_index()?;
        let index = index.as_ref().expect("loaded");
        let mut held: HashMap<u64, sled::IVec> = HashMap::new();
        let mut runs: Vec<RunRecord> = Vec::new();
        for (run_id, place) in index.newest_first(&filter.resource_id, &before) {
            // The index knows when each run began: a window skips runs without reading them.
            if filter.since.is_some_and(|since| place.started_at < since)
                || filter.until.is_some_and(|until| place.started_at >= until)
            {
                continue;
            }
            if !held.contains_key(&place.page) {
                if held.len() == PAGES_HELD {
                    held.clear();
                }
                held.insert(place.page, self.read_page(place.page)?);
            }
            let record = page_record(&held[&place.page], place.slot)?;
            if record.run_id != run_id || !filter.matches(&record) {
                continue;
            }
            if runs.len() == limit {
                let next_cursor = keys::encode_cursor(runs.last().expect("limit > 0").run_id.as_bytes());
                return Ok(RunPage { runs, next_cursor });
            }
            runs.push(record);
        }
        Ok(RunPage { runs, next_cursor: String::new() })
    }

    pub(super) fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let index = self.run_index()?;
        let Some(place) = index.as_ref().expect("loaded").place(run_id) else { return Ok(None) };
        page_record(&self.read_page(place.page)?, place.slot).map(Some)
    }

    pub(super) fn prune_run_records(
        &self,
        before: Option<i64>,
        keep: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut index = self.run_index()?;
        let index = index.as_mut().expect("loaded");
        // Oldest first: those too old, then those beyond `keep`.
        let mut doomed: Vec<String> = Vec::new();
        let excess =
            keep.map_or(0, |keep| index.len().saturating_sub(usize::try_from(keep).unwrap_or(usize::MAX)));
        for (position, (run_id, place)) in index.oldest_first().enumerate() {
            let too_old = before.is_some_and(|before| place.started_at < before);
            if !too_old && position >= excess {
                break;
            }
            doomed.push(run_id.to_owned());
        }
        self.remove_runs(index, &doomed)?;
        Ok(doomed.len() as u64)
    }

    pub(super) fn delete_resource_runs(&self, resource_id: &str) -> Result<(), StoreError> {
        let mut index = self.run_index()?;
        let index = index.as_mut().expect("loaded");
        let doomed = index.of_resource(resource_id);
        self.remove_runs(index, &doomed)
    }

    /// Removes the records of `run_ids`: each page they were in is rewritten without them, or
    /// deleted when nothing of it is left.
    fn remove_runs(&self, index: &mut RunIndex, run_ids: &[String]) -> Result<(), StoreError> {
        let mut by_page: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
        for run_id in run_ids {
            if let Some(place) = index.place(run_id) {
                by_page.entry(place.page).or_default().push(run_id);
            }
        }
        for (page, leaving) in by_page {
            let staying: Vec<String> = index
                .page_runs(page)
                .iter()
                .filter(|run| index.place(&run.run_id).is_some_and(|place| place.page == page))
                .map(|run| run.run_id.clone())
                .filter(|run_id| !leaving.contains(&run_id.as_str()))
                .collect();
            if staying.is_empty() {
                let stale = self.part_keys(std::iter::once(page))?;
                transaction((&self.run_pages, &self.run_page_index).transaction(|(parts, listing)| {
                    for key in &stale {
                        parts.remove(key)?;
                    }
                    listing.remove(&page_key(page))?;
                    Ok(())
                }))?;
                index.remove_page(page);
                continue;
            }
            let kept: Vec<RunRecord> = page_records(&self.read_page(page)?)?
                .into_iter()
                .filter(|record| staying.contains(&record.run_id))
                .collect();
            // What is left is written back under the page's number (a page of a store written
            // before parts may give several: the rest take new numbers).
            let pages = paged(&kept)
                .into_iter()
                .enumerate()
                .map(|(at, (body, runs))| (if at == 0 { page } else { index.take_page() }, body, runs))
                .collect();
            self.write_pages(index, pages)?;
        }
        Ok(())
    }

    /// Moves the records of a store written before pages (`runs`: a key per record) into pages,
    /// then empties the old trees.
    fn move_legacy_runs(&self, index: &mut RunIndex) -> Result<(), StoreError> {
        let names = self.db.tree_names();
        if !names.iter().any(|name| name.as_ref() == b"runs") {
            return Ok(());
        }
        let legacy = self.db.open_tree("runs").map_err(engine)?;
        let mut batch = Vec::with_capacity(LEGACY_BATCH);
        for entry in legacy.iter().values() {
            batch.push(decode::<RunRecord>("runs", &entry.map_err(engine)?)?);
            if batch.len() == LEGACY_BATCH {
                self.write_new_pages(index, &std::mem::take(&mut batch))?;
            }
        }
        self.write_new_pages(index, &batch)?;
        for old in ["runs", "resource_runs"] {
            self.db.drop_tree(old).map_err(engine)?;
        }
        Ok(())
    }
}
