//! Product quantization: a vector cut into subvectors of eight components, each kept as the
//! number of the closest of 256 centroids trained for its place (k-means on a sample), so a
//! vector of 384 dimensions is 48 bytes — a quarter of a four-bit code. A query is scored
//! against every centroid of every place once, into a table; a code then scores as the sum of
//! its bytes' entries in that table.
//!
//! Recall quantizes the residuals of a clustered resource's vectors (each vector minus its
//! cluster's mean, [`super::vector_clusters`]), which vary far less than the vectors do, so the
//! centroids spend their precision on what tells neighbours apart.

/// Components of one subvector.
const SUB_DIMENSION: usize = 8;
/// Centroids of each place: a byte's worth.
const CENTROIDS: usize = 256;
/// Rounds of k-means.
const ROUNDS: usize = 8;

/// Trained centroids of every place.
#[derive(Debug)]
pub(super) struct ProductQuantizer {
    /// The dimension of the vectors quantized (the last subvector is padded with zeros).
    dimension: usize,
    /// Component-major per place, so that scoring a subvector against all 256 centroids is a
    /// sum of eight rows: place `p`'s component `d` of centroid `c` is at
    /// `(p * SUB_DIMENSION + d) * CENTROIDS + c`.
    components: Vec<f32>,
    /// Each centroid's squared length, at `p * CENTROIDS + c`.
    lengths: Vec<f32>,
}

/// The bytes of the code of a vector of `dimension` components.
pub(super) fn code_bytes(dimension: usize) -> usize {
    dimension.div_ceil(SUB_DIMENSION)
}

/// Subvector `place` of `vector`, padded with zeros past its end.
fn subvector(vector: &[f32], place: usize) -> [f32; SUB_DIMENSION] {
    let mut sub = [0.0; SUB_DIMENSION];
    let start = (place * SUB_DIMENSION).min(vector.len());
    let end = (start + SUB_DIMENSION).min(vector.len());
    sub[..end - start].copy_from_slice(&vector[start..end]);
    sub
}

/// `rows[d][c]` weighted by `weights[d]` and summed over `d`, added to `into[c]`: one pass of
/// 256 lanes per component, which the compiler vectorises.
fn add_weighted_rows(into: &mut [f32; CENTROIDS], rows: &[f32], weights: &[f32; SUB_DIMENSION]) {
    for (row, weight) in rows.chunks_exact(CENTROIDS).zip(weights) {
        for (sum, value) in into.iter_mut().zip(row) {
            *sum += weight * value;
        }
    }
}

/// The index of the smallest of `values`: the least found in eight lanes at once (which the
/// compiler vectorises, where a running index would not be), then its place.
fn smallest(values: &[f32; CENTROIDS]) -> usize {
    let mut lanes = [f32::INFINITY; 8];
    for chunk in values.chunks_exact(8) {
        for (lane, value) in lanes.iter_mut().zip(chunk) {
            *lane = if *value < *lane { *value } else { *lane };
        }
    }
    let least = lanes.into_iter().fold(f32::INFINITY, |least, lane| if lane < least { lane } else { least });
    values.iter().position(|value| value.total_cmp(&least).is_eq()).unwrap_or(0)
}

impl ProductQuantizer {
    /// Centroids for vectors of `dimension`, trained on `sample` (residuals, any number: with
    /// fewer than 256 some centroids repeat).
    pub(super) fn train(dimension: usize, sample: &[Vec<f32>]) -> ProductQuantizer {
        let places = code_bytes(dimension);
        let mut quantizer = ProductQuantizer {
            dimension,
            components: vec![0.0; places * SUB_DIMENSION * CENTROIDS],
            lengths: vec![0.0; places * CENTROIDS],
        };
        if sample.is_empty() {
            return quantizer;
        }
        for place in 0..places {
            let points: Vec<[f32; SUB_DIMENSION]> =
                sample.iter().map(|vector| subvector(vector, place)).collect();
            let mut centroids: Vec<[f32; SUB_DIMENSION]> =
                (0..CENTROIDS).map(|centroid| points[centroid % points.len()]).collect();
            for _ in 0..ROUNDS {
                quantizer.set_place(place, &centroids);
                let mut sums = vec![[0.0f32; SUB_DIMENSION]; CENTROIDS];
                let mut counts = vec![0u32; CENTROIDS];
                for point in &points {
                    let closest = quantizer.closest(place, point);
                    counts[closest] += 1;
                    for (sum, value) in sums[closest].iter_mut().zip(point) {
                        *sum += value;
                    }
                }
                for ((centroid, sum), count) in centroids.iter_mut().zip(&sums).zip(&counts) {
                    // An empty centroid stays where it is.
                    if *count > 0 {
                        #[allow(clippy::cast_precision_loss)]
                        let count = *count as f32;
                        *centroid = sum.map(|value| value / count);
                    }
                }
            }
            quantizer.set_place(place, &centroids);
        }
        quantizer
    }

    /// Stores `centroids` as place `place`'s.
    fn set_place(&mut self, place: usize, centroids: &[[f32; SUB_DIMENSION]]) {
        let rows = &mut self.components[place * SUB_DIMENSION * CENTROIDS..][..SUB_DIMENSION * CENTROIDS];
        for (centroid, values) in centroids.iter().enumerate() {
            for (component, value) in values.iter().enumerate() {
                rows[component * CENTROIDS + centroid] = *value;
            }
            self.lengths[place * CENTROIDS + centroid] = values.iter().map(|value| value * value).sum();
        }
    }

    /// The rows of place `place`'s centroids.
    fn rows(&self, place: usize) -> &[f32] {
        &self.components[place * SUB_DIMENSION * CENTROIDS..][..SUB_DIMENSION * CENTROIDS]
    }

    /// The centroid of place `place` closest to `sub`: the least `|c|² − 2 sub·c`.
    fn closest(&self, place: usize, sub: &[f32; SUB_DIMENSION]) -> usize {
        let mut distances: [f32; CENTROIDS] =
            self.lengths[place * CENTROIDS..][..CENTROIDS].try_into().expect("one place's lengths");
        add_weighted_rows(&mut distances, self.rows(place), &sub.map(|value| -2.0 * value));
        smallest(&distances)
    }

    /// The bytes of one code.
    pub(super) fn code_bytes(&self) -> usize {
        code_bytes(self.dimension)
    }

    /// Encodes `vector − mean` into `code` ([`Self::code_bytes`] long), a subvector at a time.
    pub(super) fn encode(&self, vector: &[f32], mean: &[f32], code: &mut [u8]) {
        for (place, byte) in code.iter_mut().enumerate() {
            let mut sub = subvector(vector, place);
            for (value, mean) in sub.iter_mut().zip(subvector(mean, place)) {
                *value -= mean;
            }
            // Below 256.
            #[allow(clippy::cast_possible_truncation)]
            let closest = self.closest(place, &sub) as u8;
            *byte = closest;
        }
    }

    /// The vector a code holds.
    pub(super) fn decode(&self, code: &[u8]) -> Vec<f32> {
        let mut vector: Vec<f32> = code
            .iter()
            .enumerate()
            .flat_map(|(place, &centroid)| {
                let rows = self.rows(place);
                (0..SUB_DIMENSION).map(move |component| rows[component * CENTROIDS + usize::from(centroid)])
            })
            .collect();
        vector.truncate(self.dimension);
        vector
    }

    /// The dot products of `query`'s subvectors with every centroid of their place, to score
    /// codes with ([`score`]).
    pub(super) fn table(&self, query: &[f32]) -> Vec<f32> {
        let places = self.code_bytes();
        let mut table = vec![0.0; places * CENTROIDS];
        for (place, scores) in table.chunks_exact_mut(CENTROIDS).enumerate() {
            let scores: &mut [f32; CENTROIDS] = scores.try_into().expect("one place's scores");
            add_weighted_rows(scores, self.rows(place), &subvector(query, place));
        }
        table
    }

    /// The memory the centroids take, in bytes.
    pub(super) fn memory_bytes(&self) -> usize {
        4 * (self.components.capacity() + self.lengths.capacity())
    }
}

/// The approximate dot product of a query with the vector of `code`, from the query's
/// [`ProductQuantizer::table`]: one lookup a byte, in four independent sums.
pub(super) fn score(table: &[f32], code: &[u8]) -> f32 {
    let mut sums = [0.0f32; 4];
    let places = code.chunks_exact(4);
    let tail: f32 = places
        .remainder()
        .iter()
        .enumerate()
        .map(|(offset, centroid)| {
            let place = code.len() - places.remainder().len() + offset;
            table[place * CENTROIDS + usize::from(*centroid)]
        })
        .sum();
    for (chunk, bytes) in places.enumerate() {
        for (lane, centroid) in bytes.iter().enumerate() {
            sums[lane] += table[(chunk * 4 + lane) * CENTROIDS + usize::from(*centroid)];
        }
    }
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::super::vector_codes::dot;
    use super::*;

    /// Deterministic vectors of `dimension` in −0.5..0.5.
    fn noise(dimension: usize, count: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut state = seed;
        (0..count)
            .map(|_| {
                (0..dimension)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect()
            })
            .collect()
    }

    /// A code decodes close to its vector — much closer than the vector is to zero — and scores
    /// against a query as its decoded vector does, for a dimension that is not a multiple of
    /// eight too; a quantizer trained on fewer vectors than centroids still encodes.
    #[test]
    fn codes_decode_close_and_score_as_they_decode() {
        for dimension in [64usize, 389] {
            let sample = noise(dimension, 4_000, 3);
            let quantizer = ProductQuantizer::train(dimension, &sample);
            assert_eq!(quantizer.code_bytes(), dimension.div_ceil(8));
            let query = &noise(dimension, 1, 9)[0];
            let table = quantizer.table(query);
            for vector in &sample[..50] {
                let mut code = vec![0u8; quantizer.code_bytes()];
                quantizer.encode(vector, &vec![0.0; dimension], &mut code);
                let decoded = quantizer.decode(&code);
                assert_eq!(decoded.len(), dimension);
                let error: f32 = decoded.iter().zip(vector).map(|(a, b)| (a - b).powi(2)).sum();
                assert!(error < 0.5 * dot(vector, vector), "{dimension}: error {error}");
                let scored = score(&table, &code);
                assert!((scored - dot(query, &decoded)).abs() < 1e-3, "{scored} vs the decoded vector's");
            }
        }
        let few = ProductQuantizer::train(16, &noise(16, 10, 5));
        let mut code = vec![0u8; 2];
        few.encode(&noise(16, 1, 5)[0], &[0.0; 16], &mut code);
        assert_eq!(few.decode(&code), noise(16, 1, 5)[0], "a sample vector is its own centroid");
    }
}
