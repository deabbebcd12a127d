//! A hash that is the same on every build and platform, for features that are stored or
//! shipped (hashed embeddings, the prompt-injection model's n-grams).

/// FNV-1a, 64 bits, of the pieces one after the other.
pub fn fnv1a(pieces: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for piece in pieces {
        for byte in *piece {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}
