//! [`VectorFile`]: a sled store's f32 vectors in fixed-size slots of a file of their own in the
//! data directory (`vectors.f32`), which the `vectors` tree points into.
//!
//! Why not in the tree: a million 384-dimension vectors are 1.5 GB of sled values, and one pass
//! over them (loading recall's index) left sled holding about 250 MB more, whatever its cache
//! capacity; the same pass over a file costs the page cache, not the process. A slot holds one
//! vector's little-endian f32s; the tree holds a [`POINTER_BYTES`]-byte pointer to it: a tag, the
//! slot, and a CRC-32 of the slot's bytes. A pointer whose slot does not match its checksum names
//! no vector (a crash between the file and the tree, or a slot reused after a delete): reading it
//! gives `None`, as if the vector had been deleted. Stores written before the file keep their
//! vectors inline in the tree (a value whose length is a multiple of four, never a pointer's);
//! both read the same, and `agentwire compact` moves inline vectors into the file.
//!
//! Writes go into a slot freed by a delete once that delete is on disk, else at the end. The
//! group commit syncs the file before it flushes the tree, so a write that was acknowledged has
//! its vector on disk. (Sled may flush the tree on its own first; a crash then can leave the
//! message of an unacknowledged save without its vector, which recall skips.) Slots freed by
//! deletes before a restart are reclaimed by `agentwire compact`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::sled_codec::engine;
use super::{StoreError, keys};

/// The file's name in the data directory.
pub(super) const FILE_NAME: &str = "vectors.f32";
/// The bytes of a pointer: a tag, the slot (u64), the checksum (u32). Not a multiple of four, so
/// never the length of an inline vector.
pub(super) const POINTER_BYTES: usize = 13;
/// A pointer's first byte.
const POINTER_TAG: u8 = 0xF5;

/// The vectors' file and the slots it hands out.
#[derive(Debug)]
pub(super) struct VectorFile {
    file: File,
    path: PathBuf,
    /// The components of every vector, set by the store's embedder (the first vectors written).
    dimension: OnceLock<usize>,
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    /// Slots handed out so far (the next new slot).
    next: u64,
    /// Slots free to write into.
    free: Vec<u64>,
    /// Slots freed by deletes that may not be on disk yet: free once the next flush is done.
    freed: Vec<u64>,
    /// Whether a vector was written since the last sync (a commit that wrote none skips it).
    unsynced: bool,
}

/// Where a stored vector is: inline in the tree, or in a slot of the file.
enum Stored<'a> {
    Inline(&'a [u8]),
    Slot { slot: u64, checksum: u32 },
}

fn io(action: &str, path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot {action} `{}`: {error}", path.display()))
}

fn corrupt(reason: String) -> StoreError {
    StoreError::Corrupt { tree: "vectors", reason }
}

impl VectorFile {
    /// Opens (or creates) the file in the data directory `directory`, for vectors of `dimension`
    /// components when the store has an embedder already.
    pub(super) fn open(directory: &Path, dimension: Option<usize>) -> Result<VectorFile, StoreError> {
        let path = directory.join(FILE_NAME);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|error| io("open", &path, &error))?;
        let vectors = VectorFile { file, path, dimension: OnceLock::new(), slots: Mutex::default() };
        if let Some(dimension) = dimension {
            vectors.set_dimension(dimension)?;
        }
        Ok(vectors)
    }

    /// Sets the dimension of every vector (the store's embedder's); a second call with another
    /// is refused. A slot the file ends in the middle of (a write a crash cut short) is written
    /// over.
    pub(super) fn set_dimension(&self, dimension: usize) -> Result<(), StoreError> {
        if dimension == 0 {
            return Err(corrupt("a vector has no components".to_owned()));
        }
        let mut slots = self.slots.lock().expect("slots lock");
        match self.dimension.get() {
            Some(&set) if set == dimension => Ok(()),
            Some(&set) => {
                Err(corrupt(format!("the vector file holds {set} components a vector, not {dimension}")))
            }
            None => {
                let length = self.file.metadata().map_err(|error| io("read", &self.path, &error))?.len();
                slots.next = length / (dimension as u64 * 4);
                self.dimension.set(dimension).expect("set under the slots lock");
                Ok(())
            }
        }
    }

    fn slot_bytes(&self) -> Result<usize, StoreError> {
        self.dimension.get().map(|dimension| dimension * 4).ok_or_else(|| {
            corrupt("a vector points into the vector file, but the store has no embedder".to_owned())
        })
    }

    /// Writes `vector` into a slot and returns the pointer the tree keeps for it.
    pub(super) fn write(&self, vector: &[f32]) -> Result<[u8; POINTER_BYTES], StoreError> {
        let bytes: Vec<u8> = vector.iter().flat_map(|value| value.to_le_bytes()).collect();
        if bytes.len() != self.slot_bytes()? {
            return Err(corrupt(format!(
                "a vector of {} components in a file of {:?}",
                vector.len(),
                self.dimension
            )));
        }
        let slot = {
            let mut slots = self.slots.lock().expect("slots lock");
            slots.unsynced = true;
            slots.free.pop().unwrap_or_else(|| {
                slots.next += 1;
                slots.next - 1
            })
        };
        if let Err(error) = self.file.write_all_at(&bytes, slot * bytes.len() as u64) {
            self.release(&[slot]);
            return Err(io("write", &self.path, &error));
        }
        let mut pointer = [0u8; POINTER_BYTES];
        pointer[0] = POINTER_TAG;
        pointer[1..9].copy_from_slice(&slot.to_le_bytes());
        pointer[9..].copy_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
        Ok(pointer)
    }

    /// The vector a value of the `vectors` tree holds or points to; `None` when its slot no
    /// longer holds it.
    pub(super) fn read(&self, value: &[u8]) -> Result<Option<Vec<f32>>, StoreError> {
        let mut bytes = Vec::new();
        let found = match parse(value)? {
            Stored::Inline(inline) => inline,
            Stored::Slot { slot, checksum } => {
                let slot_bytes = self.slot_bytes()?;
                bytes.resize(slot_bytes, 0);
                match self.file.read_exact_at(&mut bytes, slot * slot_bytes as u64) {
                    Ok(()) if crc32fast::hash(&bytes) == checksum => &bytes,
                    Ok(()) => return Ok(None),
                    Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(error) => return Err(io("read", &self.path, &error)),
                }
            }
        };
        Ok(Some(found.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()))
    }

    /// The bytes a value of the `vectors` tree stands for (a quota counts the vector, not its
    /// pointer).
    pub(super) fn stored_bytes(&self, value: &[u8]) -> u64 {
        match parse(value) {
            Ok(Stored::Slot { .. }) => self.slot_bytes().unwrap_or(0) as u64,
            _ => value.len() as u64,
        }
    }

    /// Frees the slot `value` points to once the delete that dropped it is on disk (see
    /// [`VectorFile::synced`]); an inline vector has none.
    pub(super) fn deleted(&self, value: &[u8]) {
        if let Ok(Stored::Slot { slot, .. }) = parse(value) {
            self.slots.lock().expect("slots lock").freed.push(slot);
        }
    }

    /// Frees slots no pointer on disk or in the tree names (written for a save that then did
    /// not keep them).
    pub(super) fn release(&self, slots: &[u64]) {
        self.slots.lock().expect("slots lock").free.extend_from_slice(slots);
    }

    /// The slot a pointer names.
    pub(super) fn slot_of(pointer: &[u8; POINTER_BYTES]) -> u64 {
        u64::from_le_bytes(pointer[1..9].try_into().expect("eight bytes"))
    }

    /// Syncs what was written to disk, before the tree is flushed. Returns the slots freed by
    /// deletes up to now, to hand to [`VectorFile::flushed`] once the tree's flush is done.
    pub(super) fn sync(&self) -> Result<Vec<u64>, StoreError> {
        let (freed, unsynced) = {
            let mut slots = self.slots.lock().expect("slots lock");
            (std::mem::take(&mut slots.freed), std::mem::take(&mut slots.unsynced))
        };
        if unsynced && let Err(error) = self.file.sync_data() {
            let mut slots = self.slots.lock().expect("slots lock");
            slots.unsynced = true;
            slots.freed.extend(freed);
            return Err(io("sync", &self.path, &error));
        }
        Ok(freed)
    }

    /// The tree is flushed: the deletes that freed `freed` are on disk, so their slots can be
    /// written again.
    pub(super) fn flushed(&self, freed: Vec<u64>) {
        self.slots.lock().expect("slots lock").free.extend(freed);
    }
}

/// The dimension of a store's vectors, from the embedder its `meta` tree records
/// (`id/dimension`); `None` before the first vectors.
pub(super) fn stored_dimension(meta: &sled::Tree) -> Result<Option<usize>, StoreError> {
    let Some(embedder) = meta.get(keys::META_EMBEDDER).map_err(engine)? else { return Ok(None) };
    let text = String::from_utf8_lossy(&embedder);
    let dimension = text.rsplit('/').next().and_then(|dimension| dimension.parse().ok());
    dimension.map(Some).ok_or_else(|| StoreError::Corrupt {
        tree: "meta",
        reason: format!("the embedder `{text}` names no dimension"),
    })
}

fn parse(value: &[u8]) -> Result<Stored<'_>, StoreError> {
    if value.len().is_multiple_of(4) {
        return Ok(Stored::Inline(value));
    }
    if value.len() != POINTER_BYTES || value[0] != POINTER_TAG {
        return Err(corrupt(format!("a value of {} bytes is neither a vector nor a pointer", value.len())));
    }
    Ok(Stored::Slot {
        slot: u64::from_le_bytes(value[1..9].try_into().expect("eight bytes")),
        checksum: u32::from_le_bytes(value[9..13].try_into().expect("four bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(seed: u32) -> Vec<f32> {
        (0..8).map(|i| (seed * 8 + i) as f32 / 10.0).collect()
    }

    /// A written vector reads back through its pointer, after a reopen too; an inline value
    /// reads as itself; a slot written over (freed, synced, flushed, reused) reads as no vector
    /// through the old pointer, and a slot past the end likewise.
    #[test]
    fn pointers_read_back_their_vectors_and_only_theirs() {
        let directory = tempfile::tempdir().expect("temp dir");
        let file = VectorFile::open(directory.path(), Some(8)).expect("opened");
        let first = file.write(&vector(1)).expect("written");
        let second = file.write(&vector(2)).expect("written");
        assert_eq!(file.read(&first).expect("read"), Some(vector(1)));
        let inline: Vec<u8> = vector(3).iter().flat_map(|value| value.to_le_bytes()).collect();
        assert_eq!(file.read(&inline).expect("read"), Some(vector(3)));
        assert_eq!(file.stored_bytes(&first), 32);
        assert!(file.write(&[1.0; 3]).is_err(), "another dimension");

        file.deleted(&first);
        let freed = file.sync().expect("synced");
        assert_eq!(VectorFile::slot_of(&file.write(&vector(4)).expect("written")), 2, "not before the flush");
        file.flushed(freed);
        let reused = file.write(&vector(5)).expect("written");
        assert_eq!(VectorFile::slot_of(&reused), VectorFile::slot_of(&first));
        assert_eq!(file.read(&first).expect("read"), None, "its slot holds another vector now");
        assert_eq!(file.read(&reused).expect("read"), Some(vector(5)));
        drop(file);

        let reopened = VectorFile::open(directory.path(), Some(8)).expect("reopened");
        assert_eq!(reopened.read(&second).expect("read"), Some(vector(2)));
        let mut past_the_end = second;
        past_the_end[1..9].copy_from_slice(&99u64.to_le_bytes());
        assert_eq!(reopened.read(&past_the_end).expect("read"), None);
        assert_eq!(VectorFile::slot_of(&reopened.write(&vector(6)).expect("written")), 3, "appended");
        assert!(reopened.read(&[1, 2, 3]).is_err(), "neither a vector nor a pointer");
    }
}
