//! An int8 copy of the loaded resources' vectors in one scratch file under the data directory,
//! so that recall rescores its candidates with a read of the page cache each instead of a read
//! from sled each: a slot holds a vector's scale and its components in int8, slots are handed out
//! to the loaded resources and taken back when a resource is dropped or a thread deleted. The
//! file is unlinked as soon as it is created, so it takes disk only while the process runs and
//! never outlives it; it is bounded by the vectors the index holds (about 390 bytes each at 384
//! dimensions, a 256 MiB index at most about 450 MB of file). Writing it can fail (a full disk):
//! then it is given up and recall reads every candidate from sled, as it would without it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::vector_codes::{dot_i8, level, scale_for};

/// The largest magnitude of a component.
const LEVELS: f32 = 127.0;
/// Appended slots are written in batches of about this many bytes.
const BATCH_BYTES: usize = 256 * 1024;

/// The scratch file and its slots.
#[derive(Debug)]
pub(super) struct ScratchVectors {
    /// `None` when there is none (no directory, or it failed).
    file: Option<File>,
    /// The dimension of every vector, set by the first.
    dimension: usize,
    /// Slots handed out so far, free or not.
    slots: u32,
    /// Slots taken back, to hand out again.
    free: Vec<u32>,
    /// Slots `pending_from..slots` not written yet, in order.
    pending: Vec<u8>,
    pending_from: u32,
}

impl ScratchVectors {
    /// A scratch file in `directory`, unlinked at once; none when `directory` is `None` or the
    /// file cannot be made (recall then reads from sled).
    pub(super) fn create(directory: Option<&Path>) -> ScratchVectors {
        let file = directory.and_then(|directory| {
            static CREATED: AtomicU64 = AtomicU64::new(0);
            let created = CREATED.fetch_add(1, Ordering::Relaxed);
            let path = directory.join(format!("recall-scratch-{}-{created}", std::process::id()));
            let file =
                std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path);
            let file = file.ok()?;
            std::fs::remove_file(&path).ok()?;
            Some(file)
        });
        ScratchVectors {
            file,
            dimension: 0,
            slots: 0,
            free: Vec::new(),
            pending: Vec::new(),
            pending_from: 0,
        }
    }

    /// Whether slots can be had.
    fn usable(&self) -> bool {
        self.file.is_some()
    }

    /// The bytes of a slot.
    fn slot_bytes(&self) -> usize {
        4 + self.dimension
    }

    /// Writes `vector` to `slot`, or to a new slot when `slot` is `None`; returns the slot, or
    /// `None` when the file is given up or `vector` is of another dimension than the first.
    pub(super) fn put(&mut self, slot: Option<u32>, vector: &[f32]) -> Option<u32> {
        if !self.usable() {
            return None;
        }
        if self.dimension == 0 {
            self.dimension = vector.len();
        }
        if vector.len() != self.dimension {
            return None;
        }
        let bytes = slot_of(vector);
        let slot = match slot.or_else(|| self.free.pop()) {
            Some(slot) => slot,
            None => {
                self.slots += 1;
                self.pending.extend_from_slice(&bytes);
                if self.pending.len() >= BATCH_BYTES {
                    self.flush();
                }
                return self.usable().then_some(self.slots - 1);
            }
        };
        if slot >= self.pending_from && !self.pending.is_empty() {
            let at = (slot - self.pending_from) as usize * self.slot_bytes();
            self.pending[at..at + bytes.len()].copy_from_slice(&bytes);
        } else {
            self.write(slot, &bytes);
        }
        self.usable().then_some(slot)
    }

    /// Takes a slot back (none are kept once the file is given up: they name nothing).
    pub(super) fn free(&mut self, slot: u32) {
        if self.usable() {
            self.free.push(slot);
        }
    }

    /// Writes the appended slots, so that they can be read.
    pub(super) fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.write(self.pending_from, &pending);
        }
        self.pending = pending;
        self.pending.clear();
        self.pending_from = self.slots;
    }

    fn write(&mut self, slot: u32, bytes: &[u8]) {
        let offset = u64::from(slot) * self.slot_bytes() as u64;
        if let Some(file) = &self.file
            && file.write_all_at(bytes, offset).is_err()
        {
            self.give_up();
        }
    }

    /// Gives the file up (its disk is freed when it is closed).
    pub(super) fn give_up(&mut self) {
        self.file = None;
        self.free.clear();
        self.pending.clear();
    }

    /// The approximate dot product of `query` with the vector in `slot` (written and flushed),
    /// or `None` when it cannot be read.
    pub(super) fn score(&self, slot: u32, query: &[f32]) -> Option<f32> {
        if query.len() != self.dimension {
            return None;
        }
        let mut bytes = Vec::new();
        let scale = self.read(slot, &mut bytes)?;
        Some(dot_i8(query, &bytes[4..]) / scale)
    }

    /// Reads the vector in `slot` (written and flushed), as its int8 copy holds it, into
    /// `room.vector`; `false` when it cannot be read.
    pub(super) fn read_vector(&self, slot: u32, room: &mut VectorRoom) -> bool {
        let Some(scale) = self.read(slot, &mut room.bytes) else { return false };
        room.vector.clear();
        // The bits of a component, read as signed.
        #[allow(clippy::cast_possible_wrap)]
        room.vector.extend(room.bytes[4..].iter().map(|byte| f32::from(*byte as i8) / scale));
        true
    }

    /// Reads `slot` into `bytes` (the scale's four, then the components); its scale.
    fn read(&self, slot: u32, bytes: &mut Vec<u8>) -> Option<f32> {
        let file = self.file.as_ref()?;
        if slot >= self.pending_from {
            return None;
        }
        bytes.resize(self.slot_bytes(), 0);
        let offset = u64::from(slot) * bytes.len() as u64;
        file.read_exact_at(bytes, offset).ok()?;
        Some(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// Room to read vectors back into, kept between reads so that reading a million allocates
/// nothing ([`ScratchVectors::read_vector`]).
#[derive(Debug, Default)]
pub(super) struct VectorRoom {
    bytes: Vec<u8>,
    /// The vector last read.
    pub(super) vector: Vec<f32>,
}

/// A slot's bytes: the scale, then each component as `round(value * scale)`, the largest at ±127.
fn slot_of(vector: &[f32]) -> Vec<u8> {
    let scale = scale_for(vector, LEVELS);
    let mut bytes = Vec::with_capacity(4 + vector.len());
    bytes.extend_from_slice(&scale.to_le_bytes());
    // Within ±127; the cast to u8 keeps the bits.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    bytes.extend(vector.iter().map(|value| level(*value, scale, LEVELS) as i8 as u8));
    bytes
}

#[cfg(test)]
mod tests {
    use super::super::vector_codes::dot;
    use super::*;

    /// Slots written (appended, overwritten before and after a flush, reused once freed) read
    /// back close to their vectors' exact scores, and a scratch without a file hands out none.
    #[test]
    fn slots_score_close_to_their_vectors() {
        let directory = tempfile::tempdir().expect("temp dir");
        let mut scratch = ScratchVectors::create(Some(directory.path()));
        assert_eq!(std::fs::read_dir(directory.path()).expect("listed").count(), 0, "unlinked at once");
        let vector = |seed: usize| -> Vec<f32> {
            (0..48).map(|i| (((i + seed) * 37 % 11) as f32 - 5.0) / 5.0).collect()
        };
        let query = vector(100);
        let first = scratch.put(None, &vector(0)).expect("a slot");
        let second = scratch.put(None, &vector(1)).expect("a slot");
        assert_eq!(scratch.score(first, &query), None, "not readable before a flush");
        scratch.put(Some(second), &vector(2));
        scratch.flush();
        scratch.put(Some(first), &vector(3));
        scratch.free(second);
        let reused = scratch.put(None, &vector(4)).expect("a slot");
        assert_eq!(reused, second, "a freed slot is handed out again");
        let close = |slot: u32, seed: usize| {
            let exact = dot(&query, &vector(seed));
            let read = scratch.score(slot, &query).expect("readable");
            assert!((read - exact).abs() < 0.01 * dot(&query, &query), "{read} vs {exact}");
        };
        close(first, 3);
        close(reused, 4);
        assert_eq!(scratch.put(None, &[1.0; 3]), None, "another dimension");
        assert_eq!(ScratchVectors::create(None).put(None, &vector(0)), None);
    }
}
