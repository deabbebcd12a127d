//! The in-memory codes of one resource's vectors, for recall's scan. Loaded from the `vectors`
//! tree on the resource's first search and kept in step by the writes, so sled stays the source
//! of truth: the scan ranks the vectors by their four-bit codes and names the best candidates,
//! scored again from their int8 copies in the scratch file and exactly from their stored f32
//! vectors by the store ([`best_hits`]).
//!
//! The codes are kept in lists, one per cluster of a large resource ([`Clusters`]) and a single
//! one for a small one, each list's codes contiguous so that a scan reads them in order. A small
//! resource's codes are four-bit ([`encode`]: 192 bytes at 384 dimensions, about 230 a message
//! with its scale, thread, seq and the places that find it); a clustered one's are product codes
//! of their residuals (48 bytes, about 80 a message), so a million messages of one resource take
//! about 80 MB.

use std::collections::HashMap;

use super::Hit;
use super::vector_clusters::{CLUSTER_FROM, ClusterQuery, Clusters};
use super::vector_codes::{QueryCode, code_bytes, decode, encode};
use super::vector_quantizer::code_bytes as product_code_bytes;
use super::vector_scratch::{ScratchVectors, ScratchWriter, VectorRoom};

/// Candidates scored again, per hit asked for, from a scan of up to [`SCANNED_PER_WIDENING`]
/// codes: the codes' ranking puts the exact top 3 of 100,000 chat-like messages among its best
/// 96 in about 98 of 100 cases (BENCHMARKS.md).
pub(super) const CANDIDATES_PER_HIT: usize = 32;
/// A clustered scan of more codes than this asks for more candidates, in proportion: the more
/// codes crowd the probed lists, the further down the codes' ranking the exact best falls (at a
/// million messages a scan reads about 62,000 codes, and 32 candidates a hit found about 95 of
/// the exact top 3 in 100; about 60 find 97).
const SCANNED_PER_WIDENING: usize = 32_768;
/// Candidates read from sled and scored exactly, per hit asked for, of those the scratch file
/// scored: its int8 copies rank the true best of the candidates within their best 12.
pub(super) const EXACT_PER_HIT: usize = 4;
/// From this many vectors on, an unclustered scan is shared between the cores.
const PARALLEL_FROM: usize = 50_000;
/// From this many codes in the probed lists on, a clustered scan is shared between the cores.
const PARALLEL_LISTS_FROM: usize = 8_192;
/// The most threads a scan uses.
const MAX_SCAN_THREADS: usize = 4;
/// The slot of an entry not in the scratch file.
const NO_SLOT: u32 = u32::MAX;
/// The list of an entry whose code is deferred ([`ResourceVectors::load`]).
const UNPLACED: u32 = u32::MAX;

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
    /// Each entry's list and place in it; [`UNPLACED`] for a loaded entry whose code is made
    /// once the load is done.
    place_of: Vec<(u32, u32)>,
    /// How many entries are unplaced.
    deferred: usize,
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
    /// Removes the code at `place` by moving the last one there; returns the entry moved, if any.
    fn swap_remove(&mut self, place: usize, width: usize) -> Option<u32> {
        let last = self.entries.len() - 1;
        self.codes.copy_within(last * width..(last + 1) * width, place * width);
        self.codes.truncate(last * width);
        if !self.scales.is_empty() {
            self.scales.swap_remove(place);
        }
        self.entries.swap_remove(place);
        (place < last).then(|| self.entries[place])
    }

    fn memory_bytes(&self) -> usize {
        self.codes.capacity() + 4 * self.scales.capacity() + 4 * self.entries.capacity()
    }
}

/// A query prepared for the codes of a resource.
enum QueryCodes {
    /// For four-bit codes.
    Scalar(QueryCode),
    /// For product codes of residuals.
    Clustered(ClusterQuery),
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
        self.width_under(self.clusters.as_ref())
    }

    /// The bytes of one code under `clusters`: a product code, or a four-bit one when `None`.
    fn width_under(&self, clusters: Option<&Clusters>) -> usize {
        clusters.map_or_else(|| code_bytes(self.dimension), Clusters::code_bytes)
    }

    /// Encodes `vector` for `entry` at the end of `list`; returns its place.
    fn push(&mut self, list: usize, vector: &[f32], entry: usize) -> (u32, u32) {
        let width = self.width();
        let codes = &mut self.lists[list];
        let place = index(codes.entries.len());
        let at = codes.codes.len();
        codes.codes.resize(at + width, 0);
        let code = &mut codes.codes[at..];
        match &self.clusters {
            Some(clusters) => clusters.encode(list, vector, code),
            None => codes.scales.push(encode(vector, code)),
        }
        codes.entries.push(index(entry));
        (index(list), place)
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
    pub(super) fn insert(
        &mut self,
        thread_id: &str,
        seq: u64,
        vector: &[f32],
        scratch: &mut ScratchWriter<'_>,
    ) {
        self.add(thread_id, seq, vector, scratch, false);
    }

    /// Adds a vector read by a load, its int8 copy in `scratch`; its code is made from that
    /// copy by [`Self::finish_load`], once every vector is in and the codes they need are known,
    /// so a load never holds a code it is about to throw away (four-bit codes of a resource that
    /// turns out to be clustered: 192 MB at a million). Without a copy it is encoded at once.
    pub(super) fn load(
        &mut self,
        thread_id: &str,
        seq: u64,
        vector: &[f32],
        scratch: &mut ScratchWriter<'_>,
    ) {
        self.add(thread_id, seq, vector, scratch, true);
    }

    /// [`Self::insert`], or [`Self::load`] when `defer`.
    fn add(
        &mut self,
        thread_id: &str,
        seq: u64,
        vector: &[f32],
        scratch: &mut ScratchWriter<'_>,
        defer: bool,
    ) {
        if self.place_of.is_empty() {
            self.dimension = vector.len();
        }
        if vector.len() != self.dimension {
            return;
        }
        let thread = self.thread(thread_id);
        let list = self.list_for(vector);
        let entries = &self.threads[thread as usize].entries;
        let at = entries.partition_point(|&other| self.seq_of[other as usize] < seq);
        if let Some(&entry) = entries.get(at).filter(|&&found| self.seq_of[found as usize] == seq) {
            let entry = entry as usize;
            self.take_out(entry);
            self.place_of[entry] = self.push(list, vector, entry);
            let slot = &mut self.slot_of[entry];
            *slot = scratch.put((*slot != NO_SLOT).then_some(*slot), vector).unwrap_or(NO_SLOT);
            return;
        }
        let entry = self.len();
        self.threads[thread as usize].entries.insert(at, index(entry));
        let slot = scratch.put(None, vector).unwrap_or(NO_SLOT);
        let place = if defer && slot != NO_SLOT {
            self.deferred += 1;
            (UNPLACED, 0)
        } else {
            self.push(list, vector, entry)
        };
        self.place_of.push(place);
        self.thread_of.push(thread);
        self.seq_of.push(seq);
        self.slot_of.push(slot);
    }

    /// Takes an entry's code out of its list (the entry keeps a stale place until it is given a
    /// new one).
    fn take_out(&mut self, entry: usize) {
        let width = self.width();
        let (list, place) = self.place_of[entry];
        if list == UNPLACED {
            self.deferred -= 1;
            return;
        }
        if let Some(moved) = self.lists[list as usize].swap_remove(place as usize, width) {
            self.place_of[moved as usize] = (list, place);
        }
    }

    /// Clusters a resource grown to [`CLUSTER_FROM`] vectors, trains its clusters again when it
    /// has doubled or halved since, and drops them when it has shrunk below, encoding every
    /// vector anew for its list (from its int8 copy in `scratch` where it has one, so that codes
    /// are never made from codes): called once a write's vectors are all in.
    pub(super) fn keep_clustered(&mut self, scratch: &mut ScratchWriter<'_>) {
        let encoded = self.encode_when_due(scratch);
        debug_assert!(encoded, "only a load defers codes, and a write's vectors decode");
    }

    /// Ends a load: clusters the resource if it is large enough (trained once, on all it holds)
    /// and makes the deferred codes from their copies in `scratch`. `false` when those copies
    /// cannot be read back (the scratch file was given up under the load): nothing is changed
    /// then, and the load should be made again with [`Self::insert`].
    pub(super) fn finish_load(&mut self, scratch: &mut ScratchWriter<'_>) -> bool {
        self.encode_when_due(scratch)
    }

    /// [`Self::keep_clustered`], and the deferred codes made; `false` when they cannot be.
    fn encode_when_due(&mut self, scratch: &mut ScratchWriter<'_>) -> bool {
        let count = self.len();
        let stale = self.clusters.as_ref().map_or(count >= CLUSTER_FROM, |clusters| clusters.stale(count));
        if !stale && self.deferred == 0 {
            return true;
        }
        scratch.flush();
        let scratch = scratch.scratch();
        let clusters = if count >= CLUSTER_FROM {
            let Some(clusters) =
                Clusters::train(self.dimension, count, |entry| self.vector_of(entry, scratch))
            else {
                return false;
            };
            Some(clusters)
        } else {
            None
        };
        let Some(lists) = self.encoded_lists(clusters.as_ref(), scratch) else { return false };
        self.lists = lists;
        self.clusters = clusters;
        self.deferred = 0;
        for (list, codes) in self.lists.iter().enumerate() {
            for (place, entry) in codes.entries.iter().enumerate() {
                self.place_of[*entry as usize] = (index(list), index(place));
            }
        }
        true
    }

    /// Every entry encoded under `clusters` (four-bit codes in one list when `None`), in lists
    /// sized exactly, each in order of entry: every entry's list found first, then each list's
    /// codes made, both shared between the cores. The lists are allocated here and only filled
    /// by the other threads, whose allocator arenas so hold nothing once they are done. `None`
    /// when a deferred entry's vector cannot be read.
    fn encoded_lists(&self, clusters: Option<&Clusters>, scratch: &ScratchVectors) -> Option<Vec<CodeList>> {
        let count = self.len();
        let shares = shares_for(count, 0);
        let per_share = count.div_ceil(shares);
        let assigned: Vec<Vec<u32>> = each_share(shares, |share| {
            let entries = (share * per_share).min(count)..((share + 1) * per_share).min(count);
            let Some(clusters) = clusters else { return Some(vec![0; entries.len()]) };
            let mut room = VectorRoom::default();
            entries
                .map(|entry| {
                    self.read_vector(entry, scratch, &mut room).then(|| index(clusters.closest(&room.vector)))
                })
                .collect()
        })
        .into_iter()
        .collect::<Option<_>>()?;
        let mut sizes = vec![0usize; clusters.map_or(1, Clusters::len)];
        for list in assigned.iter().flatten() {
            sizes[*list as usize] += 1;
        }
        let width = self.width_under(clusters);
        let mut lists: Vec<CodeList> = sizes
            .iter()
            .map(|&size| CodeList {
                codes: vec![0; size * width],
                scales: vec![0.0; if clusters.is_some() { 0 } else { size }],
                entries: Vec::with_capacity(size),
            })
            .collect();
        for (entry, list) in assigned.into_iter().flatten().enumerate() {
            lists[list as usize].entries.push(index(entry));
        }
        // Lists dealt out in turn, so that each share gets large and small ones.
        let mut dealt: Vec<Vec<(usize, &mut CodeList)>> = (0..shares).map(|_| Vec::new()).collect();
        for (list, codes) in lists.iter_mut().enumerate() {
            dealt[list % shares].push((list, codes));
        }
        let filled = each_owned(dealt, |mine| {
            let mut room = VectorRoom::default();
            for (list, codes) in mine {
                for (at, &entry) in codes.entries.iter().enumerate() {
                    if !self.read_vector(entry as usize, scratch, &mut room) {
                        return false;
                    }
                    let code = &mut codes.codes[at * width..(at + 1) * width];
                    match clusters {
                        Some(clusters) => clusters.encode(list, &room.vector, code),
                        None => codes.scales[at] = encode(&room.vector, code),
                    }
                }
            }
            true
        });
        filled.into_iter().all(|filled| filled).then_some(lists)
    }

    /// Reads an entry's vector into `room.vector`: from its int8 copy in `scratch` when it has
    /// one, else as its code holds it; `false` for a deferred entry whose copy cannot be read.
    fn read_vector(&self, entry: usize, scratch: &ScratchVectors, room: &mut VectorRoom) -> bool {
        let slot = self.slot_of[entry];
        if slot != NO_SLOT && scratch.read_vector(slot, room) {
            return true;
        }
        if self.place_of[entry].0 == UNPLACED {
            return false;
        }
        room.vector = self.decoded(entry);
        true
    }

    /// An entry's vector ([`Self::read_vector`]).
    fn vector_of(&self, entry: usize, scratch: &ScratchVectors) -> Option<Vec<f32>> {
        let mut room = VectorRoom::default();
        self.read_vector(entry, scratch, &mut room).then_some(room.vector)
    }

    /// An entry's vector, as its code holds it (the entry placed).
    fn decoded(&self, entry: usize) -> Vec<f32> {
        let width = self.width();
        let (list, place) = self.place_of[entry];
        let (codes, place) = (&self.lists[list as usize], place as usize);
        let code = &codes.codes[place * width..(place + 1) * width];
        let mut vector = match &self.clusters {
            Some(clusters) => clusters.decode(list as usize, code),
            None => decode(code, codes.scales[place]),
        };
        vector.truncate(self.dimension);
        vector
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
    /// seqs and slots, the threads' entries, the thread ids with their map, and the centroids;
    /// with the codes deferred entries will take once made.
    pub(super) fn memory_bytes(&self) -> usize {
        const PER_ENTRY: usize = 8 + 4 + 8 + 4 + 4;
        const PER_THREAD: usize =
            2 * std::mem::size_of::<String>() + std::mem::size_of::<ThreadEntries>() + 16;
        let deferred_code = if self.len() >= CLUSTER_FROM {
            product_code_bytes(self.dimension)
        } else {
            code_bytes(self.dimension) + 4
        };
        self.lists.iter().map(CodeList::memory_bytes).sum::<usize>()
            + self.deferred * (deferred_code + 4)
            + self.len() * PER_ENTRY
            + self.threads.len() * PER_THREAD
            + self.id_bytes
            + self.clusters.as_ref().map_or(0, Clusters::memory_bytes)
    }

    /// Gives every scratch slot back, before these vectors are dropped.
    pub(super) fn release(&self, scratch: &ScratchVectors) {
        for slot in self.slot_of.iter().filter(|slot| **slot != NO_SLOT) {
            scratch.free(*slot);
        }
    }

    /// Removes every vector of a thread, giving their scratch slots back.
    pub(super) fn remove_thread(&mut self, thread_id: &str, scratch: &mut ScratchWriter<'_>) {
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
                    scratch.scratch().free(self.slot_of[entry]);
                }
                if self.place_of[entry].0 == UNPLACED {
                    self.deferred -= 1;
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
        self.keep_clustered(scratch);
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
        let codes = match &self.clusters {
            Some(clusters) => QueryCodes::Clustered(clusters.query(query)),
            None => QueryCodes::Scalar(QueryCode::new(query)),
        };
        let best = match (thread, &codes, &self.clusters) {
            (Some(thread_id), _, _) => {
                let Some(&thread) = self.thread_index.get(thread_id) else { return Vec::new() };
                let mut best = TopK::new(wanted);
                for &entry in &self.threads[thread as usize].entries {
                    let (list, place) = self.place_of[entry as usize];
                    best.offer(self.score(&codes, list as usize, place as usize), entry);
                }
                best
            }
            (None, QueryCodes::Clustered(scorer), Some(clusters)) => {
                self.scan_lists(&clusters.probed(query), wanted, scorer)
            }
            (None, _, _) => self.scan_all(wanted, |place| self.score(&codes, 0, place)),
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

    /// The approximate score of the code at `place` of `list`.
    fn score(&self, codes: &QueryCodes, list: usize, place: usize) -> f32 {
        let width = self.width();
        let held = &self.lists[list];
        let code = &held.codes[place * width..(place + 1) * width];
        match codes {
            QueryCodes::Scalar(scalar) => scalar.score(code, held.scales[place]),
            QueryCodes::Clustered(clustered) => clustered.score(list, code),
        }
    }

    /// The codes of `lists` of a clustered resource scored, the best `wanted` kept (as
    /// entries), more when the lists hold more than [`SCANNED_PER_WIDENING`] codes; when there
    /// are many, the lists are shared between the cores.
    fn scan_lists(&self, lists: &[usize], wanted: usize, scorer: &ClusterQuery) -> TopK<u32> {
        let count: usize = lists.iter().map(|list| self.lists[*list].entries.len()).sum();
        let wanted = wanted.max(wanted * count / SCANNED_PER_WIDENING);
        let width = self.width();
        let scan = |lists: &[usize]| {
            let mut best = TopK::new(wanted);
            for &list in lists {
                let codes = &self.lists[list];
                for (code, entry) in codes.codes.chunks_exact(width).zip(&codes.entries) {
                    best.offer(scorer.score(list, code), *entry);
                }
            }
            best
        };
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
    each_owned((0..shares).collect(), work)
}

/// `work` on each of `shares`, in order: the first on this thread, the others on their own.
fn each_owned<S: Send, T: Send>(shares: Vec<S>, work: impl Fn(S) -> T + Sync) -> Vec<T> {
    let work = &work;
    let mut shares = shares.into_iter();
    let Some(first) = shares.next() else { return Vec::new() };
    std::thread::scope(|scope| {
        let others: Vec<_> = shares.map(|share| scope.spawn(move || work(share))).collect();
        let mut done = vec![work(first)];
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
        let scratch = ScratchVectors::create(None);
        let mut writer = scratch.writer();
        let mut vectors = ResourceVectors::default();
        vectors.insert("a", 0, &[1.0, 0.0], &mut writer);
        vectors.insert("a", 1, &[0.6, 0.8], &mut writer);
        vectors.insert("b", 0, &[0.0, 1.0], &mut writer);
        assert_eq!(
            ids(vectors.candidates(&[1.0, 0.0], 2, None, &scratch)),
            [("a".into(), 0), ("a".into(), 1)]
        );
        assert_eq!(ids(vectors.candidates(&[0.0, 1.0], 5, Some("b"), &scratch)), [("b".into(), 0)]);
        assert!(ids(vectors.candidates(&[0.0, 1.0], 5, Some("c"), &scratch)).is_empty());
        vectors.insert("a", 0, &[0.0, -1.0], &mut writer);
        assert_eq!(vectors.len(), 3, "an overwrite adds nothing");
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 1, None, &scratch)), [("a".into(), 1)]);
        vectors.remove_thread("a", &mut writer);
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 5, None, &scratch)), [("b".into(), 0)]);
        vectors.insert("a", 5, &[1.0, 0.0], &mut writer);
        assert_eq!(ids(vectors.candidates(&[1.0, 0.0], 5, Some("a"), &scratch)), [("a".into(), 5)]);
    }

    /// Rescoring the candidates of a large resource (scanned in shares) finds what an exact
    /// scan finds.
    #[test]
    fn rescored_candidates_match_an_exact_scan() {
        let dimension = 64;
        let corpus = random_units(dimension, PARALLEL_FROM + 500);
        let scratch = ScratchVectors::create(None);
        let mut writer = scratch.writer();
        let mut vectors = ResourceVectors::default();
        for (seq, vector) in corpus.iter().enumerate() {
            vectors.insert("t", seq as u64, vector, &mut writer);
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
        let scratch = ScratchVectors::create(Some(directory.path()));
        let mut writer = scratch.writer();
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
            vectors.load(&format!("t{}", index % 4), (index / 4) as u64, vector, &mut writer);
        }
        assert!(vectors.finish_load(&mut writer));
        assert!(vectors.clusters.is_some() && vectors.lists.len() > 1);
        assert_consistent(&vectors);
        assert_eq!(vectors.width(), dimension / 8, "product codes of a byte per eight components");
        let per_entry = vectors.memory_bytes() / vectors.len();
        assert!(per_entry < 60, "{per_entry} bytes an entry");
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
        vectors.insert("t0", 0, &moved, &mut writer);
        writer.flush();
        leaning[0] = moved.clone();
        assert_consistent(&vectors);
        let found = vectors.candidates(&moved, CANDIDATES_PER_HIT, None, &scratch);
        assert_eq!(best_scored(found), Some(("t0".to_owned(), 0)), "found in its new cluster");

        vectors.remove_thread("t1", &mut writer);
        assert_consistent(&vectors);
        assert_eq!(vectors.len(), leaning.len() - leaning.len() / 4);
        let query = &leaning[802];
        let found = vectors.candidates(query, CANDIDATES_PER_HIT, None, &scratch);
        assert!(found.iter().all(|(thread, _, _)| thread != "t1"));
        assert_eq!(best_scored(found), exact_best(&leaning, query, Some(1)));
        let reused = writer.put(None, &moved).expect("a slot");
        assert!(reused < u32::try_from(leaning.len()).expect("small"), "a freed slot is handed out again");
    }

    /// A load defers its codes to the scratch file's copies, counting them in its memory, and
    /// makes them when it is finished; one whose scratch file is given up before that cannot
    /// finish and changes nothing, and loaded again without the file it encodes as it reads.
    #[test]
    fn a_load_defers_its_codes_to_the_scratch_file() {
        let directory = tempfile::tempdir().expect("temp dir");
        let scratch = ScratchVectors::create(Some(directory.path()));
        let mut writer = scratch.writer();
        let corpus = random_units(16, 100);
        let load = |vectors: &mut ResourceVectors, writer: &mut ScratchWriter<'_>| {
            for (seq, vector) in corpus.iter().enumerate() {
                vectors.load("t", seq as u64, vector, writer);
            }
        };
        let mut vectors = ResourceVectors::default();
        load(&mut vectors, &mut writer);
        assert_eq!(vectors.deferred, corpus.len());
        assert!(vectors.lists.iter().all(|list| list.codes.is_empty()));
        let estimated = vectors.memory_bytes();
        assert!(vectors.finish_load(&mut writer));
        assert_consistent(&vectors);
        assert_eq!(vectors.deferred, 0);
        assert_eq!(vectors.memory_bytes(), estimated, "the estimate is what the codes take");
        assert_eq!(best_scored(vectors.candidates(&corpus[7], 3, None, &scratch)), Some(("t".into(), 7)));

        let mut failed = ResourceVectors::default();
        load(&mut failed, &mut writer);
        scratch.give_up();
        assert!(!failed.finish_load(&mut writer));
        assert_eq!(failed.deferred, corpus.len(), "nothing changed");
        assert!(failed.candidates(&corpus[7], 3, None, &scratch).is_empty());
        failed.release(&scratch);
        let mut again = ResourceVectors::default();
        load(&mut again, &mut writer);
        assert_eq!(again.deferred, 0, "without a scratch file, encoded as read");
        assert!(again.finish_load(&mut writer));
        assert_eq!(ids(again.candidates(&corpus[7], 1, None, &scratch)), [("t".into(), 7)]);
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
