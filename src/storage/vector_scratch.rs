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
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::vector_codes::{dot_i8, level, scale_for};

/// The largest magnitude of a component.
const LEVELS: f32 = 127.0;
/// A writer writes its slots in batches of about this many bytes.
const BATCH_BYTES: usize = 256 * 1024;

/// The scratch file and its slots, shared: slots are handed out under a small lock of their own,
/// written by [`ScratchWriter`]s (each its own batch: a load outside the index's lock and the
/// writes under it never share one) and read by anyone. A slot is read only once the writer that
/// put it has flushed: the index reads a resource's slots under its lock, and every writer that
/// puts a loaded resource's slots is flushed before that lock is let go.
#[derive(Debug)]
pub(super) struct ScratchVectors {
    /// `None` when there is none (no directory, or it could not be made).
    file: Option<File>,
    /// Set when writing failed: the file is emptied, and no slot is read or handed out again.
    given_up: AtomicBool,
    /// The dimension of every vector, set by the first (0 until then).
    dimension: AtomicUsize,
    slots: Mutex<Slots>,
}

/// The slots handed out so far, free or not, and those taken back to hand out again.
#[derive(Debug, Default)]
struct Slots {
    handed_out: u32,
    free: Vec<u32>,
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
            given_up: AtomicBool::new(false),
            dimension: AtomicUsize::new(0),
            slots: Mutex::new(Slots::default()),
        }
    }

    /// A writer of slots, its batch written when it is flushed or dropped.
    pub(super) fn writer(&self) -> ScratchWriter<'_> {
        ScratchWriter { scratch: self, slots: Vec::new(), bytes: Vec::new() }
    }

    /// Whether slots can be had.
    fn usable(&self) -> bool {
        self.file.is_some() && !self.given_up.load(Ordering::Relaxed)
    }

    /// The bytes of a slot.
    fn slot_bytes(&self) -> usize {
        4 + self.dimension.load(Ordering::Relaxed)
    }

    /// Whether a vector of `dimension` components fits the file's slots (the first sets them).
    fn fits(&self, dimension: usize) -> bool {
        match self.dimension.compare_exchange(0, dimension, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => true,
            Err(set) => set == dimension,
        }
    }

    fn locked_slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        // The slots are a counter and a list: whatever a panic left them as is still usable.
        self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot to write: a free one, else a new one at the file's end.
    fn hand_out(&self) -> Option<u32> {
        let mut slots = self.locked_slots();
        if let Some(slot) = slots.free.pop() {
            return Some(slot);
        }
        let slot = slots.handed_out;
        slots.handed_out = slot.checked_add(1)?;
        Some(slot)
    }

    /// Takes a slot back (none are kept once the file is given up: they name nothing).
    pub(super) fn free(&self, slot: u32) {
        if self.usable() {
            self.locked_slots().free.push(slot);
        }
    }

    fn write(&self, slot: u32, bytes: &[u8]) {
        let offset = u64::from(slot) * self.slot_bytes() as u64;
        if let Some(file) = &self.file
            && self.usable()
            && file.write_all_at(bytes, offset).is_err()
        {
            self.give_up();
        }
    }

    /// Gives the file up, emptying it so that its disk is freed now.
    pub(super) fn give_up(&self) {
        self.given_up.store(true, Ordering::Relaxed);
        if let Some(file) = &self.file {
            let _ = file.set_len(0);
        }
        self.locked_slots().free.clear();
    }

    /// The approximate dot product of `query` with the vector in `slot` (flushed), or `None`
    /// when it cannot be read.
    pub(super) fn score(&self, slot: u32, query: &[f32]) -> Option<f32> {
        if query.len() != self.dimension.load(Ordering::Relaxed) {
            return None;
        }
        let mut bytes = Vec::new();
        let scale = self.read(slot, &mut bytes)?;
        Some(dot_i8(query, &bytes[4..]) / scale)
    }

    /// Reads the vector in `slot` (flushed), as its int8 copy holds it, into `room.vector`;
    /// `false` when it cannot be read.
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
        let file = self.file.as_ref().filter(|_| self.usable())?;
        bytes.resize(self.slot_bytes(), 0);
        let offset = u64::from(slot) * bytes.len() as u64;
        file.read_exact_at(bytes, offset).ok()?;
        Some(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// One writer's slots, put and not yet in the file; written when flushed or dropped.
#[derive(Debug)]
pub(super) struct ScratchWriter<'a> {
    scratch: &'a ScratchVectors,
    /// The slots put since the last flush, in order.
    slots: Vec<u32>,
    /// Their bytes, a slot's worth each.
    bytes: Vec<u8>,
}

impl<'a> ScratchWriter<'a> {
    /// The scratch file written to.
    pub(super) fn scratch(&self) -> &'a ScratchVectors {
        self.scratch
    }

    /// Puts `vector` in `slot`, or in a slot handed out when `slot` is `None`; returns the slot,
    /// or `None` when the file is given up or `vector` is of another dimension than the first.
    /// It can be read once this writer is flushed.
    pub(super) fn put(&mut self, slot: Option<u32>, vector: &[f32]) -> Option<u32> {
        let scratch = self.scratch;
        if !scratch.usable() || !scratch.fits(vector.len()) {
            return None;
        }
        let slot = match slot {
            Some(slot) => slot,
            None => scratch.hand_out()?,
        };
        self.slots.push(slot);
        put_slot(&mut self.bytes, vector);
        if self.bytes.len() >= BATCH_BYTES {
            self.flush();
        }
        scratch.usable().then_some(slot)
    }

    /// Writes the slots put so far, so that they can be read: each run of consecutive slots in
    /// one write, the last put of a slot put twice winning.
    pub(super) fn flush(&mut self) {
        if self.slots.is_empty() {
            return;
        }
        let width = self.scratch.slot_bytes();
        let first = self.slots[0];
        let appended = self.slots.iter().zip(first..).all(|(slot, expected)| *slot == expected);
        if appended {
            self.scratch.write(first, &self.bytes);
        } else {
            let mut order: Vec<usize> = (0..self.slots.len()).collect();
            // By slot, and the last put of each first among its equals, to keep only it.
            order.sort_by_key(|&put| (self.slots[put], std::cmp::Reverse(put)));
            order.dedup_by_key(|put| self.slots[*put]);
            let mut run = Vec::new();
            let mut start = 0;
            while start < order.len() {
                let mut end = start + 1;
                while end < order.len() && self.slots[order[end]] == self.slots[order[end - 1]] + 1 {
                    end += 1;
                }
                run.clear();
                for &put in &order[start..end] {
                    run.extend_from_slice(&self.bytes[put * width..(put + 1) * width]);
                }
                self.scratch.write(self.slots[order[start]], &run);
                start = end;
            }
        }
        self.slots.clear();
        self.bytes.clear();
    }
}

impl Drop for ScratchWriter<'_> {
    fn drop(&mut self) {
        self.flush();
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

/// Appends a slot's bytes to `bytes`: the scale, then each component as `round(value * scale)`,
/// the largest at ±127.
fn put_slot(bytes: &mut Vec<u8>, vector: &[f32]) {
    let scale = scale_for(vector, LEVELS);
    bytes.extend_from_slice(&scale.to_le_bytes());
    // Within ±127; the cast to u8 keeps the bits.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    bytes.extend(vector.iter().map(|value| level(*value, scale, LEVELS) as i8 as u8));
}

#[cfg(test)]
mod tests {
    use super::super::vector_codes::dot;
    use super::*;

    /// Slots put by two writers at once (appended, overwritten before and after a flush, reused
    /// once freed) read back close to their vectors' exact scores once written; a given-up file
    /// is emptied and reads nothing, and a scratch without a file hands out no slot.
    #[test]
    fn slots_score_close_to_their_vectors() {
        let directory = tempfile::tempdir().expect("temp dir");
        let scratch = ScratchVectors::create(Some(directory.path()));
        assert_eq!(std::fs::read_dir(directory.path()).expect("listed").count(), 0, "unlinked at once");
        let vector = |seed: usize| -> Vec<f32> {
            (0..48).map(|i| (((i + seed) * 37 % 11) as f32 - 5.0) / 5.0).collect()
        };
        let query = vector(100);
        let (mut loader, mut writes) = (scratch.writer(), scratch.writer());
        let first = loader.put(None, &vector(0)).expect("a slot");
        let second = writes.put(None, &vector(1)).expect("a slot");
        let third = loader.put(None, &vector(5)).expect("a slot");
        assert_eq!(scratch.score(third, &query), None, "nothing past the file's end before a flush");
        writes.put(Some(second), &vector(2));
        writes.flush();
        loader.put(Some(first), &vector(3));
        drop(loader);
        scratch.free(second);
        let reused = writes.put(None, &vector(4)).expect("a slot");
        assert_eq!(reused, second, "a freed slot is handed out again");
        writes.flush();
        let close = |slot: u32, seed: usize| {
            let exact = dot(&query, &vector(seed));
            let read = scratch.score(slot, &query).expect("readable");
            assert!((read - exact).abs() < 0.01 * dot(&query, &query), "{read} vs {exact}");
        };
        close(first, 3);
        close(reused, 4);
        close(third, 5);
        assert_eq!(writes.put(None, &[1.0; 3]), None, "another dimension");
        scratch.give_up();
        assert_eq!(scratch.score(first, &query), None, "given up");
        assert_eq!(writes.put(None, &vector(6)), None, "given up");
        assert_eq!(
            scratch.file.as_ref().and_then(|file| file.metadata().ok()).map(|meta| meta.len()),
            Some(0)
        );
        assert_eq!(ScratchVectors::create(None).writer().put(None, &vector(0)), None);
    }
}
