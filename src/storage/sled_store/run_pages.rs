//! How run records are kept: a page per batch the writer writes, not a key per record (a sled
//! insert costs about as much as a whole page of records, so a key per record cost each run
//! tens of µs of the server's CPU), and an index of where each run is.
//!
//! - A page: a count, the end offset of each record, then the records as JSON, so one record
//!   reads without the rest. It lives in a segment file (`storage/run_segments.rs`).
//! - `run_pages`: page number (u64, big-endian, in the order written) → the page's pointer into
//!   its segment (stores written before segments keep the page itself, read the same way).
//! - `run_page_index`: page number → the page's runs (id, resource, start) in slot order, a few
//!   bytes a run, read once to build the in-memory [`RunIndex`].
//!
//! A page's pointer and its index entry are written in one transaction.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{StoreError, decode, encode};
use crate::domain::RunRecord;

/// A page's records, encoded.
pub(super) fn encode_page(records: &[RunRecord]) -> Vec<u8> {
    let bodies: Vec<Vec<u8>> = records.iter().map(encode).collect();
    let header = 4 * (1 + bodies.len());
    let mut page = Vec::with_capacity(header + bodies.iter().map(Vec::len).sum::<usize>());
    page.extend_from_slice(&(bodies.len() as u32).to_be_bytes());
    let mut end = 0u32;
    for body in &bodies {
        end += body.len() as u32;
        page.extend_from_slice(&end.to_be_bytes());
    }
    for body in &bodies {
        page.extend_from_slice(body);
    }
    page
}

fn corrupt(reason: &str) -> StoreError {
    StoreError::Corrupt { tree: "run_pages", reason: reason.to_owned() }
}

fn read_u32(bytes: &[u8], at: usize) -> Result<usize, StoreError> {
    let word = bytes.get(at..at + 4).ok_or_else(|| corrupt("a page ends inside its header"))?;
    Ok(u32::from_be_bytes([word[0], word[1], word[2], word[3]]) as usize)
}

/// How many records a page holds.
pub(super) fn page_len(page: &[u8]) -> Result<usize, StoreError> {
    read_u32(page, 0)
}

/// The record in `slot` of a page.
pub(super) fn page_record(page: &[u8], slot: usize) -> Result<RunRecord, StoreError> {
    let count = page_len(page)?;
    if slot >= count {
        return Err(corrupt("a slot beyond the page's records"));
    }
    let bodies = 4 * (1 + count);
    let start = if slot == 0 { 0 } else { read_u32(page, 4 * slot)? };
    let end = read_u32(page, 4 * (slot + 1))?;
    let body =
        page.get(bodies + start..bodies + end).ok_or_else(|| corrupt("a record beyond the page's end"))?;
    decode("run_pages", body)
}

/// Every record of a page, in slot order.
pub(super) fn page_records(page: &[u8]) -> Result<Vec<RunRecord>, StoreError> {
    (0..page_len(page)?).map(|slot| page_record(page, slot)).collect()
}

/// A run as a page's index entry lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct PagedRun {
    pub(super) run_id: String,
    pub(super) resource_id: String,
    pub(super) started_at: i64,
}

impl PagedRun {
    pub(super) fn of(record: &RunRecord) -> PagedRun {
        PagedRun {
            run_id: record.run_id.clone(),
            resource_id: record.resource_id.clone(),
            started_at: record.started_at,
        }
    }
}

/// Where a run's record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Place {
    pub(super) page: u64,
    pub(super) slot: usize,
    pub(super) started_at: i64,
}

/// A run as the in-memory index lists it in its page: its id, one allocation shared by every
/// map of the index that names the run, and its resource, one allocation shared by all of the
/// resource's runs (none for a run without one). The index holds every kept record's run —
/// 100,000 by default — so this is its memory: about 170 bytes a run, where three copies of the
/// id and one of the resource as `String`s took about 330.
#[derive(Debug, Clone)]
pub(super) struct IndexedRun {
    pub(super) run_id: Arc<str>,
    resource_id: Option<Arc<str>>,
}

/// Where every run's record is, in memory: built from `run_page_index` on first use, kept up by
/// every write.
#[derive(Debug, Default)]
pub(super) struct RunIndex {
    /// Run id → its place; run ids are UUIDv7, so this order is the order runs began.
    runs: BTreeMap<Arc<str>, Place>,
    /// Resource → its runs.
    by_resource: HashMap<Arc<str>, BTreeSet<Arc<str>>>,
    /// Page → its runs in slot order.
    pages: BTreeMap<u64, Vec<IndexedRun>>,
    /// The number of the next page.
    next_page: u64,
}

impl RunIndex {
    /// The index of `entries` (page number, its encoded index entry), in page order.
    pub(super) fn load(
        entries: impl Iterator<Item = Result<(u64, Vec<u8>), StoreError>>,
    ) -> Result<RunIndex, StoreError> {
        let mut index = RunIndex::default();
        for entry in entries {
            let (page, bytes) = entry?;
            index.add(page, decode("run_page_index", &bytes)?);
        }
        Ok(index)
    }

    /// The number a new page takes.
    pub(super) fn take_page(&mut self) -> u64 {
        let page = self.next_page;
        self.next_page += 1;
        page
    }

    /// Records that `page` now holds `runs` (a new page, or a rewritten one). A run already in
    /// another page moves here.
    pub(super) fn add(&mut self, page: u64, runs: Vec<PagedRun>) {
        self.remove_page(page);
        let mut listed = Vec::with_capacity(runs.len());
        for (slot, run) in runs.into_iter().enumerate() {
            let place = Place { page, slot, started_at: run.started_at };
            // A run written again (moved to this page) keeps the id the maps already hold.
            let run_id = match self.runs.get_key_value(run.run_id.as_str()) {
                Some((shared, _)) => Arc::clone(shared),
                None => Arc::from(run.run_id),
            };
            if let Some(old) = self.runs.insert(Arc::clone(&run_id), place)
                && old.page != page
                && let Some(listed) = self.pages.get_mut(&old.page)
            {
                listed.retain(|listed| listed.run_id != run_id);
            }
            let resource_id = (!run.resource_id.is_empty()).then(|| self.resource(run.resource_id));
            if let Some(resource_id) = &resource_id {
                self.by_resource.entry(Arc::clone(resource_id)).or_default().insert(Arc::clone(&run_id));
            }
            listed.push(IndexedRun { run_id, resource_id });
        }
        self.next_page = self.next_page.max(page + 1);
        self.pages.insert(page, listed);
    }

    /// The resource's shared id: the one its runs already hold, or a new one.
    fn resource(&self, resource_id: String) -> Arc<str> {
        match self.by_resource.get_key_value(resource_id.as_str()) {
            Some((shared, _)) => Arc::clone(shared),
            None => Arc::from(resource_id),
        }
    }

    /// Forgets `page` and the runs it holds.
    pub(super) fn remove_page(&mut self, page: u64) {
        for run in self.pages.remove(&page).unwrap_or_default() {
            if self.runs.get(&run.run_id).is_some_and(|place| place.page == page) {
                self.runs.remove(&run.run_id);
                if let Some(resource_id) = &run.resource_id
                    && let Some(runs) = self.by_resource.get_mut(resource_id)
                {
                    runs.remove(&run.run_id);
                    if runs.is_empty() {
                        self.by_resource.remove(resource_id);
                    }
                }
            }
        }
    }

    /// Runs kept.
    pub(super) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Where `run_id` is.
    pub(super) fn place(&self, run_id: &str) -> Option<Place> {
        self.runs.get(run_id).copied()
    }

    /// The runs of a page, in slot order.
    pub(super) fn page_runs(&self, page: u64) -> &[IndexedRun] {
        self.pages.get(&page).map_or(&[], Vec::as_slice)
    }

    /// Run ids newest first, before `before` (all when empty), of `resource_id` (all when empty).
    pub(super) fn newest_first<'a>(
        &'a self,
        resource_id: &str,
        before: &'a str,
    ) -> Box<dyn Iterator<Item = (&'a str, Place)> + 'a> {
        let place = |run_id: &'a Arc<str>| self.runs.get(run_id).map(|place| (&**run_id, *place));
        let range =
            (Bound::Unbounded, if before.is_empty() { Bound::Unbounded } else { Bound::Excluded(before) });
        if resource_id.is_empty() {
            Box::new(self.runs.range::<str, _>(range).rev().map(|(run_id, place)| (&**run_id, *place)))
        } else {
            let Some(runs) = self.by_resource.get(resource_id) else { return Box::new(std::iter::empty()) };
            Box::new(runs.range::<str, _>(range).rev().filter_map(place))
        }
    }

    /// Run ids oldest first.
    pub(super) fn oldest_first(&self) -> impl Iterator<Item = (&str, Place)> {
        self.runs.iter().map(|(run_id, place)| (&**run_id, *place))
    }

    /// The runs of `resource_id`.
    pub(super) fn of_resource(&self, resource_id: &str) -> Vec<String> {
        self.by_resource
            .get(resource_id)
            .map(|runs| runs.iter().map(|run_id| run_id.to_string()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{FinishReason, RunOutcome, Usage};

    fn record(run_id: &str, resource_id: &str) -> RunRecord {
        RunRecord {
            run_id: run_id.into(),
            agent_id: "a".into(),
            thread_id: String::new(),
            resource_id: resource_id.into(),
            key_name: String::new(),
            started_at: 1,
            ended_at: 2,
            outcome: RunOutcome::Finished,
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            tripwire: None,
            error: None,
            timeline: Vec::new(),
            content: None,
        }
    }

    /// A page gives back each record by its slot, and all of them in order.
    #[test]
    fn a_page_reads_one_record_or_all() {
        let records = vec![record("r1", "x"), record("r2", ""), record("r3", "y")];
        let page = encode_page(&records);
        assert_eq!(page_len(&page).unwrap(), 3);
        assert_eq!(page_record(&page, 1).unwrap(), records[1]);
        assert_eq!(page_records(&page).unwrap(), records);
        assert!(page_record(&page, 3).is_err());
        assert!(page_record(&page[..6], 0).is_err(), "a truncated page is corrupt, not a panic");
    }

    /// A run written again moves to its new page; removing a page forgets only the runs still
    /// placed in it.
    #[test]
    fn the_index_follows_runs_between_pages() {
        let mut index = RunIndex::default();
        let runs = |ids: &[&str]| ids.iter().map(|id| PagedRun::of(&record(id, "x"))).collect::<Vec<_>>();
        index.add(0, runs(&["a", "b"]));
        index.add(1, runs(&["b", "c"]));
        assert_eq!(index.place("b").unwrap().page, 1);
        assert_eq!(index.len(), 3);
        index.remove_page(0);
        assert_eq!((index.len(), index.place("a")), (2, None));
        let newest: Vec<&str> = index.newest_first("x", "").map(|(id, _)| id).collect();
        assert_eq!(newest, ["c", "b"]);
        assert_eq!(index.newest_first("", "c").map(|(id, _)| id).collect::<Vec<_>>(), ["b"]);
        assert_eq!(index.take_page(), 2);
    }

    /// The index holds each run id once however many of its maps name the run, and a
    /// resource's id once for all its runs: its memory is what a kept run costs.
    #[test]
    fn the_index_shares_run_and_resource_ids() {
        let mut index = RunIndex::default();
        let runs = vec![
            PagedRun::of(&record("a", "x")),
            PagedRun::of(&record("b", "x")),
            PagedRun::of(&record("c", "")),
        ];
        index.add(0, runs);
        let listed = index.page_runs(0);
        let (key, _) = index.runs.get_key_value("a").expect("indexed");
        assert!(Arc::ptr_eq(key, &listed[0].run_id), "the page lists the map's id");
        let (resource, of_x) = index.by_resource.get_key_value("x").expect("by resource");
        assert!(Arc::ptr_eq(of_x.get("a").expect("a of x"), key), "so does the resource's set");
        for run in &listed[..2] {
            assert!(Arc::ptr_eq(run.resource_id.as_ref().expect("has one"), resource), "one id for x");
        }
        assert!(listed[2].resource_id.is_none() && index.by_resource.len() == 1);
        assert_eq!(index.of_resource("x"), ["a", "b"]);
    }
}
