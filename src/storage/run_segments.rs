//! [`RunSegments`]: the pages of run records (`sled_store/run_pages.rs`) in append-only segment
//! files of their own beside sled's (`runs/<n>.seg`), which the `run_pages` tree points into.
//!
//! Why not in the tree: sled writes a value larger than a quarter of its 512 KiB segment out of
//! line, as a blob, and counts only the blob's pointer against its page cache's capacity, so it
//! never pages such a value out — a page per batch (up to 256 records, about 150 KB) kept every
//! retained record in memory whatever `cache_mb` said. Cutting pages small enough for sled doubled
//! what writing a record costs; a file takes a page in one write and costs the page cache, not
//! the process.
//!
//! A page is appended to the newest segment (a new one past [`SEGMENT_BYTES`], and after each
//! open); the tree keeps a [`POINTER_BYTES`]-byte pointer to it: a tag, the segment, the offset,
//! the length, and a CRC-32 of the page. A pointer whose page is gone or does not match its
//! checksum (a crash between the file and the tree) names no page: reading it gives `None`, and
//! its records are as if deleted. Records are never group-committed, so the files are not synced
//! either; the OS writes them back as sled writes its own.
//!
//! Each segment counts the pages that point into it; once none does (retention removes the oldest
//! runs first, so the oldest segments empty first) it is deleted. The counts are made when the
//! run index is built ([`RunSegments::track`]); until then nothing is deleted.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::StoreError;

/// The directory of the segments, in the store's directory.
pub(super) const DIRECTORY: &str = "runs";
/// A segment takes pages until it holds this many bytes.
const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;
/// The bytes of a pointer: a tag, the segment (u32), offset (u32), length (u32) and checksum
/// (u32), all little-endian.
pub(super) const POINTER_BYTES: usize = 17;
/// A pointer's first byte. (A page kept inline by an older store begins with its record count, a
/// big-endian u32 under 2^24, and is longer than a pointer.)
const POINTER_TAG: u8 = 0xF7;

/// Where a page is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pointer {
    segment: u32,
    offset: u32,
    len: u32,
    checksum: u32,
}

impl Pointer {
    fn encode(self) -> [u8; POINTER_BYTES] {
        let mut bytes = [0u8; POINTER_BYTES];
        bytes[0] = POINTER_TAG;
        for (at, word) in [self.segment, self.offset, self.len, self.checksum].into_iter().enumerate() {
            bytes[1 + 4 * at..5 + 4 * at].copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// The pointer a value of `run_pages` holds, if it holds one (else the page itself).
    fn decode(value: &[u8]) -> Option<Pointer> {
        if value.len() != POINTER_BYTES || value[0] != POINTER_TAG {
            return None;
        }
        let word =
            |at: usize| u32::from_le_bytes(value[1 + 4 * at..5 + 4 * at].try_into().expect("four bytes"));
        Some(Pointer { segment: word(0), offset: word(1), len: word(2), checksum: word(3) })
    }
}

/// The segment files of one store.
#[derive(Debug)]
pub(super) struct RunSegments {
    directory: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The segment being appended to, and its length.
    current: Option<(u32, u64)>,
    /// The number the next segment takes.
    next: u32,
    /// Open segments.
    files: HashMap<u32, Arc<File>>,
    /// Pages pointing into each segment, once [`RunSegments::track`] counted them.
    live: Option<BTreeMap<u32, u64>>,
}

fn io(action: &str, path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot {action} `{}`: {error}", path.display()))
}

/// The number of a segment file's name (`<n>.seg`).
fn segment_number(name: &std::ffi::OsStr) -> Option<u32> {
    name.to_str()?.strip_suffix(".seg")?.parse().ok()
}

impl RunSegments {
    /// The segments in `store`'s directory (none yet is fine).
    pub(super) fn open(store: &Path) -> Result<RunSegments, StoreError> {
        let directory = store.join(DIRECTORY);
        let mut next = 0;
        match std::fs::read_dir(&directory) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry.map_err(|error| io("read", &directory, &error))?;
                    if let Some(number) = segment_number(&entry.file_name()) {
                        next = next.max(number.saturating_add(1));
                    }
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(io("read", &directory, &error)),
        }
        Ok(RunSegments { directory, state: Mutex::new(State { next, ..State::default() }) })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn path_of(&self, segment: u32) -> PathBuf {
        self.directory.join(format!("{segment:08}.seg"))
    }

    /// Whether a value of `run_pages` points into a segment (else it is an inline page).
    pub(super) fn is_pointer(value: &[u8]) -> bool {
        Pointer::decode(value).is_some()
    }

    /// Appends `page` and returns the pointer the tree keeps for it.
    pub(super) fn append(&self, page: &[u8]) -> Result<[u8; POINTER_BYTES], StoreError> {
        let len = u32::try_from(page.len())
            .map_err(|_| StoreError::Unavailable(format!("a page of {} bytes", page.len())))?;
        let mut state = self.state();
        let (segment, offset) = match state.current {
            Some((segment, length)) if length + u64::from(len) <= SEGMENT_BYTES || length == 0 => {
                (segment, length)
            }
            _ => {
                let segment = state.next;
                state.next += 1;
                std::fs::create_dir_all(&self.directory)
                    .map_err(|error| io("create", &self.directory, &error))?;
                let path = self.path_of(segment);
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(|error| io("create", &path, &error))?;
                state.files.insert(segment, Arc::new(file));
                state.current = Some((segment, 0));
                (segment, 0)
            }
        };
        let file = Arc::clone(&state.files[&segment]);
        file.write_all_at(page, offset).map_err(|error| io("write", &self.path_of(segment), &error))?;
        state.current = Some((segment, offset + u64::from(len)));
        if let Some(live) = state.live.as_mut() {
            *live.entry(segment).or_default() += 1;
        }
        let offset = u32::try_from(offset).expect("segments stay under 4 GiB");
        Ok(Pointer { segment, offset, len, checksum: crc32fast::hash(page) }.encode())
    }

    /// The page `pointer` names; `None` when it is gone.
    pub(super) fn read(&self, pointer: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(pointer) = Pointer::decode(pointer) else { return Ok(None) };
        let Some(file) = self.file(pointer.segment)? else { return Ok(None) };
        let mut page = vec![0u8; pointer.len as usize];
        match file.read_exact_at(&mut page, u64::from(pointer.offset)) {
            Ok(()) if crc32fast::hash(&page) == pointer.checksum => Ok(Some(page)),
            Ok(()) => Ok(None),
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(error) => Err(io("read", &self.path_of(pointer.segment), &error)),
        }
    }

    /// An open segment; `None` when its file is gone.
    fn file(&self, segment: u32) -> Result<Option<Arc<File>>, StoreError> {
        let mut state = self.state();
        if let Some(file) = state.files.get(&segment) {
            return Ok(Some(Arc::clone(file)));
        }
        let path = self.path_of(segment);
        match File::open(&path) {
            Ok(file) => Ok(Some(Arc::clone(state.files.entry(segment).or_insert_with(|| Arc::new(file))))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io("open", &path, &error)),
        }
    }

    /// Counts the pages pointing into each segment from every value of `run_pages`, and deletes
    /// the segments none points into (left by a crash, or emptied before one).
    pub(super) fn track<'a>(&self, values: impl Iterator<Item = &'a [u8]>) -> Result<(), StoreError> {
        let mut live: BTreeMap<u32, u64> = BTreeMap::new();
        for pointer in values.filter_map(Pointer::decode) {
            *live.entry(pointer.segment).or_default() += 1;
        }
        let mut state = self.state();
        let unused: Vec<u32> = match std::fs::read_dir(&self.directory) {
            Ok(entries) => entries
                .filter_map(|entry| segment_number(&entry.ok()?.file_name()))
                .filter(|segment| {
                    !live.contains_key(segment) && Some(*segment) != state.current.map(|(s, _)| s)
                })
                .collect(),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(io("read", &self.directory, &error)),
        };
        if let Some((current, _)) = state.current {
            live.entry(current).or_default();
        }
        state.live = Some(live);
        for segment in unused {
            self.delete(&mut state, segment);
        }
        Ok(())
    }

    /// The page `pointer` named is no longer pointed to (removed, or written elsewhere): its
    /// segment is deleted once no page points into it.
    pub(super) fn released(&self, pointer: &[u8]) {
        let Some(pointer) = Pointer::decode(pointer) else { return };
        let mut state = self.state();
        let current = state.current.map(|(segment, _)| segment);
        let Some(live) = state.live.as_mut() else { return };
        let Some(count) = live.get_mut(&pointer.segment) else { return };
        *count = count.saturating_sub(1);
        if *count == 0 && current != Some(pointer.segment) {
            live.remove(&pointer.segment);
            self.delete(&mut state, pointer.segment);
        }
    }

    /// Syncs the segments written to disk (a compaction, before it swaps its copy in).
    pub(super) fn sync(&self) -> Result<(), StoreError> {
        let files: Vec<(u32, Arc<File>)> =
            self.state().files.iter().map(|(segment, file)| (*segment, Arc::clone(file))).collect();
        for (segment, file) in files {
            file.sync_data().map_err(|error| io("sync", &self.path_of(segment), &error))?;
        }
        Ok(())
    }

    /// Deletes a segment's file (a failure leaves it for the next open to find unused).
    fn delete(&self, state: &mut State, segment: u32) {
        state.files.remove(&segment);
        let _ = std::fs::remove_file(self.path_of(segment));
    }

    /// The segments' files, for a test.
    #[cfg(test)]
    fn files(&self) -> Vec<u32> {
        let mut files: Vec<u32> = std::fs::read_dir(&self.directory)
            .map(|entries| entries.filter_map(|entry| segment_number(&entry.ok()?.file_name())).collect())
            .unwrap_or_default();
        files.sort_unstable();
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appended pages read back through their pointers, after a reopen too; a pointer whose bytes
    /// changed, or whose segment is gone, reads as no page; an inline page is not a pointer.
    #[test]
    fn pages_read_back_through_their_pointers() {
        let store = tempfile::tempdir().expect("temp dir");
        let segments = RunSegments::open(store.path()).expect("opened");
        let first = segments.append(b"first page").expect("appended");
        let second = segments.append(b"second").expect("appended");
        assert_eq!(segments.read(&first).expect("read").as_deref(), Some(&b"first page"[..]));
        assert!(RunSegments::is_pointer(&first) && !RunSegments::is_pointer(&[0, 0, 0, 1, 0, 0, 0, 9]));
        drop(segments);

        let reopened = RunSegments::open(store.path()).expect("reopened");
        assert_eq!(reopened.read(&second).expect("read").as_deref(), Some(&b"second"[..]));
        let mut altered = second;
        altered[13] ^= 1;
        assert_eq!(reopened.read(&altered).expect("read"), None, "checksum");
        let third = reopened.append(b"after a reopen").expect("appended");
        assert_eq!(reopened.files(), [0, 1], "a reopen starts a new segment");
        std::fs::remove_file(reopened.path_of(0)).expect("removed");
        let mut fresh = RunSegments::open(store.path()).expect("reopened");
        assert_eq!(fresh.read(&first).expect("read"), None, "its segment is gone");
        assert_eq!(fresh.read(&third).expect("read").as_deref(), Some(&b"after a reopen"[..]));
        fresh = RunSegments::open(store.path()).expect("reopened");
        assert_eq!(fresh.state().next, 2);
    }

    /// A segment is deleted once no page points into it, never the one being appended to;
    /// tracking deletes the segments nothing points into.
    #[test]
    fn emptied_segments_are_deleted() {
        let store = tempfile::tempdir().expect("temp dir");
        let segments = RunSegments::open(store.path()).expect("opened");
        let old = segments.append(b"old").expect("appended");
        drop(segments);
        let orphaned = RunSegments::open(store.path()).expect("reopened");
        orphaned.append(b"orphan").expect("appended");
        drop(orphaned);

        let segments = RunSegments::open(store.path()).expect("reopened");
        segments.track([old.as_slice()].into_iter()).expect("tracked");
        assert_eq!(segments.files(), [0], "the segment nothing points into is deleted");
        let new = segments.append(b"new").expect("appended");
        segments.released(&new);
        assert_eq!(segments.files(), [0, 2], "not the one being appended to");
        segments.released(&old);
        assert_eq!(segments.files(), [2]);
        assert_eq!(segments.read(&old).expect("read"), None);
    }
}
