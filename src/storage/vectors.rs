//! The in-memory codes of one resource's vectors, for recall's scan. Loaded from the `vectors`
//! tree on the resource's first search and kept in step by the writes, so sled stays the source
//! of truth: the scan ranks every vector by its four-bit code and names the best candidates,
//! which the store rescores exactly from their stored f32 vectors ([`best_hits`]).
//!
//! A message costs about 210 bytes here with 384 dimensions (its code, scale, thread and seq),
//! a ninth of an f32 and int8 copy, so a million messages of one resource fit in memory.

use std::collections::HashMap;

use super::Hit;
use super::vector_codes::{QueryCode, code_bytes, encode};

/// Candidates rescored exactly, per hit asked for: the codes' ranking finds the exact top 3 of
/// 100,000 chat-like messages among its best 192 in about 97 of 100 cases (BENCHMARKS.md).
pub(super) const CANDIDATES_PER_HIT: usize = 64;
/// From this many vectors on, the scan is shared between the cores.
const PARALLEL_FROM: usize = 50_000;
/// The most threads a scan uses.
const MAX_SCAN_THREADS: usize = 4;

/// The codes of one resource's vectors.
#[derive(Debug, Default)]
pub(super) struct ResourceVectors {
    /// The dimension of every vector here.
    dimension: usize,
    /// The codes, contiguous: entry `i` is `codes[i * width..(i + 1) * width]`.
    codes: Vec<u8>,
    /// The scale of each code.
    scales: Vec<f32>,
    /// Each entry's thread, an index into `threads`.
    thread_of: Vec<u32>,
    /// Each entry's seq in its thread.
    seq_of: Vec<u64>,
    /// The threads' ids and their entries.
    threads: Vec<ThreadEntries>,
    /// Where each thread is in `threads`.
    thread_index: HashMap<String, u32>,
    /// The bytes of the thread ids, kept as threads are added so that [`Self::memory_bytes`],
    /// asked after every write, does not walk the threads.
    id_bytes: usize,
}

/// One thread's entries, by seq.
#[derive(Debug)]
struct ThreadEntries {
    id: String,
    /// (seq, entry), sorted by seq.
    entries: Vec<(u64, u32)>,
}

impl ResourceVectors {
    /// The bytes of one code.
    fn width(&self) -> usize {
        code_bytes(self.dimension)
    }

    /// The number of vectors held.
    pub(super) fn len(&self) -> usize {
        self.scales.len()
    }

    /// Adds or replaces a vector (one of another dimension than the first is ignored: the store
    /// refuses those before they are written).
    pub(super) fn insert(&mut self, thread_id: &str, seq: u64, vector: &[f32]) {
        if self.scales.is_empty() {
            self.dimension = vector.len();
        }
        if vector.len() != self.dimension {
            return;
        }
        let thread = self.thread(thread_id);
        let width = self.width();
        let entries = &mut self.threads[thread as usize].entries;
        let at = entries.partition_point(|(other, _)| *other < seq);
        let entry = match entries.get(at) {
            Some(&(found, entry)) if found == seq => entry as usize,
            _ => {
                let entry = self.scales.len();
                entries.insert(at, (seq, u32::try_from(entry).expect("fewer than 4 billion vectors")));
                self.codes.resize(self.codes.len() + width, 0);
                self.scales.push(1.0);
                self.thread_of.push(thread);
                self.seq_of.push(seq);
                entry
            }
        };
        self.scales[entry] = encode(vector, &mut self.codes[entry * width..(entry + 1) * width]);
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

    /// About how much memory these codes take, in bytes: codes, scales, the entries' threads
    /// and seqs (twice: by entry and by thread), and the thread ids with their map.
    pub(super) fn memory_bytes(&self) -> usize {
        const PER_ENTRY: usize = 4 + 4 + 8 + std::mem::size_of::<(u64, u32)>();
        const PER_THREAD: usize =
            2 * std::mem::size_of::<String>() + std::mem::size_of::<ThreadEntries>() + 16;
        self.codes.len() + self.len() * PER_ENTRY + self.threads.len() * PER_THREAD + self.id_bytes
    }

    /// Removes every vector of a thread.
    pub(super) fn remove_thread(&mut self, thread_id: &str) {
        let Some(&removed) = self.thread_index.get(thread_id) else { return };
        if self.threads[removed as usize].entries.is_empty() {
            return;
        }
        let width = self.width();
        let mut kept = 0;
        for entry in 0..self.len() {
            if self.thread_of[entry] == removed {
                continue;
            }
            self.codes.copy_within(entry * width..(entry + 1) * width, kept * width);
            self.scales[kept] = self.scales[entry];
            self.thread_of[kept] = self.thread_of[entry];
            self.seq_of[kept] = self.seq_of[entry];
            kept += 1;
        }
        self.codes.truncate(kept * width);
        self.scales.truncate(kept);
        self.thread_of.truncate(kept);
        self.seq_of.truncate(kept);
        for thread in &mut self.threads {
            thread.entries.clear();
        }
        for entry in 0..kept {
            let seq = self.seq_of[entry];
            let position = u32::try_from(entry).expect("fewer than 4 billion vectors");
            self.threads[self.thread_of[entry] as usize].entries.push((seq, position));
        }
        // Entries are in insertion order, which is not always seq order.
        for thread in &mut self.threads {
            thread.entries.sort_unstable();
        }
    }

    /// The `wanted` vectors whose codes score best against `query`, best first, as (thread,
    /// seq), optionally only within one thread.
    pub(super) fn candidates(
        &self,
        query: &[f32],
        wanted: usize,
        thread: Option<&str>,
    ) -> Vec<(String, u64)> {
        if query.len() != self.dimension || wanted == 0 || self.scales.is_empty() {
            return Vec::new();
        }
        let query = QueryCode::new(query);
        let width = self.width();
        let score =
            |entry: usize| query.score(&self.codes[entry * width..(entry + 1) * width], self.scales[entry]);
        let best = match thread {
            Some(thread_id) => {
                let Some(&thread) = self.thread_index.get(thread_id) else { return Vec::new() };
                let mut best = TopK::new(wanted);
                for &(_, entry) in &self.threads[thread as usize].entries {
                    best.offer(score(entry as usize), entry as usize);
                }
                best
            }
            None => self.scan_all(wanted, score),
        };
        best.into_sorted()
            .into_iter()
            .map(|(_, entry)| (self.threads[self.thread_of[entry] as usize].id.clone(), self.seq_of[entry]))
            .collect()
    }

    /// Every entry scored, the best `wanted` kept; shared between the cores when large.
    fn scan_all(&self, wanted: usize, score: impl Fn(usize) -> f32 + Sync) -> TopK {
        let count = self.len();
        let shares = if count < PARALLEL_FROM {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |cores| cores.get()).min(MAX_SCAN_THREADS)
        };
        let per_share = count.div_ceil(shares);
        let scan_share = |share: usize| {
            let mut best = TopK::new(wanted);
            for entry in share * per_share..((share + 1) * per_share).min(count) {
                best.offer(score(entry), entry);
            }
            best
        };
        if shares == 1 {
            return scan_share(0);
        }
        let found: Vec<TopK> = std::thread::scope(|scope| {
            let others: Vec<_> = (1..shares).map(|share| scope.spawn(move || scan_share(share))).collect();
            let mut found = vec![scan_share(0)];
            found.extend(others.into_iter().map(|other| other.join().expect("scan thread")));
            found
        });
        let mut best = TopK::new(wanted);
        for (score, entry) in found.into_iter().flat_map(TopK::into_sorted) {
            best.offer(score, entry);
        }
        best
    }
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

    /// Candidates rank by their codes, honour the thread filter, and follow overwrites and a
    /// thread's removal.
    #[test]
    fn candidates_rank_filter_and_follow_writes() {
        let mut vectors = ResourceVectors::default();
        vectors.insert("a", 0, &[1.0, 0.0]);
        vectors.insert("a", 1, &[0.6, 0.8]);
        vectors.insert("b", 0, &[0.0, 1.0]);
        assert_eq!(vectors.candidates(&[1.0, 0.0], 2, None), [("a".into(), 0), ("a".into(), 1)]);
        assert_eq!(vectors.candidates(&[0.0, 1.0], 5, Some("b")), [("b".into(), 0)]);
        assert!(vectors.candidates(&[0.0, 1.0], 5, Some("c")).is_empty());
        vectors.insert("a", 0, &[0.0, -1.0]);
        assert_eq!(vectors.len(), 3, "an overwrite adds nothing");
        assert_eq!(vectors.candidates(&[1.0, 0.0], 1, None), [("a".into(), 1)]);
        vectors.remove_thread("a");
        assert_eq!(vectors.candidates(&[1.0, 0.0], 5, None), [("b".into(), 0)]);
        vectors.insert("a", 5, &[1.0, 0.0]);
        assert_eq!(vectors.candidates(&[1.0, 0.0], 5, Some("a")), [("a".into(), 5)]);
    }

    /// Rescoring the candidates of a large resource (scanned in shares) finds what an exact
    /// scan finds.
    #[test]
    fn rescored_candidates_match_an_exact_scan() {
        let dimension = 64;
        let corpus = random_units(dimension, PARALLEL_FROM + 500);
        let mut vectors = ResourceVectors::default();
        for (seq, vector) in corpus.iter().enumerate() {
            vectors.insert("t", seq as u64, vector);
        }
        for query in random_units(dimension + 1, 5) {
            let query = &query[..dimension];
            let rescored = best_hits(
                vectors
                    .candidates(query, 5 * CANDIDATES_PER_HIT, None)
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
