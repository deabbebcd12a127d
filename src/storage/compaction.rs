//! Compaction: the store rewritten into a fresh database holding only its live records, so that
//! the data directory shrinks back to the live data (sled reuses the space of overwritten and
//! deleted records, but never gives it back to the disk). Offline — `agentwire compact`, with the
//! server stopped — and crash-safe: the copy is written beside the store, marked complete by a
//! rename, and swapped in by two more; opening the store finishes a swap a crash interrupted.
//! The vector file is rewritten with it: the live vectors only (inline ones of older stores
//! included), in slots one after another, with the pointers to them; and so are the run
//! records' segments: the live pages only (inline ones of older stores included).

use std::path::{Path, PathBuf};

use super::StoreError;
use super::run_segments::RunSegments;
use super::sled_codec::{Batched, copy_tree, engine, open_waiting_for_lock};
use super::vector_file::{VectorFile, stored_dimension};

/// The page cache of the store being rewritten: one pass over it needs little.
const REWRITE_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// What a compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compacted {
    /// Bytes the store's directory took before.
    pub before_bytes: u64,
    /// Bytes it takes now.
    pub after_bytes: u64,
    /// Records copied.
    pub records: u64,
}

/// The copy being written, the complete copy, and the store set aside during the swap.
fn siblings(path: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let with = |suffix: &str| {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        path.with_file_name(name)
    };
    (with(".compacting"), with(".compacted"), with(".old"))
}

fn io(action: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot {action} `{}`: {error}", path.display()))
}

/// Finishes (or undoes) a compaction a crash interrupted: a complete copy is swapped in, an
/// incomplete one removed, the old store removed once the copy is in place.
pub(super) fn finish_interrupted(path: &Path) -> Result<(), StoreError> {
    let (compacting, compacted, old) = siblings(path);
    if compacted.exists() {
        if path.exists() {
            std::fs::rename(path, &old).map_err(|error| io("set aside", path, error))?;
        }
        std::fs::rename(&compacted, path).map_err(|error| io("swap in", &compacted, error))?;
    }
    if old.exists() {
        if path.exists() {
            std::fs::remove_dir_all(&old).map_err(|error| io("remove", &old, error))?;
        } else {
            std::fs::rename(&old, path).map_err(|error| io("restore", &old, error))?;
        }
    }
    if compacting.exists() {
        std::fs::remove_dir_all(&compacting).map_err(|error| io("remove", &compacting, error))?;
    }
    Ok(())
}

/// The bytes of the files under `path`.
pub fn directory_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_dir() => directory_bytes(&entry.path()),
            Ok(metadata) => metadata.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Rewrites the store in `path` with only its live records. Fails (changing nothing) while a
/// server has it open.
pub fn compact(path: &Path) -> Result<Compacted, StoreError> {
    let (compacting, _, _) = siblings(path);
    rewrite(path, |live, copy| {
        let mut records = 0u64;
        for name in live.tree_names() {
            let (from, into) =
                (live.open_tree(&name).map_err(engine)?, copy.open_tree(&name).map_err(engine)?);
            records += if name.as_ref() == b"run_pages" {
                copy_run_pages(&from, &RunSegments::open(path)?, &into, &RunSegments::open(&compacting)?)?
            } else if name.as_ref() == b"vectors" {
                let dimension = stored_dimension(&live.open_tree("meta").map_err(engine)?)?;
                copy_vectors(
                    &from,
                    &VectorFile::open(path, dimension)?,
                    &into,
                    &VectorFile::open(&compacting, dimension)?,
                )?
            } else {
                copy_tree(&from, &into)?
            };
        }
        Ok(records)
    })
}

/// Copies the `vectors` tree `from` (pointing into `from_file`) into `into`, each vector written
/// to `into_file`; a pointer whose slot no longer holds its vector is left behind. Returns the
/// vectors copied, once the file is on disk.
fn copy_vectors(
    from: &sled::Tree,
    from_file: &VectorFile,
    into: &sled::Tree,
    into_file: &VectorFile,
) -> Result<u64, StoreError> {
    let mut writer = Batched::into(into);
    for entry in from.iter() {
        let (key, value) = entry.map_err(engine)?;
        if let Some(vector) = from_file.read(&value)? {
            writer.insert(key, into_file.write(&vector)?.as_slice())?;
        }
    }
    into_file.sync()?;
    writer.finish()
}

/// Copies the `run_pages` tree `from` (pointing into `from_segments`) into `into`, each page
/// written to `into_segments`; a pointer whose page is gone is kept as it is (it reads as gone
/// there too, and its listing stays consistent). Returns the pages copied.
fn copy_run_pages(
    from: &sled::Tree,
    from_segments: &RunSegments,
    into: &sled::Tree,
    into_segments: &RunSegments,
) -> Result<u64, StoreError> {
    let mut writer = Batched::into(into);
    for entry in from.iter() {
        let (key, value) = entry.map_err(engine)?;
        let page =
            if RunSegments::is_pointer(&value) { from_segments.read(&value)? } else { Some(value.to_vec()) };
        match page {
            Some(page) => writer.insert(key, into_segments.append(&page)?.as_slice())?,
            None => writer.insert(key, value)?,
        }
    }
    into_segments.sync()?;
    writer.finish()
}

/// Writes a fresh database beside the store in `path` with `fill` (from the store, into the
/// copy; it gives the records it wrote), then swaps it in. Compaction and format upgrades both.
pub(super) fn rewrite(
    path: &Path,
    fill: impl FnOnce(&sled::Db, &sled::Db) -> Result<u64, StoreError>,
) -> Result<Compacted, StoreError> {
    finish_interrupted(path)?;
    if !path.exists() {
        return Err(StoreError::Unavailable(format!("no store in `{}`", path.display())));
    }
    let (compacting, compacted, _) = siblings(path);
    let before_bytes = directory_bytes(path);
    let records = {
        // Waiting out a handle closed a moment ago (an upgrade's first look), not a server.
        let live = open_waiting_for_lock(path, REWRITE_CACHE_BYTES).map_err(|error| match error {
            StoreError::Unavailable(reason) if reason.contains("could not acquire lock") => {
                StoreError::Unavailable(format!(
                    "`{}` is open in another process: stop the server first",
                    path.display()
                ))
            }
            other => other,
        })?;
        let copy = sled::Config::new().path(&compacting).create_new(true).open().map_err(engine)?;
        let records = fill(&live, &copy)?;
        copy.flush().map_err(engine)?;
        records
    };
    std::fs::rename(&compacting, &compacted).map_err(|error| io("mark complete", &compacting, error))?;
    finish_interrupted(path)?;
    Ok(Compacted { before_bytes, after_bytes: directory_bytes(path), records })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store_with(path: &Path, marker: &str) {
        std::fs::create_dir_all(path).unwrap();
        std::fs::write(path.join("marker"), marker).unwrap();
    }

    fn marker(path: &Path) -> String {
        std::fs::read_to_string(path.join("marker")).unwrap()
    }

    /// Wherever a crash stops a compaction, the next open finds one whole store: the complete
    /// copy if it was marked complete, else the original; nothing is left beside it.
    #[test]
    fn an_interrupted_compaction_is_finished_or_undone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let (compacting, compacted, old) = siblings(&path);
        let states: [(&[(&PathBuf, &str)], &str); 4] = [
            (&[(&path, "original"), (&compacting, "half a copy")], "original"),
            (&[(&path, "original"), (&compacted, "copy")], "copy"),
            (&[(&old, "original"), (&compacted, "copy")], "copy"),
            (&[(&path, "copy"), (&old, "original")], "copy"),
        ];
        for (present, expected) in states {
            for (at, what) in present {
                store_with(at, what);
            }
            finish_interrupted(&path).unwrap();
            assert_eq!(marker(&path), expected);
            for leftover in [&compacting, &compacted, &old] {
                assert!(!leftover.exists(), "{} is left", leftover.display());
            }
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
}
