//! The in-memory vector index of the resources searched so far. Loaded from the `vectors` tree
//! on a resource's first search and kept in step by the writes, so sled stays the source of truth.
//!
//! Small resources are scanned exactly in f32. Large ones are scanned in int8 (a quarter of the
//! memory traffic: the scan is memory-bound) and the best candidates are rescored exactly, so
//! results match the exact scan unless the true top-k falls outside the candidates.

use std::collections::HashMap;

use super::Hit;

/// From this many vectors on, the scan runs in int8 with exact rescoring.
const QUANTIZED_FROM: usize = 20_000;
/// Candidates rescored exactly, per hit asked for.
const CANDIDATES_PER_HIT: usize = 8;
/// The most threads a large scan uses.
const MAX_SCAN_THREADS: usize = 4;

/// The vectors of one resource.
#[derive(Debug, Default)]
pub(super) struct ResourceVectors {
    /// The dimension of every vector here.
    dimension: usize,
    /// Thread and seq of each vector, in insertion order.
    entries: Vec<(String, u64)>,
    /// The vectors, contiguous: entry `i` is `data[i * dimension..(i + 1) * dimension]`.
    data: Vec<f32>,
    /// The same vectors in int8, each scaled so that its largest component is ±127.
    quantized: Vec<i8>,
    /// The scale of each quantized vector (`quantized = round(vector * scale)`).
    scales: Vec<f32>,
    /// Where an entry is, by (thread, seq), for overwrites.
    positions: HashMap<(String, u64), usize>,
    /// The bytes of the thread ids held (twice each: in `entries` and in `positions`).
    id_bytes: usize,
}

/// Quantizes a vector to int8; returns its scale.
fn quantize(vector: &[f32], into: &mut [i8]) -> f32 {
    let largest = vector.iter().fold(0.0f32, |largest, value| largest.max(value.abs()));
    let scale = if largest > 0.0 { 127.0 / largest } else { 1.0 };
    for (slot, value) in into.iter_mut().zip(vector) {
        // Within ±127 by construction of the scale.
        #[allow(clippy::cast_possible_truncation)]
        let quantized = (value * scale).round() as i8;
        *slot = quantized;
    }
    scale
}

impl ResourceVectors {
    /// Adds or replaces a vector.
    pub(super) fn insert(&mut self, thread_id: &str, seq: u64, vector: &[f32]) {
        if self.entries.is_empty() {
            self.dimension = vector.len();
        }
        if vector.len() != self.dimension {
            return;
        }
        let key = (thread_id.to_owned(), seq);
        let position = match self.positions.get(&key) {
            Some(&position) => position,
            None => {
                let position = self.entries.len();
                self.id_bytes += 2 * key.0.len();
                self.positions.insert(key.clone(), position);
                self.entries.push(key);
                self.data.resize(self.data.len() + self.dimension, 0.0);
                self.quantized.resize(self.quantized.len() + self.dimension, 0);
                self.scales.push(1.0);
                position
            }
        };
        let range = position * self.dimension..(position + 1) * self.dimension;
        self.data[range.clone()].copy_from_slice(vector);
        self.scales[position] = quantize(vector, &mut self.quantized[range]);
    }

    /// About how much memory these vectors take, in bytes: f32 and int8 copies, scales, and the
    /// keys with their map overhead.
    pub(super) fn memory_bytes(&self) -> usize {
        const PER_ENTRY: usize = 2 * std::mem::size_of::<(String, u64)>() + std::mem::size_of::<usize>() + 16;
        self.data.len() * 4
            + self.quantized.len()
            + self.scales.len() * 4
            + self.entries.len() * PER_ENTRY
            + self.id_bytes
    }

    /// Removes every vector of a thread.
    pub(super) fn remove_thread(&mut self, thread_id: &str) {
        let kept: Vec<usize> =
            (0..self.entries.len()).filter(|&index| self.entries[index].0 != thread_id).collect();
        if kept.len() == self.entries.len() {
            return;
        }
        let mut rebuilt = ResourceVectors::default();
        for index in kept {
            let (thread, seq) = &self.entries[index];
            rebuilt.insert(
                thread,
                seq.to_owned(),
                &self.data[index * self.dimension..(index + 1) * self.dimension],
            );
        }
        *self = rebuilt;
    }

    /// The best `top_k` hits at or above `threshold`, optionally only within one thread.
    pub(super) fn search(
        &self,
        query: &[f32],
        top_k: usize,
        threshold: Option<f32>,
        thread: Option<&str>,
    ) -> Vec<Hit> {
        if query.len() != self.dimension || top_k == 0 {
            return Vec::new();
        }
        let in_scope = |index: usize| thread.is_none_or(|thread| self.entries[index].0 == thread);
        let mut best = TopK::new(top_k);
        if self.entries.len() < QUANTIZED_FROM {
            for (index, vector) in self.data.chunks_exact(self.dimension).enumerate() {
                if in_scope(index) {
                    best.offer(dot(query, vector), index);
                }
            }
        } else {
            let mut quantized_query = vec![0i8; self.dimension];
            let query_scale = quantize(query, &mut quantized_query);
            let wanted = top_k * CANDIDATES_PER_HIT;
            // One share of the vectors per core; each share keeps its own best candidates.
            let shares =
                std::thread::available_parallelism().map_or(1, |cores| cores.get()).min(MAX_SCAN_THREADS);
            let per_share = self.entries.len().div_ceil(shares);
            let scan_share = |share: usize| {
                let mut candidates = TopK::new(wanted);
                let first = share * per_share;
                let last = (first + per_share).min(self.entries.len());
                for index in first..last {
                    if in_scope(index) {
                        let vector = &self.quantized[index * self.dimension..(index + 1) * self.dimension];
                        #[allow(clippy::cast_precision_loss)]
                        let approximate =
                            dot_i8(&quantized_query, vector) as f32 / (query_scale * self.scales[index]);
                        candidates.offer(approximate, index);
                    }
                }
                candidates
            };
            let shares_found: Vec<TopK> = std::thread::scope(|scope| {
                let others: Vec<_> =
                    (1..shares).map(|share| scope.spawn(move || scan_share(share))).collect();
                let mut found = vec![scan_share(0)];
                found.extend(others.into_iter().map(|other| other.join().expect("scan thread")));
                found
            });
            let mut candidates = TopK::new(wanted);
            for (score, index) in shares_found.into_iter().flat_map(TopK::into_sorted) {
                candidates.offer(score, index);
            }
            for (_, index) in candidates.into_sorted() {
                let vector = &self.data[index * self.dimension..(index + 1) * self.dimension];
                best.offer(dot(query, vector), index);
            }
        }
        best.into_sorted()
            .into_iter()
            .filter(|(score, _)| threshold.is_none_or(|threshold| *score >= threshold))
            .map(|(score, index)| Hit {
                thread_id: self.entries[index].0.clone(),
                seq: self.entries[index].1,
                score,
            })
            .collect()
    }
}

/// The `k` best (score, index) pairs seen so far.
struct TopK {
    k: usize,
    best: Vec<(f32, usize)>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK { k, best: Vec::with_capacity(k + 1) }
    }

    fn offer(&mut self, score: f32, index: usize) {
        if self.best.len() == self.k && self.best.last().is_some_and(|(worst, _)| score <= *worst) {
            return;
        }
        let position = self.best.partition_point(|(other, _)| *other >= score);
        self.best.insert(position, (score, index));
        self.best.truncate(self.k);
    }

    /// Best first.
    fn into_sorted(self) -> Vec<(f32, usize)> {
        self.best
    }
}

/// Int8 dot product, accumulated in i32 over independent lanes so that it vectorises.
fn dot_i8(left: &[i8], right: &[i8]) -> i32 {
    const LANES: usize = 16;
    let mut sums = [0i32; LANES];
    let left_chunks = left.chunks_exact(LANES);
    let right_chunks = right.chunks_exact(LANES);
    let tail: i32 = left_chunks
        .remainder()
        .iter()
        .zip(right_chunks.remainder())
        .map(|(a, b)| i32::from(*a) * i32::from(*b))
        .sum();
    for (a, b) in left_chunks.zip(right_chunks) {
        for lane in 0..LANES {
            sums[lane] += i32::from(a[lane]) * i32::from(b[lane]);
        }
    }
    sums.iter().sum::<i32>() + tail
}

/// Dot product with eight independent accumulators, so the compiler vectorises it (a plain
/// `zip().map().sum()` is not, because of strict floating-point ordering).
pub fn dot(left: &[f32], right: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut sums = [0.0f32; LANES];
    let left_chunks = left.chunks_exact(LANES);
    let right_chunks = right.chunks_exact(LANES);
    let tail: f32 = left_chunks.remainder().iter().zip(right_chunks.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in left_chunks.zip(right_chunks) {
        for lane in 0..LANES {
            sums[lane] += a[lane] * b[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan returns the best hits in order, honours the threshold and the thread filter.
    #[test]
    fn search_ranks_filters_and_thresholds() {
        let mut vectors = ResourceVectors::default();
        vectors.insert("a", 0, &[1.0, 0.0]);
        vectors.insert("a", 1, &[0.6, 0.8]);
        vectors.insert("b", 0, &[0.0, 1.0]);
        let hits = vectors.search(&[1.0, 0.0], 2, None, None);
        assert_eq!(
            hits.iter().map(|hit| (hit.thread_id.as_str(), hit.seq)).collect::<Vec<_>>(),
            [("a", 0), ("a", 1)]
        );
        assert_eq!(vectors.search(&[1.0, 0.0], 5, Some(0.5), None).len(), 2);
        assert_eq!(vectors.search(&[0.0, 1.0], 5, None, Some("b")).len(), 1);
        vectors.remove_thread("a");
        assert_eq!(vectors.search(&[1.0, 0.0], 5, None, None).len(), 1);
    }

    /// The int8 scan with rescoring finds what the exact scan finds.
    #[test]
    fn quantized_scan_matches_exact_scan() {
        let dimension = 64;
        let mut state = 7u64;
        let mut random_unit = || {
            let vector: Vec<f32> = (0..dimension)
                .map(|_| {
                    state =
                        state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
            vector.into_iter().map(|v| v / norm).collect::<Vec<f32>>()
        };
        let mut vectors = ResourceVectors::default();
        let count = QUANTIZED_FROM + 500;
        for seq in 0..count as u64 {
            vectors.insert("t", seq, &random_unit());
        }
        for _ in 0..5 {
            let query = random_unit();
            let quantized: Vec<u64> =
                vectors.search(&query, 5, None, None).iter().map(|hit| hit.seq).collect();
            let mut exact: Vec<(f32, u64)> = vectors
                .data
                .chunks_exact(dimension)
                .enumerate()
                .map(|(index, vector)| (dot(&query, vector), index as u64))
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let exact: Vec<u64> = exact.iter().take(5).map(|(_, seq)| *seq).collect();
            assert_eq!(quantized, exact);
        }
    }

    /// The unrolled dot product equals the naive one.
    #[test]
    fn dot_matches_naive() {
        let left: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let right: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let naive: f32 = left.iter().zip(&right).map(|(a, b)| a * b).sum();
        assert!((dot(&left, &right) - naive).abs() < 1e-3);
    }
}
