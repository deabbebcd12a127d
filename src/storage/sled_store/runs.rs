//! Run records, a page per batch (`run_pages.rs`) in the segment files (`run_segments.rs`):
//! saving a batch is one write to a segment and one sled transaction of two small inserts,
//! listing walks the in-memory index newest first and reads each record from its page, and
//! removing records (retention, `DeleteResource`) writes the pages they were in again without
//! them, giving the old pages back to their segments.
//! Stores written before pages (a `runs` tree, a key per record) are moved into pages when the
//! index is first built.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, MutexGuard};

use sled::Transactional;

use super::RunSegments;
use super::run_pages::{PagedRun, Place, RunIndex, encode_page, page_record, page_records};
use super::{Inner, StoreError, decode, encode, engine, keys, transaction};
use crate::domain::{RunRecord, RunTally};
use crate::storage::{RunFilter, RunPage};

/// Records moved into one page from a store written before pages.
const LEGACY_PAGE: usize = 256;

/// Pages a listing keeps read at once (the newest runs lie in a few pages).
const PAGES_HELD: usize = 8;

fn page_key(page: u64) -> [u8; 8] {
    page.to_be_bytes()
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
            let mut pointers = Vec::new();
            for value in self.run_pages.iter().values() {
                pointers.push(value.map_err(engine)?);
            }
            self.run_segments.track(pointers.iter().map(|pointer| pointer.as_ref()))?;
            self.move_legacy_runs(&mut loaded)?;
            *index = Some(loaded);
        }
        Ok(index)
    }

    /// Writes `records` as page `page` (replacing it), and tells `index`: the page goes to a
    /// segment, its pointer and runs into sled, and the page it replaces is given back.
    fn write_page(&self, index: &mut RunIndex, page: u64, records: &[RunRecord]) -> Result<(), StoreError> {
        let runs: Vec<PagedRun> = records.iter().map(PagedRun::of).collect();
        let pointer = self.run_segments.append(&encode_page(records))?;
        let listed = encode(&runs);
        let replaced =
            transaction((&self.run_pages, &self.run_page_index).transaction(|(pages, listing)| {
                let replaced = pages.insert(&page_key(page), pointer.as_slice())?;
                listing.insert(&page_key(page), listed.as_slice())?;
                Ok(replaced)
            }))?;
        if let Some(replaced) = replaced {
            self.run_segments.released(&replaced);
        }
        index.add(page, runs);
        Ok(())
    }

    pub(super) fn save_run_records(&self, records: &[RunRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        // A run saved again may have changed: its tally is read again.
        self.run_tallies.forget(records.iter().map(|record| record.run_id.as_str()));
        let mut index = self.run_index()?;
        let index = index.as_mut().expect("loaded");
        let page = index.take_page();
        self.write_page(index, page, records)
    }

    /// A page's bytes; `None` when its segment no longer holds it (a crash between the segment
    /// and the tree): its records are as if deleted.
    fn read_page(&self, page: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let value = self.run_pages.get(page_key(page)).map_err(engine)?.ok_or_else(|| {
            StoreError::Corrupt { tree: "run_pages", reason: format!("page {page} is indexed but missing") }
        })?;
        if RunSegments::is_pointer(&value) {
            self.run_segments.read(&value)
        } else {
            Ok(Some(value.to_vec()))
        }
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
        let mut pages = HeldPages::new(self);
        let mut runs: Vec<RunRecord> = Vec::new();
        for (run_id, place) in index.newest_first(&filter.resource_id, &before) {
            // The index knows when each run began: a window skips runs without reading them.
            if !filter.in_window(place.started_at) {
                continue;
            }
            let Some(record) = pages.record(run_id, place)? else { continue };
            if !filter.matches(&record) {
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

    pub(super) fn run_tallies(
        &self,
        filter: &RunFilter,
        limit: usize,
    ) -> Result<Vec<Arc<RunTally>>, StoreError> {
        let index = self.run_index()?;
        let index = index.as_ref().expect("loaded");
        let mut pages = HeldPages::new(self);
        let mut tallies = Vec::new();
        for (run_id, place) in index.newest_first(&filter.resource_id, "") {
            if tallies.len() == limit {
                break;
            }
            if !filter.in_window(place.started_at) {
                continue;
            }
            let tally = match self.run_tallies.get(run_id) {
                Some(tally) => tally,
                None => {
                    let Some(record) = pages.record(run_id, place)? else { continue };
                    let tally = Arc::new(RunTally::of(&record));
                    self.run_tallies.keep(Arc::clone(&tally));
                    tally
                }
            };
            if filter.matches_tally(&tally) {
                tallies.push(tally);
            }
        }
        Ok(tallies)
    }

    pub(super) fn get_run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let index = self.run_index()?;
        let Some(place) = index.as_ref().expect("loaded").place(run_id) else { return Ok(None) };
        self.read_page(place.page)?.map(|page| page_record(&page, place.slot)).transpose()
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
        self.run_tallies.forget(run_ids.iter().map(String::as_str));
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
                .map(|run| run.run_id.to_string())
                .filter(|run_id| !leaving.contains(&run_id.as_str()))
                .collect();
            // A page its segment lost has nothing left to keep either.
            let body = if staying.is_empty() { None } else { self.read_page(page)? };
            let Some(body) = body else {
                let removed =
                    transaction((&self.run_pages, &self.run_page_index).transaction(|(pages, listing)| {
                        let removed = pages.remove(&page_key(page))?;
                        listing.remove(&page_key(page))?;
                        Ok(removed)
                    }))?;
                if let Some(removed) = removed {
                    self.run_segments.released(&removed);
                }
                index.remove_page(page);
                continue;
            };
            let kept: Vec<RunRecord> =
                page_records(&body)?.into_iter().filter(|record| staying.contains(&record.run_id)).collect();
            self.write_page(index, page, &kept)?;
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
        let mut page = Vec::with_capacity(LEGACY_PAGE);
        for entry in legacy.iter().values() {
            page.push(decode::<RunRecord>("runs", &entry.map_err(engine)?)?);
            if page.len() == LEGACY_PAGE {
                let number = index.take_page();
                self.write_page(index, number, &std::mem::take(&mut page))?;
            }
        }
        if !page.is_empty() {
            let number = index.take_page();
            self.write_page(index, number, &page)?;
        }
        for old in ["runs", "resource_runs"] {
            self.db.drop_tree(old).map_err(engine)?;
        }
        Ok(())
    }
}

/// The pages a walk over the index reads, the last few kept (the newest runs lie in a few).
struct HeldPages<'a> {
    inner: &'a Inner,
    held: HashMap<u64, Option<Vec<u8>>>,
}

impl<'a> HeldPages<'a> {
    fn new(inner: &'a Inner) -> HeldPages<'a> {
        HeldPages { inner, held: HashMap::new() }
    }

    /// The record of `run_id` at `place`; `None` when its page is lost or holds another run.
    fn record(&mut self, run_id: &str, place: Place) -> Result<Option<RunRecord>, StoreError> {
        if !self.held.contains_key(&place.page) {
            if self.held.len() == PAGES_HELD {
                self.held.clear();
            }
            self.held.insert(place.page, self.inner.read_page(place.page)?);
        }
        let Some(page) = &self.held[&place.page] else { return Ok(None) };
        let record = page_record(page, place.slot)?;
        Ok((record.run_id == run_id).then_some(record))
    }
}
