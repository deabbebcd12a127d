//! A hash that is the same on every build and platform, for features that are stored or
//! shipped (hashed embeddings, the prompt-injection model's n-grams); as a [`Hasher`], the hash
//! of small maps keyed by names from the config (processor ids), which no client chooses.

use std::hash::Hasher;

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bits, of the pieces one after the other.
pub fn fnv1a(pieces: &[&[u8]]) -> u64 {
    let mut hasher = Fnv1a::default();
    for piece in pieces {
        hasher.write(piece);
    }
    hasher.finish()
}

/// FNV-1a as a [`Hasher`]: a few nanoseconds for a short key, where std's SipHash takes tens.
/// Not for keys a client chooses (it does not resist collisions made on purpose).
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a(OFFSET_BASIS)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
