//! Compact codes of vectors, for recall's in-memory scan: four bits a component (a vector of 384
//! dimensions in 192 bytes and a scale, an eighth of its f32 form), scored against the query in
//! seven bits. The codes only rank; the best candidates are scored again from finer copies, so
//! what they lose in precision costs candidates, never a wrong score.
//!
//! A component is kept as an unsigned nibble, its level plus 8, so that the scan unpacks a byte
//! with a mask and a shift and multiplies in i16 lanes (which SSE2, the baseline of x86-64, does
//! natively; it has no i32 multiply): the offset's share of the dot product is the same for every
//! code of one query, subtracted once.

/// The largest magnitude of a code component: components are −7..=7.
const CODE_LEVELS: f32 = 7.0;
/// A nibble holds its component plus this.
const OFFSET: i16 = 8;
/// The largest magnitude of a query component: small enough that sixteen chunks of a code's
/// products (each lane two of at most 63 × 15) add up within an i16.
const QUERY_LEVELS: f32 = 63.0;
/// Bytes scored side by side.
const LANES: usize = 16;
/// Chunks of [`LANES`] bytes summed in i16 before going to i32: 16 × 2 × 63 × 15 < 32,768.
const CHUNKS_PER_BLOCK: usize = 16;

/// The bytes of the code of a vector of `dimension` components.
pub(super) fn code_bytes(dimension: usize) -> usize {
    dimension.div_ceil(2)
}

/// The largest magnitude of a component of `vector`.
fn largest_magnitude(vector: &[f32]) -> f32 {
    vector.iter().fold(0.0f32, |largest, value| largest.max(value.abs()))
}

/// The scale that maps `vector`'s largest magnitude to `levels`.
pub(super) fn scale_for(vector: &[f32], levels: f32) -> f32 {
    let largest = largest_magnitude(vector);
    if largest > 0.0 { levels / largest } else { 1.0 }
}

/// Clip points tried for a code, as shares of the vector's largest magnitude.
const CLIPS: usize = 12;

/// The scale of a code of `vector`: of the scales that map a clip point between the largest
/// magnitude and two fifths of it to the top level, the one whose code is closest to `vector`
/// (least squared error). Mapping the largest to the top level would spend the few levels on a
/// rare large component; clipping it costs less than coarse steps for all the others.
fn code_scale(vector: &[f32]) -> f32 {
    let largest = largest_magnitude(vector);
    if largest == 0.0 {
        return 1.0;
    }
    let nonzero: Vec<f32> = vector.iter().copied().filter(|value| *value != 0.0).collect();
    let error = |scale: f32| squared_error(&nonzero, scale);
    #[allow(clippy::cast_precision_loss)]
    let clip = |step: usize| largest * (1.0 - 0.6 * step as f32 / (CLIPS - 1) as f32);
    let mut best = (f32::INFINITY, CODE_LEVELS / largest);
    for step in 0..CLIPS {
        let scale = CODE_LEVELS / clip(step);
        let error = error(scale);
        if error < best.0 {
            best = (error, scale);
        }
    }
    best.1
}

/// The squared distance between `vector` and its code at `scale`.
fn squared_error(vector: &[f32], scale: f32) -> f32 {
    vector
        .iter()
        .map(|value| {
            let off = value - f32::from(level(*value, scale, CODE_LEVELS)) / scale;
            off * off
        })
        .sum()
}

/// `value * scale` rounded half away from zero, within ±`levels` (at most 127). Rounds by
/// truncating a cast, which x86-64's baseline does in one instruction where `f32::round` is a
/// call: encoding a million vectors tries a dozen scales on each.
pub(super) fn level(value: f32, scale: f32, levels: f32) -> i16 {
    let scaled = (value * scale).clamp(-levels, levels);
    // Within ±127 by the clamp.
    #[allow(clippy::cast_possible_truncation)]
    let level = (scaled + 0.5f32.copysign(scaled)) as i16;
    level
}

/// Encodes `vector` into `code` ([`code_bytes`] long) and returns its scale: component `j` in
/// byte `j`'s low nibble and component `j + half` in its high nibble, each `round(value * scale)`
/// (the largest at ±7) plus 8.
pub(super) fn encode(vector: &[f32], code: &mut [u8]) -> f32 {
    let half = code.len();
    let scale = code_scale(vector);
    let nibble = |value: Option<&f32>| {
        // 1..=15 by the clamp in `level` (8 past the dimension).
        #[allow(clippy::cast_sign_loss, clippy::cast_possible_truncation)]
        let nibble = (value.map_or(0, |value| level(*value, scale, CODE_LEVELS)) + OFFSET) as u8;
        nibble
    };
    for (index, byte) in code.iter_mut().enumerate() {
        *byte = nibble(vector.get(index)) | (nibble(vector.get(index + half)) << 4);
    }
    scale
}

/// The vector a code holds: its components (two per byte, as [`encode`] packs them, so one
/// past an odd dimension is zero) divided by its scale.
pub(super) fn decode(code: &[u8], scale: f32) -> Vec<f32> {
    let component = |nibble: u8| f32::from(i16::from(nibble) - OFFSET) / scale;
    code.iter()
        .map(|byte| component(byte & 0x0f))
        .chain(code.iter().map(|byte| component(byte >> 4)))
        .collect()
}

/// The code length scanned by a loop the compiler knows the length of (384 dimensions, the
/// built-in embedders'), which it unrolls into i16 lanes at twice the speed of the general loop.
const FIXED_BYTES: usize = 192;

/// A query in seven bits, split the way codes are packed, to score codes against.
#[derive(Debug)]
pub(super) struct QueryCode {
    /// The components a code keeps in its low nibbles.
    low: Vec<i8>,
    /// Those it keeps in its high nibbles (zero past the dimension).
    high: Vec<i8>,
    /// Both in i16, for the loop of [`FIXED_BYTES`].
    low_wide: Vec<i16>,
    high_wide: Vec<i16>,
    /// The offsets' share of every code's sum: 8 times the sum of the components.
    offset_sum: i32,
    scale: f32,
}

impl QueryCode {
    /// The query's seven-bit form.
    pub(super) fn new(query: &[f32]) -> QueryCode {
        let half = code_bytes(query.len());
        let scale = scale_for(query, QUERY_LEVELS);
        // Within ±63.
        #[allow(clippy::cast_possible_truncation)]
        let at = |index: usize| query.get(index).map_or(0, |value| level(*value, scale, QUERY_LEVELS) as i8);
        let low: Vec<i8> = (0..half).map(at).collect();
        let high: Vec<i8> = (half..2 * half).map(at).collect();
        let offset_sum =
            i32::from(OFFSET) * low.iter().chain(&high).map(|value| i32::from(*value)).sum::<i32>();
        let widened = |values: &[i8]| values.iter().map(|value| i16::from(*value)).collect();
        QueryCode { low_wide: widened(&low), high_wide: widened(&high), low, high, offset_sum, scale }
    }

    /// The approximate dot product of the query with the vector of `code` and `scale`.
    pub(super) fn score(&self, code: &[u8], scale: f32) -> f32 {
        let sum = match <&[u8; FIXED_BYTES]>::try_from(code) {
            Ok(code) => sum_in_i16(code, &self.low_wide, &self.high_wide),
            Err(_) => sum_in_i32(code, &self.low, &self.high),
        };
        #[allow(clippy::cast_precision_loss)]
        let sum = (sum - self.offset_sum) as f32;
        sum / (self.scale * scale)
    }
}

/// The integer dot product of a query's halves with a code's nibbles, in sixteen independent
/// i32 lanes so that it vectorises.
fn sum_in_i32(code: &[u8], low: &[i8], high: &[i8]) -> i32 {
    let term = |byte: u8, low: i8, high: i8| {
        i32::from(low) * i32::from(byte & 0x0f) + i32::from(high) * i32::from(byte >> 4)
    };
    let mut sums = [0i32; LANES];
    let chunks = code.chunks_exact(LANES);
    let lows = low.chunks_exact(LANES);
    let highs = high.chunks_exact(LANES);
    let tail = chunks.remainder().iter().zip(lows.remainder().iter().zip(highs.remainder()));
    let tail: i32 = tail.map(|(byte, (low, high))| term(*byte, *low, *high)).sum();
    for ((code, low), high) in chunks.zip(lows).zip(highs) {
        for lane in 0..LANES {
            sums[lane] += term(code[lane], low[lane], high[lane]);
        }
    }
    sums.iter().sum::<i32>() + tail
}

/// [`sum_in_i32`] for codes of [`FIXED_BYTES`], in i16 lanes: each block of
/// [`CHUNKS_PER_BLOCK`] chunks is summed in i16 (it cannot overflow), then in i32.
fn sum_in_i16(code: &[u8; FIXED_BYTES], low: &[i16], high: &[i16]) -> i32 {
    let term = |byte: u8, low: i16, high: i16| low * i16::from(byte & 0x0f) + high * i16::from(byte >> 4);
    let (low, high) = (&low[..FIXED_BYTES], &high[..FIXED_BYTES]);
    let mut total = 0i32;
    for block in (0..FIXED_BYTES).step_by(LANES * CHUNKS_PER_BLOCK) {
        let end = (block + LANES * CHUNKS_PER_BLOCK).min(FIXED_BYTES);
        let mut sums = [0i16; LANES];
        let chunks = code[block..end].chunks_exact(LANES);
        for ((code, low), high) in
            chunks.zip(low[block..end].chunks_exact(LANES)).zip(high[block..end].chunks_exact(LANES))
        {
            for lane in 0..LANES {
                sums[lane] += term(code[lane], low[lane], high[lane]);
            }
        }
        total += sums.iter().map(|sum| i32::from(*sum)).sum::<i32>();
    }
    total
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

/// The dot product of `query` with int8 components (each byte read as two's complement), with
/// eight independent accumulators like [`dot`].
pub(super) fn dot_i8(query: &[f32], components: &[u8]) -> f32 {
    const LANES: usize = 8;
    // The same bits read as signed.
    #[allow(clippy::cast_possible_wrap)]
    let value = |byte: u8| f32::from(byte as i8);
    let mut sums = [0.0f32; LANES];
    let queries = query.chunks_exact(LANES);
    let bytes = components.chunks_exact(LANES);
    let tail: f32 =
        queries.remainder().iter().zip(bytes.remainder()).map(|(query, byte)| query * value(*byte)).sum();
    for (query, byte) in queries.zip(bytes) {
        for lane in 0..LANES {
            sums[lane] += query[lane] * value(byte[lane]);
        }
    }
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code scores close to the exact dot product, for odd and even dimensions; its clipped
    /// scale decodes no farther from the vector (in squared error) than mapping the largest
    /// magnitude to the top level would; and it keeps the signs of its components.
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
            let decoded = decode(&code, scale);
            assert_eq!(decoded.len(), 2 * code.len());
            let error: f32 =
                decoded.iter().zip(&vector).map(|(decoded, value)| (decoded - value).powi(2)).sum();
            let unclipped = squared_error(&vector, scale_for(&vector, CODE_LEVELS));
            assert!(error <= unclipped + 1e-4, "{dimension}: {error} vs {unclipped}");
        }
        let mut code = vec![0u8; 1];
        let scale = encode(&[-1.0, 0.5], &mut code);
        assert!(QueryCode::new(&[-1.0, 0.0]).score(&code, scale) > 0.9);
        assert!(QueryCode::new(&[0.0, -1.0]).score(&code, scale) < -0.4);
    }

    /// A rare large component is clipped rather than given the top level: the many small
    /// components keep distinct levels, so the code ranks by them.
    #[test]
    fn a_rare_large_component_is_clipped() {
        let mut vector: Vec<f32> = (0..200).map(|i| ((i * 7919 % 601) as f32 / 600.0 - 0.5) * 0.6).collect();
        vector.push(1.0);
        let mut code = vec![0u8; code_bytes(vector.len())];
        let scale = encode(&vector, &mut code);
        assert!(scale > CODE_LEVELS, "{scale}: the largest was mapped to the top level");
        let clipped = squared_error(&vector, scale);
        let unclipped = squared_error(&vector, scale_for(&vector, CODE_LEVELS));
        assert!(clipped < unclipped, "{clipped} vs {unclipped}");
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
