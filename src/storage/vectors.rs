//! The in-memory codes of one resource's vectors, for recall's scan. Loaded from the `vectors`
//! tree on the resource's first search and kept in step by the writes, so sled stays the source
//! of truth: the scan ranks the vectors by their four-bit codes and names the best candidates,
//! scored again from their int8 copies in the scratch file and exactly from their stored f32
//! vectors by the store ([`best_hits`]).
//!
//! The codes are kept in lists, one per cluster of a large resource ([`Clusters`]) and a single
//! one for a small one, each list's codes contiguous so that a scan reads them in order. A message
//! costs about 230 bytes here with 384 dimensions (its code, scale, thread, seq and the places
//! that find it), an eighth of an f32 and int8 copy, so a million messages of one resource fit in
//! memory.

use std::collections::HashMap;

use super::Hit;
use super::vector_clusters::{CLUSTER_FROM, Clusters};
use super::vector_codes::{QueryCode, code_bytes, decode, encode};
use super::vector_scratch::ScratchVectors;

/// Candidates scored again, per hit asked for: the codes' ranking puts the exact top 3 of
/// 100,000 chat-like messages among its best 96 in about 98 of 100 cases, of 1,000,000 in about
/// 97 (BENCHMARKS.md); twice as many lift a million to 99 and cost about a millisecond.
pub(super) const CANDIDATES_PER_HIT: usize = 32;
/// Candidates read from sled and scored exactly, per hit asked for, of those the scratch file
/// scored: its int8 copies rank the true best of the candidates within their best 12.
pub(super) const EXACT_PER_HIT: usize = 4;
/// From this many vectors on, an unclustered scan is shared between the cores.
const PARALLEL_FROM: usize = 50_000;
/// From this many codes in the probed lists on, a clustered scan is shared between the cores.
const PARALLEL_LISTS_FROM: usize = 8_192;
/// Codes moved between lists before the old list's memory is given back, when clustering.
const MOVED_AT_ONCE: usize = 16_384;
/// The most threads a scan uses.
const MAX_SCAN_THREADS: usize = 4;
/// The slot of an entry not in the scratch file.
const NO_SLOT: u32 = u32::MAX;

/// A candidate of a search: its thread, seq, and score from the scratch file when it has one.
pub(super) type Candidate = (String, u64, Option<f32>);

/// The codes of one resource's vectors.
#[derive(Debug, Default)]
pub(super) struct ResourceVectors {
    /// The dimension of every vector here.
    dimension: usize,
    /// The codes, by list: one per cluster, or one in all when unclustered.
    lists: Vec<CodeList>,
    /// The clusters the lists follow, for a large resource ([`Self::keep_clustered`]).
    clusters: Option<Clusters>,
    /// Each entry's list and place in it.
    place_of: Vec<(u32, u32)>,
    /// Each entry's thread, an index into `threads`.
    thread_of: Vec<u32>,
    /// Each entry's seq in its thread.
    seq_of: Vec<u64>,
    /// Each entry's slot in the scratch file, [`NO_SLOT`] when it has none.
    slot_of: Vec<u32>,
    /// The threads' ids and their entries.
    threads: Vec<ThreadEntries>,
    /// Where each thread is in `threads`.
    thread_index: HashMap<String, u32>,
    /// The bytes of the thread ids, kept as threads are added so that [`Self::memory_bytes`],
    /// asked after every write, does not walk the threads.
    id_bytes: usize,
}

/// The codes of one list, contiguous, with the entries they belong to.
#[derive(Debug, Default)]
struct CodeList {
    /// Code `i` is `codes[i * width..(i + 1) * width]`.
    codes: Vec<u8>,
    scales: Vec<f32>,
    entries: Vec<u32>,
}

impl CodeList {
    /// An empty list with room for `count` codes of `width` bytes.
    fn with_capacity(count: usize, width: usize) -> CodeList {
        CodeList {
            codes: Vec::with_capacity(count * width),
            scales: Vec::with_capacity(count),
            entries: Vec::with_capacity(count),
        }
    }

    /// Keeps the first `count` codes and gives the memory of the rest back.
    fn truncate(&mut self, count: usize, width: usize) {
        self.codes.truncate(count * width);
        self.codes.shrink_to_fit();
        self.scales.truncate(count);
        self.scales.shrink_to_fit();
        self.entries.truncate(count);
        self.entries.shrink_to_fit();
    }

    /// Appends a code; returns its place.
    fn push(&mut self, vector: &[f32], width: usize, entry: u32) -> u32 {
        let place = index(self.entries.len());
        self.codes.resize(self.codes.len() + width, 0);
        let at = self.codes.len() - width;
        self.scales.push(encode(vector, &mut self.codes[at..]));
        self.entries.push(entry);
        place
    }

    /// Removes the code at `place` by moving the last one there; returns the entry moved, if any.
    fn swap_remove(&mut self, place: usize, width: usize) -> Option<u32> {
        let last = self.entries.len() - 1;
        self.codes.copy_within(last * width..(last + 1) * width, place * width);
        self.codes.truncate(last * width);
        self.scales.swap_remove(place);
        self.entries.swap_remove(place);
        (place < last).then(|| self.entries[place])
    }

    fn memory_bytes(&self) -> usize {
        self.codes.capacity() + 4 * self.scales.capacity() + 4 * self.entries.capacity()
    }
}

/// One thread's entries, by seq.
#[derive(Debug)]
struct ThreadEntries {
    id: String,
    /// Its entries, sorted by their seq (`seq_of`).
    entries: Vec<u32>,
}

/// An index as a `u32`.
fn index(value: usize) -> u32 {
    u32::try_from(value).expect("fewer than 4 billion vectors")
}

impl ResourceVectors {
    /// The bytes of one code.
    fn width(&self) -> usize {
        code_bytes(self.dimension)
    }

    /// The number of vectors held.
    pub(super) fn len(&self) -> usize {
        self.place_of.len()
    }

    /// The list a vector belongs in.
    fn list_for(&mut self, vector: &[f32]) -> usize {
        if self.lists.is_empty() {
            self.lists.push(CodeList::default());
        }
        self.clusters.as_ref().map_or(0, |clusters| clusters.closest(vector))
    }

    /// Adds or replaces a vector, its int8 copy in `scratch` (one of another dimension than the
    /// first is ignored: the store refuses those before they are written).
    pub(super) fn insert(&mut self, thread_id: &str, seq: u64, vector: &[f32], scratch: &mut ScratchVectors) {
        if self.place_of.is_empty() {
            self.dimension = vector.len();
        }
        if vector.len() != self.dimension {
            return;
        }
        let thread = self.thread(thread_id);
        let width = self.width();
        let list = self.list_for(vector);
        let entries = &self.threads[thread as usize].entries;
        let at = entries.partition_point(|&other| self.seq_of[other as usize] < seq);
        if let Some(&entry) = entries.get(at).filter(|&&found| self.seq_of[found as usize] == seq) {
            let entry = entry as usize;
            self.take_out(entry);
            self.place_of[entry] = (index(list), self.lists[list].push(vector, width, index(entry)));
            let slot = &mut self.slot_of[entry];
            *slot = scratch.put((*slot != NO_SLOT).then_some(*slot), vector).unwrap_or(NO_SLOT);
            return;
        }
        let entry = index(self.len());
        self.threads[thread as usize].entries.insert(at, entry);
        self.place_of.push((index(list), self.lists[list].push(vector, width, entry)));
        self.thread_of.push(thread);
        self.seq_of.push(seq);
        self.slot_of.push(scratch.put(None, vector).unwrap_or(NO_SLOT));
    }

    /// Takes an entry's code out of its list (the entry keeps a stale place until it is given a
    /// new one).
    fn take_out(&mut self, entry: usize) {
        let width = self.width();
        let (list, place) = self.place_of[entry];
        if let Some(moved) = self.lists[list as usize].swap_remove(place as usize, width) {
            self.place_of[moved as usize] = (list, place);
        }
    }

    /// Clusters a resource grown to [`CLUSTER_FROM`] vectors, trains its clusters again when it
    /// has doubled or halved since, and drops them when it has shrunk below, moving the codes to
    /// the lists of their clusters: called once a load's or a write's vectors are all in, so
    /// that a load trains once.
    pub(super) fn keep_clustered(&mut self) {
        let count = self.len();
        let stale = self.clusters.as_ref().map_or(count >= CLUSTER_FROM, |clusters| clusters.stale(count));
        if !stale {
            return;
        }
        self.clusters = (count >= CLUSTER_FROM)
            .then(|| Clusters::train(self.dimension, count, |entry| self.decoded(entry)));
        let target = self.clusters.as_ref().map(|clusters| self.assigned(clusters));
        let list_of = |entry: u32| target.as_ref().map_or(0, |target| target[entry as usize] as usize);
        let width = self.width();
        // Each new list is made as large as it will be, so that moving into it never grows it.
        let mut sizes = vec![0usize; self.clusters.as_ref().map_or(1, Clusters::len)];
        for list in &self.lists {
            for &entry in &list.entries {
                sizes[list_of(entry)] += 1;
            }
        }
        let lists = sizes.iter().map(|&size| CodeList::with_capacity(size, width)).collect();
        let old = std::mem::replace(&mut self.lists, lists);
        for mut old_list in old {
            // From its end, a share at a time, each share's memory given back once moved: the
            // codes are never held twice.
            while !old_list.entries.is_empty() {
                let from = old_list.entries.len().saturating_sub(MOVED_AT_ONCE);
                for (place, &entry) in old_list.entries.iter().enumerate().skip(from) {
                    let list = list_of(entry);
                    let codes = &mut self.lists[list];
                    self.place_of[entry as usize] = (index(list), index(codes.entries.len()));
                    codes.codes.extend_from_slice(&old_list.codes[place * width..(place + 1) * width]);
                    codes.scales.push(old_list.scales[place]);
                    codes.entries.push(entry);
                }
                old_list.truncate(from, width);
            }
        }
    }

    /// An entry's vector, as its code holds it.
    fn decoded(&self, entry: usize) -> Vec<f32> {
        let width = self.width();
        let (list, place) = self.place_of[entry];
        let (codes, place) = (&self.lists[list as usize], place as usize);
        let mut vector = decode(&codes.codes[place * width..(place + 1) * width], codes.scales[place]);
        vector.truncate(self.dimension);
        vector
    }

    /// Each entry's closest cluster, the entries shared between the cores.
    fn assigned(&self, clusters: &Clusters) -> Vec<u32> {
        let count = self.len();
        let shares = shares_for(count, 0);
        let per_share = count.div_ceil(shares);
        let assigned = each_share(shares, |share| -> Vec<u32> {
            let entries = share * per_share..((share + 1) * per_share).min(count);
            entries.map(|entry| index(clusters.closest(&self.decoded(entry)))).collect()
        });
        assigned.concat()
    }

    /// The index of a thread, added if new.
    fn thread(&mut self, thread_id: &str) -> u32 {
        if let Some(&index) = self.thread_index.get(thread_id) {
            return index;
        }
        let index = u32::try_from(self.threads.len()).expect("fewer than 4 billion threads");
        self.threads.push(ThreadEntries { id: thread_id.to_owned(), entries: Vec::new() });
        // Held twice: in `threads` and as a key of `thread_index`.
        self.id_bytes += 2 * thread_id.len();
        self.thread_index.insert(thread_id.to_owned(), index);
        index
    }

    /// About how much memory these codes take, in bytes: the lists, the entries' places, threads,
    /// seqs and slots, the threads' entries, the thread ids with their map, and the centroids.
    pub(super) fn memory_bytes(&self) -> usize {
        const PER_ENTRY: usize = 8 + 4 + 8 + 4 + 4;
        const PER_THREAD: usize =
            2 * std::mem::size_of::<String>() + std::mem::size_of::<ThreadEntries>() + 16;
        self.lists.iter().map(CodeList::memory_bytes).sum::<usize>()
            + self.len() * PER_ENTRY
            + self.threads.len() * PER_THREAD
            + self.id_bytes
            + self.clusters.as_ref().map_or(0, Clusters::memory_bytes)
    }

    /// Gives every scratch slot back, before these vectors are dropped.
    pub(super) fn release(&self, scratch: &mut ScratchVectors) {
        for slot in self.slot_of.iter().filter(|slot| **slot != NO_SLOT) {
            scratch.free(*slot);
        }
    }

    /// Removes every vector of a thread, giving their scratch slots back.
    pub(super) fn remove_thread(&mut self, thread_id: &str, scratch: &mut ScratchVectors) {
        let Some(&removed) = self.thread_index.get(thread_id) else { return };
        if self.threads[removed as usize].entries.is_empty() {
            return;
        }
        // Entries are renumbered in order, skipping the removed.
        let mut renumbered: Vec<Option<u32>> = vec![None; self.len()];
        let mut kept = 0;
        for (entry, renumbered) in renumbered.iter_mut().enumerate() {
            if self.thread_of[entry] == removed {
                if self.slot_of[entry] != NO_SLOT {
                    scratch.free(self.slot_of[entry]);
                }
                continue;
            }
            *renumbered = Some(index(kept));
            self.place_of[kept] = self.place_of[entry];
            self.thread_of[kept] = self.thread_of[entry];
            self.seq_of[kept] = self.seq_of[entry];
            self.slot_of[kept] = self.slot_of[entry];
            kept += 1;
        }
        self.place_of.truncate(kept);
        self.thread_of.truncate(kept);
        self.seq_of.truncate(kept);
        self.slot_of.truncate(kept);
        let width = self.width();
        for (list, codes) in self.lists.iter_mut().enumerate() {
            let mut place = 0;
            while place < codes.entries.len() {
                let Some(entry) = renumbered[codes.entries[place] as usize] else {
                    // The last code moves here, to be looked at next.
                    codes.swap_remove(place, width);
                    continue;
                };
                codes.entries[place] = entry;
                self.place_of[entry as usize] = (index(list), index(place));
                place += 1;
            }
        }
        for thread in &mut self.threads {
            thread.entries.clear();
        }
        for entry in 0..kept {
            self.threads[self.thread_of[entry] as usize].entries.push(index(entry));
        }
        // Entries are in insertion order, which is not always seq order.
        let seq_of = &self.seq_of;
        for thread in &mut self.threads {
            thread.entries.sort_unstable_by_key(|&entry| seq_of[entry as usize]);
        }
        self.keep_clustered();
    }

    /// The `wanted` vectors whose codes score best against `query`, best first, optionally only
    /// within one thread, each with its score from `scratch` when it is there.
    pub(super) fn candidates(
        &self,
        query: &[f32],
        wanted: usize,
        thread: Option<&str>,
        scratch: &ScratchVectors,
    ) -> Vec<Candidate> {
        if query.len() != self.dimension || wanted == 0 || self.place_of.is_empty() {
            return Vec::new();
        }
        let code = QueryCode::new(query);
        let width = self.width();
        let score = |list: &CodeList, place: usize| {
            code.score(&list.codes[place * width..(place + 1) * width], list.scales[place])
        };
        let best = match thread {
            Some(thread_id) => {
                let Some(&thread) = self.thread_index.get(thread_id) else { return Vec::new() };
                let mut best = TopK::new(wanted);
                for &entry in &self.threads[thread as usize].entries {
                    let (list, place) = self.place_of[entry as usize];
                    best.offer(score(&self.lists[list as usize], place as usize), entry);
                }
                best
            }
            None => match &self.clusters {
                Some(clusters) => self.scan_lists(&clusters.probed(query), wanted, &code),
                None => self.scan_all(wanted, |place| score(&self.lists[0], place)),
            },
        };
        best.into_sorted()
            .into_iter()
            .map(|(_, entry)| {
                let entry = entry as usize;
                let slot = self.slot_of[entry];
                let score = (slot != NO_SLOT).then(|| scratch.score(slot, query)).flatten();
                (self.threads[self.thread_of[entry] as usize].id.clone(), self.seq_of[entry], score)
            })
            .collect()
    }

    /// The codes of `lists` scored, the best `wanted` kept (as entries); when there are many,
    /// the lists are shared between the cores.
    fn scan_lists(&self, lists: &[usize], wanted: usize, code: &QueryCode) -> TopK<u32> {
        let width = self.width();
        let scan = |lists: &[usize]| {
            let mut best = TopK::new(wanted);
            for list in lists {
                let codes = &self.lists[*list];
                let scored = codes.codes.chunks_exact(width).zip(&codes.scales).zip(&codes.entries);
                for ((one, scale), entry) in scored {
                    best.offer(code.score(one, *scale), *entry);
                }
            }
            best
        };
        let count: usize = lists.iter().map(|list| self.lists[*list].entries.len()).sum();
        let shares = shares_for(count, PARALLEL_LISTS_FROM);
        // Lists dealt out in turn, so that each share gets large and small ones.
        let dealt: Vec<Vec<usize>> =
            (0..shares).map(|share| lists.iter().skip(share).step_by(shares).copied().collect()).collect();
        in_shares(shares, wanted, |share| scan(&dealt[share]))
    }

    /// Every code of the one list of an unclustered resource scored, the best `wanted` kept (as
    /// entries); shared between the cores when large.
    fn scan_all(&self, wanted: usize, score: impl Fn(usize) -> f32 + Sync) -> TopK<u32> {
        let entries = &self.lists[0].entries;
        let count = entries.len();
        let shares = shares_for(count, PARALLEL_FROM);
        let per_share = count.div_ceil(shares);
        in_shares(shares, wanted, |share| {
            let mut best = TopK::new(wanted);
            let start = share * per_share;
            let end = ((share + 1) * per_share).min(count);
            for (offset, entry) in entries[start..end].iter().enumerate() {
                best.offer(score(start + offset), *entry);
            }
            best
        })
    }
}

/// How many threads work on `count` codes: one below `parallel_from`, else one a core, at most
/// [`MAX_SCAN_THREADS`].
fn shares_for(count: usize, parallel_from: usize) -> usize {
    if count < parallel_from {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |cores| cores.get()).min(MAX_SCAN_THREADS)
}

/// The best `wanted` of `shares` scans, the first on this thread and the others on their own.
fn in_shares(shares: usize, wanted: usize, scan: impl Fn(usize) -> TopK<u32> + Sync) -> TopK<u32> {
    if shares == 1 {
        return scan(0);
    }
    let mut best = TopK::new(wanted);
    for (score, entry) in each_share(shares, scan).into_iter().flat_map(TopK::into_sorted) {
        best.offer(score, entry);
    }
    best
}

/// `work` of each of `shares` shares, in order: the first on this thread, the others on their
/// own.
fn each_share<T: Send>(shares: usize, work: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let work = &work;
    std::thread::scope(|scope| {
        let others: Vec<_> = (1..shares).map(|share| scope.spawn(move || work(share))).collect();
        let mut done = vec![work(0)];
        done.extend(others.into_iter().map(|other| other.join().expect("share thread")));
        done
    })
}

/// The best `top_k` of exactly scored (thread, seq, score) candidates, at or above `threshold`,
/// best first.
pub(super) fn best_hits(
    scored: impl IntoIterator<Item = (String, u64, f32)>,
    top_k: usize,
    threshold: Option<f32>,
) -> Vec<Hit> {
    let mut hits: Vec<Hit> = scored
        .into_iter()
        .filter(|(_, _, score)| threshold.is_none_or(|threshold| *score >= threshold))
        .map(|(thread_id, seq, score)| Hit { thread_id, seq, score })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
    hits.truncate(top_k);
    hits
}

/// The `k` best (score, item) pairs seen so far.
pub(super) struct TopK<T = usize> {
    k: usize,
    best: Vec<(f32, T)>,
}

impl<T> TopK<T> {
    /// Keeps the best `k`.
    pub(super) fn new(k: usize) -> TopK<T> {
        TopK { k, best: Vec::with_capacity(k + 1) }
    }

    /// Whether an item of this score would be kept now.
    pub(super) fn admits(&self, score: f32) -> bool {
        self.k > 0 && (self.best.len() < self.k || self.best.last().is_some_and(|(worst, _)| score > *worst))
    }

    /// Offers one scored item.
    pub(super) fn offer(&mut self, score: f32, item: T) {
        if !self.admits(score) {
            return;
        }
        let position = self.best.partition_point(|(other, _)| *other >= score);
        self.best.insert(position, (score, item));
        self.best.truncate(self.k);
    }

    /// Best first.
    pub(super) fn into_sorted(self) -> Vec<(f32, T)> {
        self.best
    }
}

#[cfg(test)]
mod tests {
    use super::super::vector_codes::dot;
    use super::*;

    /// Random unit vectors of `dimension`, deterministic.
    fn random_units(dimension: usize, count: usize) -> Vec<Vec<f32>> {
        let mut state = 7u64;
        (0..count)
            .map(|_| {
                let vector: Vec<f32> = (0..dimension)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect();
                let norm = dot(&vector, &vector).sqrt();
                vector.into_iter().map(|v| v / norm).collect()
            })
            .collect()
    }

    /// The candidates' threads and seqs.
    fn ids(candidates: Vec<Candidate>) -> Vec<(String, u64)> {
        candidates.into_iter().map(|(thread, seq, _)| (thread, seq)).collect()
    }

    /// Candidates rank by their codes, honour the thread filter, and follow overwrites and a
    /// thread's removal.
    #[test]
    fn candidates_rank_filter_and_follow_writes() {
        let mut scratch = ScratchVectors::create(None);
        let mut vectors = ResourceVectors::default();
        vectors.insert("a", 0, &[1.0, 0.0], &mut scratch);
        vectors.insert("a", 1, &[0.6, 0.8], &mut scratch);
        vectors.insert("b", 0, &[0.0, 1.0], &mut scratch);
        assert_eq!(
            ids(vectors.candidates(&[1.0, 0.0], 2, None, &scratch)),
            [("a".into(), 0), ("a".into(), 1)]
        );
        assert_eq!(ids(vectors.candidates(&[0.0, 1.0], 5, Some("b"), &scratch)), [("b".into(), 0)]);
        assert!(ids(vectors.candidates(&[0.0, 1.0], 5, Some("c"), &scratch)).is_empty());
        vectors.insert("a", 0, &[0.0, -1.0], &mut scratch);
        assert_eq!(vectors.len(), 3, "an overwrite adds nothing");
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 1, None, &scratch)), [("a".into(), 1)]);
        vectors.remove_thread("a", &mut scratch);
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 5, None, &scratch)), [("b".into(), 0)]);
        vectors.insert("a", 5, &[1.0, 0.0], &mut scratch);
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 5, Some("a"), &scratch)), [("a".into(), 5)]);
    }

    /// Rescoring the candidates of a large resource (scanned in shares) finds what an exact
    /// scan finds.
    #[test]
    fn rescored_candidates_match_an_exact_scan() {
        let dimension = 64;
        let corpus = random_units(dimension, PARALLEL_FROM + 500);
        let mut scratch = ScratchVectors::create(None);
        let mut vectors = ResourceVectors::default();
        for (seq, vector) in corpus.iter().enumerate() {
            vectors.insert("t", seq as u64, vector, &mut scratch);
        }
        for query in random_units(dimension + 1, 5) {
            let query = &query[..dimension];
            let rescored = best_hits(
                ids(vectors.candidates(query, 5 * CANDIDATES_PER_HIT, None, &scratch))
                    .into_iter()
                    .map(|(thread, seq)| (thread, seq, dot(query, &corpus[seq as usize]))),
                5,
                None,
            );
            let mut exact: Vec<(f32, u64)> =
                corpus.iter().enumerate().map(|(seq, vector)| (dot(query, vector), seq as u64)).collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let exact: Vec<u64> = exact.iter().take(5).map(|(_, seq)| *seq).collect();
            assert_eq!(rescored.iter().map(|hit| hit.seq).collect::<Vec<_>>(), exact);
        }
    }

    /// The candidate the scratch file scores best.
    fn best_scored(candidates: Vec<Candidate>) -> Option<(String, u64)> {
        let best =
            candidates.into_iter().max_by(|a, b| a.2.unwrap_or(f32::MIN).total_cmp(&b.2.unwrap_or(f32::MIN)));
        best.map(|(thread, seq, _)| (thread, seq))
    }

    /// Every entry's place names it in its list, and the lists hold every entry once.
    fn assert_consistent(vectors: &ResourceVectors) {
        let held: usize = vectors.lists.iter().map(|list| list.entries.len()).sum();
        assert_eq!(held, vectors.len());
        for (entry, (list, place)) in vectors.place_of.iter().enumerate() {
            assert_eq!(vectors.lists[*list as usize].entries[*place as usize] as usize, entry);
        }
    }

    /// A resource past [`CLUSTER_FROM`] is clustered and its searches scan only some lists, yet
    /// find a query's exact best (rescored from the scratch file's scores, which are close to
    /// exact); an overwrite moves a vector to its new cluster, a thread's removal gives its slots
    /// back, and the places stay consistent through both.
    #[test]
    fn a_clustered_resource_finds_the_exact_best() {
        let dimension = 64;
        let directory = tempfile::tempdir().expect("temp dir");
        let mut scratch = ScratchVectors::create(Some(directory.path()));
        let corpus = random_units(dimension, CLUSTER_FROM + 4_000);
        let axis = |group: usize| -> Vec<f32> {
            (0..dimension).map(|d| if d == group { 1.0 } else { 0.0 }).collect()
        };
        // Each vector leans towards one of eight topics, so that the resource has clusters.
        let topics: Vec<Vec<f32>> =
            random_units(dimension + 1, 8).into_iter().map(|topic| topic[..dimension].to_vec()).collect();
        let mut leaning: Vec<Vec<f32>> = corpus
            .iter()
            .enumerate()
            .map(|(index, vector)| {
                let leaned: Vec<f32> =
                    vector.iter().zip(&topics[index % 8]).map(|(value, topic)| 0.6 * value + topic).collect();
                let norm = dot(&leaned, &leaned).sqrt();
                leaned.into_iter().map(|value| value / norm).collect()
            })
            .collect();
        let mut vectors = ResourceVectors::default();
        for (index, vector) in leaning.iter().enumerate() {
            vectors.insert(&format!("t{}", index % 4), (index / 4) as u64, vector, &mut scratch);
        }
        scratch.flush();
        vectors.keep_clustered();
        assert!(vectors.clusters.is_some() && vectors.lists.len() > 1);
        assert_consistent(&vectors);
        let exact_best = |leaning: &[Vec<f32>], query: &[f32], removed: Option<usize>| {
            (0..leaning.len())
                .filter(|index| Some(index % 4) != removed)
                .max_by(|a, b| dot(query, &leaning[*a]).total_cmp(&dot(query, &leaning[*b])))
                .map(|index| (format!("t{}", index % 4), (index / 4) as u64))
        };
        for topic in 0..8 {
            let query = &leaning[topic + 800];
            let candidates = vectors.candidates(query, CANDIDATES_PER_HIT, None, &scratch);
            for (thread, seq, score) in &candidates {
                let index = *seq as usize * 4 + thread[1..].parse::<usize>().expect("t<n>");
                let exact = dot(query, &leaning[index]);
                assert!(
                    (score.expect("scored from the scratch file") - exact).abs() < 0.02,
                    "{score:?} vs {exact}"
                );
            }
            assert_eq!(best_scored(candidates), exact_best(&leaning, query, None));
        }

        let moved = axis(3);
        vectors.insert("t0", 0, &moved, &mut scratch);
        scratch.flush();
        leaning[0] = moved.clone();
        assert_consistent(&vectors);
        assert_eq!(ids(vectors.candidates(&moved, 1, None, &scratch)), [("t0".to_owned(), 0)]);

        vectors.remove_thread("t1", &mut scratch);
        assert_consistent(&vectors);
        assert_eq!(vectors.len(), leaning.len() - leaning.len() / 4);
        let query = &leaning[802];
        let found = vectors.candidates(query, CANDIDATES_PER_HIT, None, &scratch);
        assert!(found.iter().all(|(thread, _, _)| thread != "t1"));
        assert_eq!(best_scored(found), exact_best(&leaning, query, Some(1)));
        let reused = scratch.put(None, &moved).expect("a slot");
        assert!(reused < u32::try_from(leaning.len()).expect("small"), "a freed slot is handed out again");
    }

    /// The best hits are ordered, cut at top k, and under the threshold dropped.
    #[test]
    fn best_hits_order_cut_and_threshold() {
        let scored = [("a".to_owned(), 0, 0.2), ("a".to_owned(), 1, 0.9), ("b".to_owned(), 0, 0.5)];
        let hits = best_hits(scored.clone(), 2, None);
        assert_eq!(hits.iter().map(|hit| hit.seq).collect::<Vec<_>>(), [1, 0]);
        assert_eq!(hits[1].thread_id, "b");
        assert_eq!(best_hits(scored, 5, Some(0.4)).len(), 2);
    }
}
