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

/// Where every run's record is, in memory: built from `run_page_index` on first use, kept up by
/// every write.
#[derive(Debug, Default)]
pub(super) struct RunIndex {
    /// Run id → its place; run ids are UUIDv7, so this order is the order runs began.
    runs: BTreeMap<String, Place>,
    /// Resource → its runs.
    by_resource: HashMap<String, BTreeSet<String>>,
    /// Page → its runs in slot order.
    pages: BTreeMap<u64, Vec<PagedRun>>,
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
        for (slot, run) in runs.iter().enumerate() {
            let place = Place { page, slot, started_at: run.started_at };
            if let Some(old) = self.runs.insert(run.run_id.clone(), place)
                && old.page != page
                && let Some(listed) = self.pages.get_mut(&old.page)
            {
                listed.retain(|listed| listed.run_id != run.run_id);
            }
            if !run.resource_id.is_empty() {
                self.by_resource.entry(run.resource_id.clone()).or_default().insert(run.run_id.clone());
            }
        }
        self.next_page = self.next_page.max(page + 1);
        self.pages.insert(page, runs);
    }

    /// Forgets `page` and the runs it holds.
    pub(super) fn remove_page(&mut self, page: u64) {
        for run in self.pages.remove(&page).unwrap_or_default() {
            if self.runs.get(&run.run_id).is_some_and(|place| place.page == page) {
                self.runs.remove(&run.run_id);
                if let Some(runs) = self.by_resource.get_mut(&run.resource_id) {
                    runs.remove(&run.run_id);
                    if runs.is_empty() {
                        self.by_resource.remove(&run.resource_id);
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
    pub(super) fn page_runs(&self, page: u64) -> &[PagedRun] {
        self.pages.get(&page).map_or(&[], Vec::as_slice)
    }

    /// Run ids newest first, before `before` (all when empty), of `resource_id` (all when empty).
    pub(super) fn newest_first<'a>(
        &'a self,
        resource_id: &str,
        before: &'a str,
    ) -> Box<dyn Iterator<Item = (&'a str, Place)> + 'a> {
        let place = |run_id: &'a String| self.runs.get(run_id).map(|place| (run_id.as_str(), *place));
        let range =
            (Bound::Unbounded, if before.is_empty() { Bound::Unbounded } else { Bound::Excluded(before) });
        if resource_id.is_empty() {
            Box::new(self.runs.range::<str, _>(range).rev().map(|(run_id, place)| (run_id.as_str(), *place)))
        } else {
            let Some(runs) = self.by_resource.get(resource_id) else { return Box::new(std::iter::empty()) };
            Box::new(runs.range::<str, _>(range).rev().filter_map(place))
        }
    }

    /// Run ids oldest first.
    pub(super) fn oldest_first(&self) -> impl Iterator<Item = (&str, Place)> {
        self.runs.iter().map(|(run_id, place)| (run_id.as_str(), *place))
    }

    /// The runs of `resource_id`.
    pub(super) fn of_resource(&self, resource_id: &str) -> Vec<String> {
        self.by_resource.get(resource_id).map(|runs| runs.iter().cloned().collect()).unwrap_or_default()
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
}
