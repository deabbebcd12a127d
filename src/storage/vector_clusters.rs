//! The centroids of an inverted file over one resource's codes: its vectors are grouped around
//! centroids (spherical k-means, trained on a scrambled sample), each group's codes kept
//! together, and a search scores the query against the centroids and scans only the groups of the
//! closest ones — a sixteenth of the vectors, read in order, so a large resource is searched in
//! a fraction of the time of a full scan.
//!
//! A clustered vector is kept as the product code ([`ProductQuantizer`]) of its residual — the
//! vector minus its cluster's mean — trained on the same sample: 48 bytes at 384 dimensions
//! instead of a four-bit code's 192. Its score is the query's dot product with the mean, once
//! per cluster, plus the code's score from the query's table.

use super::vector_codes::dot;
use super::vector_quantizer::{ProductQuantizer, score};

/// From this many vectors on, a resource is clustered (below it a full scan takes well under a
/// millisecond).
pub(super) const CLUSTER_FROM: usize = 20_000;
/// Vectors per cluster, about, when trained.
const VECTORS_PER_CLUSTER: usize = 400;
/// The fewest and the most clusters (training costs the count times the sample, assigning the
/// count times the vectors).
const CLUSTER_COUNTS: (usize, usize) = (32, 256);
/// A search scans the clusters of the closest sixteenth of the centroids.
const PROBED_SHARE: usize = 16;
/// Vectors of the training sample, per cluster.
const SAMPLE_PER_CLUSTER: usize = 40;
/// The fewest vectors of the training sample: about forty for each of the product quantizer's
/// 256 centroids of a place.
const SAMPLE_AT_LEAST: usize = 10_240;
/// Rounds of k-means.
const ROUNDS: usize = 8;

/// Unit-length centroids, the means of their clusters and the quantizer of the residuals.
#[derive(Debug)]
pub(super) struct Clusters {
    dimension: usize,
    /// Contiguous: cluster `c` is `centroids[c * dimension..(c + 1) * dimension]`.
    centroids: Vec<f32>,
    /// The mean of each cluster's sampled vectors, laid out as `centroids`: residuals are taken
    /// from it (a unit centroid is longer than the mean of the vectors around it).
    means: Vec<f32>,
    quantizer: ProductQuantizer,
    /// The vectors there were when these clusters were trained.
    trained_for: usize,
}

impl Clusters {
    /// Centroids for `count` vectors of `dimension`, read with `vector_of(index)`, trained on a
    /// sample of them drawn in a scrambled order (a stride would follow any period in the data,
    /// and the first centroids, the sample's first vectors, would all be alike); `None` when a
    /// sampled vector cannot be read.
    pub(super) fn train(
        dimension: usize,
        count: usize,
        vector_of: impl Fn(usize) -> Option<Vec<f32>>,
    ) -> Option<Clusters> {
        let clusters =
            (count / VECTORS_PER_CLUSTER).clamp(CLUSTER_COUNTS.0, CLUSTER_COUNTS.1).min(count.max(1));
        let sample_count = (clusters * SAMPLE_PER_CLUSTER).max(SAMPLE_AT_LEAST).min(count);
        let drawn = |index: usize| {
            let scrambled = (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
            // Below `count`, which is a usize.
            #[allow(clippy::cast_possible_truncation)]
            let drawn = (scrambled % count as u64) as usize;
            drawn
        };
        let sample: Vec<Vec<f32>> =
            (0..sample_count).map(|index| vector_of(drawn(index))).collect::<Option<_>>()?;
        let centroids: Vec<f32> = sample[..clusters].iter().flatten().copied().collect();
        let mut trained = Clusters {
            dimension,
            means: Vec::new(),
            centroids,
            quantizer: ProductQuantizer::train(dimension, &[]),
            trained_for: count,
        };
        for round in 0..=ROUNDS {
            let mut sums = vec![0.0f32; clusters * dimension];
            let mut counts = vec![0u32; clusters];
            for vector in &sample {
                let cluster = trained.closest(vector);
                counts[cluster] += 1;
                for (sum, value) in
                    sums[cluster * dimension..(cluster + 1) * dimension].iter_mut().zip(vector)
                {
                    *sum += value;
                }
            }
            // The last round only measures the means of the clusters the rounds before trained.
            let measuring = round == ROUNDS;
            if measuring {
                trained.means.clone_from(&trained.centroids);
            }
            let target = if measuring { &mut trained.means } else { &mut trained.centroids };
            for ((sum, centroid), count) in
                sums.chunks_exact(dimension).zip(target.chunks_exact_mut(dimension)).zip(counts)
            {
                #[allow(clippy::cast_precision_loss)]
                let length = if measuring { count as f32 } else { dot(sum, sum).sqrt() };
                // An empty cluster keeps its centroid (and its mean stays the centroid).
                if length > 0.0 {
                    for (centroid, sum) in centroid.iter_mut().zip(sum) {
                        *centroid = sum / length;
                    }
                }
            }
        }
        let residuals: Vec<Vec<f32>> =
            sample.iter().map(|vector| trained.residual(trained.closest(vector), vector)).collect();
        trained.quantizer = ProductQuantizer::train(dimension, &residuals);
        Some(trained)
    }

    /// The mean of `cluster`.
    fn mean(&self, cluster: usize) -> &[f32] {
        &self.means[cluster * self.dimension..(cluster + 1) * self.dimension]
    }

    /// `vector` minus the mean of `cluster`.
    fn residual(&self, cluster: usize, vector: &[f32]) -> Vec<f32> {
        vector.iter().zip(self.mean(cluster)).map(|(value, mean)| value - mean).collect()
    }

    /// The bytes of a code.
    pub(super) fn code_bytes(&self) -> usize {
        self.quantizer.code_bytes()
    }

    /// Encodes `vector`, of `cluster`, into `code` ([`Self::code_bytes`] long).
    pub(super) fn encode(&self, cluster: usize, vector: &[f32], code: &mut [u8]) {
        self.quantizer.encode(vector, self.mean(cluster), code);
    }

    /// The vector a code of `cluster` holds.
    pub(super) fn decode(&self, cluster: usize, code: &[u8]) -> Vec<f32> {
        self.quantizer
            .decode(code)
            .iter()
            .zip(self.mean(cluster))
            .map(|(residual, mean)| residual + mean)
            .collect()
    }

    /// `query` prepared to score the codes of any cluster.
    pub(super) fn query(&self, query: &[f32]) -> ClusterQuery {
        ClusterQuery {
            table: self.quantizer.table(query),
            means: self.means.chunks_exact(self.dimension).map(|mean| dot(mean, query)).collect(),
        }
    }

    /// How many clusters there are.
    pub(super) fn len(&self) -> usize {
        self.centroids.len() / self.dimension
    }

    /// Whether a resource of `count` vectors has grown or shrunk enough since training that its
    /// clusters should be trained again (or dropped).
    pub(super) fn stale(&self, count: usize) -> bool {
        count >= 2 * self.trained_for || count < self.trained_for / 2
    }

    /// The cluster whose centroid is closest to `vector`.
    pub(super) fn closest(&self, vector: &[f32]) -> usize {
        let mut best = (f32::NEG_INFINITY, 0);
        for (cluster, centroid) in self.centroids.chunks_exact(self.dimension).enumerate() {
            let score = dot(centroid, vector);
            if score > best.0 {
                best = (score, cluster);
            }
        }
        best.1
    }

    /// The clusters a search for `query` scans: those of the closest sixteenth of the centroids.
    pub(super) fn probed(&self, query: &[f32]) -> Vec<usize> {
        let mut order: Vec<(f32, usize)> = self
            .centroids
            .chunks_exact(self.dimension)
            .enumerate()
            .map(|(cluster, centroid)| (dot(centroid, query), cluster))
            .collect();
        let probed = self.len().div_ceil(PROBED_SHARE);
        order.select_nth_unstable_by(probed - 1, |a, b| b.0.total_cmp(&a.0));
        order.truncate(probed);
        order.into_iter().map(|(_, cluster)| cluster).collect()
    }

    /// The memory the centroids, means and quantizer take, in bytes.
    pub(super) fn memory_bytes(&self) -> usize {
        (self.centroids.capacity() + self.means.capacity()) * 4 + self.quantizer.memory_bytes()
    }
}

/// A query's dot products with the clusters' means and with the quantizer's centroids.
#[derive(Debug)]
pub(super) struct ClusterQuery {
    table: Vec<f32>,
    means: Vec<f32>,
}

impl ClusterQuery {
    /// The approximate dot product of the query with the vector of `code`, of `cluster`.
    pub(super) fn score(&self, cluster: usize, code: &[u8]) -> f32 {
        self.means[cluster] + score(&self.table, code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit vectors around `groups` well-separated directions, deterministic.
    fn grouped(dimension: usize, groups: usize, count: usize) -> Vec<Vec<f32>> {
        let mut state = 11u64;
        let mut noise = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        (0..count)
            .map(|index| {
                let mut vector: Vec<f32> = (0..dimension).map(|_| 0.1 * noise()).collect();
                vector[index % groups] += 1.0;
                let norm = dot(&vector, &vector).sqrt();
                vector.into_iter().map(|value| value / norm).collect()
            })
            .collect()
    }

    /// The clusters a query probes hold every vector of its group and a sixteenth of the clusters;
    /// a resource that doubled or halved is due for training again.
    #[test]
    fn probing_finds_the_query_group() {
        let dimension = 64;
        let vectors = grouped(dimension, 64, 20_000);
        let clusters = Clusters::train(dimension, vectors.len(), |index| Some(vectors[index].clone()))
            .expect("all read");
        assert_eq!(clusters.len(), 50);
        for group in [0, 5, 63] {
            let probed = clusters.probed(&vectors[group]);
            assert_eq!(probed.len(), 4);
            let found = (0..vectors.len())
                .filter(|index| index % 64 == group)
                .filter(|index| probed.contains(&clusters.closest(&vectors[*index])))
                .count();
            assert!(found * 100 >= 99 * vectors.len() / 64, "group {group}: {found} of its vectors probed");
        }
        assert!(!clusters.stale(vectors.len()) && clusters.stale(2 * vectors.len()) && clusters.stale(9_000));
    }
}
