//! Compact codes of vectors, for recall's in-memory scan: four bits a component (a vector of 384
//! dimensions in 192 bytes and a scale, an eighth of its f32 form), scored against the query in
//! int8. The codes only rank; the best candidates are rescored from the stored f32 vectors, so
//! what they lose in precision costs candidates, never a wrong score.

/// The largest magnitude of a code component: components are −7..=7.
const CODE_LEVELS: f32 = 7.0;
/// The largest magnitude of a query component.
const QUERY_LEVELS: f32 = 127.0;

/// The bytes of the code of a vector of `dimension` components.
pub(super) fn code_bytes(dimension: usize) -> usize {
    dimension.div_ceil(2)
}

/// The scale that maps `vector`'s largest magnitude to `levels`.
fn scale_for(vector: &[f32], levels: f32) -> f32 {
    let largest = vector.iter().fold(0.0f32, |largest, value| largest.max(value.abs()));
    if largest > 0.0 { levels / largest } else { 1.0 }
}

/// `value * scale` rounded, within ±`levels`.
fn level(value: f32, scale: f32, levels: f32) -> i8 {
    // Within ±127 by the clamp.
    #[allow(clippy::cast_possible_truncation)]
    let level = (value * scale).round().clamp(-levels, levels) as i8;
    level
}

/// Encodes `vector` into `code` ([`code_bytes`] long) and returns its scale: component `j` in
/// byte `j`'s low nibble and component `j + half` in its high nibble (a layout the scan unpacks
/// with two shifts of whole bytes), each `round(value * scale)` with the largest at ±7.
pub(super) fn encode(vector: &[f32], code: &mut [u8]) -> f32 {
    let half = code.len();
    let scale = scale_for(vector, CODE_LEVELS);
    for (index, byte) in code.iter_mut().enumerate() {
        let low = level(vector[index], scale, CODE_LEVELS);
        let high = vector.get(index + half).map_or(0, |value| level(*value, scale, CODE_LEVELS));
        // Two's complement nibbles: the casts keep the bits.
        #[allow(clippy::cast_sign_loss)]
        let packed = (low as u8 & 0x0f) | ((high as u8) << 4);
        *byte = packed;
    }
    scale
}

/// A query in int8, split the way codes are packed, to score codes against.
#[derive(Debug)]
pub(super) struct QueryCode {
    /// The components a code keeps in its low nibbles.
    low: Vec<i8>,
    /// Those it keeps in its high nibbles (zero past the dimension).
    high: Vec<i8>,
    scale: f32,
}

impl QueryCode {
    /// The query's int8 form.
    pub(super) fn new(query: &[f32]) -> QueryCode {
        let half = code_bytes(query.len());
        let scale = scale_for(query, QUERY_LEVELS);
        let at = |index: usize| query.get(index).map_or(0, |value| level(*value, scale, QUERY_LEVELS));
        QueryCode { low: (0..half).map(at).collect(), high: (half..2 * half).map(at).collect(), scale }
    }

    /// The approximate dot product of the query with the vector of `code` and `scale`.
    pub(super) fn score(&self, code: &[u8], scale: f32) -> f32 {
        #[allow(clippy::cast_precision_loss)]
        let sum = self.sum(code) as f32;
        sum / (self.scale * scale)
    }

    /// The integer dot product, over sixteen independent lanes so that it vectorises (each
    /// lane's products are at most 127 × 7, so i32 lanes never overflow).
    fn sum(&self, code: &[u8]) -> i32 {
        const LANES: usize = 16;
        let term = |byte: u8, low: i8, high: i8| {
            // The same bits read as signed: the shifts then extend each nibble's sign.
            #[allow(clippy::cast_possible_wrap)]
            let byte = byte as i8;
            i32::from(low) * i32::from((byte << 4) >> 4) + i32::from(high) * i32::from(byte >> 4)
        };
        let mut sums = [0i32; LANES];
        let codes = code.chunks_exact(LANES);
        let lows = self.low.chunks_exact(LANES);
        let highs = self.high.chunks_exact(LANES);
        let tail: i32 = codes
            .remainder()
            .iter()
            .zip(lows.remainder().iter().zip(highs.remainder()))
            .map(|(byte, (low, high))| term(*byte, *low, *high))
            .sum();
        for ((code, low), high) in codes.zip(lows).zip(highs) {
            for lane in 0..LANES {
                sums[lane] += term(code[lane], low[lane], high[lane]);
            }
        }
        sums.iter().sum::<i32>() + tail
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

    /// A code scores close to the exact dot product, for odd and even dimensions, and keeps
    /// the signs of its components.
    #[test]
    fn codes_score_close_to_the_exact_dot_product() {
        for dimension in [7usize, 64, 385, 1536] {
            let vector: Vec<f32> = (0..dimension).map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0).collect();
            let query: Vec<f32> = (0..dimension).map(|i| ((i * 13 % 7) as f32 - 3.0) / 3.0).collect();
            let mut code = vec![0u8; code_bytes(dimension)];
            let scale = encode(&vector, &mut code);
            let exact = dot(&vector, &query);
            let approximate = QueryCode::new(&query).score(&code, scale);
            let norms = dot(&vector, &vector).sqrt() * dot(&query, &query).sqrt();
            assert!((approximate - exact).abs() < 0.05 * norms, "{dimension}: {approximate} vs {exact}");
        }
        let mut code = vec![0u8; 1];
        let scale = encode(&[-1.0, 0.5], &mut code);
        assert!(QueryCode::new(&[-1.0, 0.0]).score(&code, scale) > 0.9);
        assert!(QueryCode::new(&[0.0, -1.0]).score(&code, scale) < -0.4);
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
