//! The in-memory vector index of the resources searched so far: an exact, SIMD-friendly scan
//! over contiguous vectors. Loaded from the `vectors` tree on a resource's first search and kept
//! in step by the writes, so sled stays the source of truth.

use std::collections::HashMap;

use super::Hit;

/// The vectors of one resource.
#[derive(Debug, Default)]
pub(super) struct ResourceVectors {
    /// The dimension of every vector here.
    dimension: usize,
    /// Thread and seq of each vector, in insertion order.
    entries: Vec<(String, u64)>,
    /// The vectors, contiguous: entry `i` is `data[i * dimension..(i + 1) * dimension]`.
    data: Vec<f32>,
    /// Where an entry is, by (thread, seq), for overwrites.
    positions: HashMap<(String, u64), usize>,
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
        if let Some(&position) = self.positions.get(&key) {
            self.data[position * self.dimension..(position + 1) * self.dimension].copy_from_slice(vector);
            return;
        }
        self.positions.insert(key.clone(), self.entries.len());
        self.entries.push(key);
        self.data.extend_from_slice(vector);
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
        let mut best: Vec<(f32, usize)> = Vec::with_capacity(top_k + 1);
        for (index, vector) in self.data.chunks_exact(self.dimension).enumerate() {
            if let Some(thread) = thread
                && self.entries[index].0 != thread
            {
                continue;
            }
            let score = dot(query, vector);
            if threshold.is_some_and(|threshold| score < threshold) {
                continue;
            }
            if best.len() == top_k && best.last().is_some_and(|(worst, _)| score <= *worst) {
                continue;
            }
            let position = best.partition_point(|(other, _)| *other >= score);
            best.insert(position, (score, index));
            best.truncate(top_k);
        }
        best.into_iter()
            .map(|(score, index)| Hit {
                thread_id: self.entries[index].0.clone(),
                seq: self.entries[index].1,
                score,
            })
            .collect()
    }
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

    /// The unrolled dot product equals the naive one.
    #[test]
    fn dot_matches_naive() {
        let left: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let right: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.25).collect();
        let naive: f32 = left.iter().zip(&right).map(|(a, b)| a * b).sum();
        assert!((dot(&left, &right) - naive).abs() < 1e-3);
    }
}
