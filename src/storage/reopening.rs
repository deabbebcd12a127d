//! The open engine behind a store, guarded against a disk that fills up.
//!
//! Free space on the disk is checked before every write and by a watcher thread: below the
//! reserve, writes are refused before they reach the engine. If the engine fails a write anyway
//! (the disk filled under it), it is closed at once — so nothing it held in memory but never
//! wrote is ever read — and the watcher reopens it from what is on disk as soon as a probe write
//! works again. Each change is published as a [`Writability`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak, mpsc};
use std::time::Duration;

use tokio::sync::watch;

use super::{StoreError, Writability};

/// How often the watcher looks at the disk (and retries a failed engine).
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Opens the engine and proves it can write (a small write made durable).
pub(super) type Opener<T> = Box<dyn Fn() -> Result<T, StoreError> + Send + Sync>;

/// The guarded engine. Cheap to share; the watcher thread stops when the last handle goes.
pub(super) struct Reopening<T> {
    /// Where free space is measured.
    path: PathBuf,
    opener: Opener<T>,
    /// The open engine; `None` from a failed write until it is reopened.
    current: RwLock<Option<Arc<T>>>,
    /// The engine that failed, until the last call holding it is done (it must be closed, and
    /// its file lock released, before it can be opened again).
    failed: Mutex<Weak<T>>,
    writability: watch::Sender<Writability>,
    min_free_bytes: AtomicU64,
    free_bytes: AtomicU64,
    /// Bytes of saves taken and not yet committed: a save must fit above the reserve with them.
    in_flight: Arc<AtomicU64>,
    /// Dropped with the handle, which ends the watcher.
    _stop: mpsc::Sender<()>,
}

/// Bytes a save holds among those in flight, given back when it drops.
#[derive(Debug)]
pub(super) struct InFlight {
    counter: Arc<AtomicU64>,
    bytes: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl<T> std::fmt::Debug for Reopening<T> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Reopening")
            .field("path", &self.path)
            .field("writability", &*self.writability.borrow())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> Reopening<T> {
    /// Opens the engine with `opener` and starts the watcher; `path` is where the engine keeps
    /// its files.
    pub(super) fn open(
        path: PathBuf,
        opener: Opener<T>,
        min_free_bytes: u64,
    ) -> Result<Arc<Reopening<T>>, StoreError> {
        let engine = opener()?;
        let (stop, stopped) = mpsc::channel();
        let handle = Arc::new(Reopening {
            path,
            opener,
            current: RwLock::new(Some(Arc::new(engine))),
            failed: Mutex::new(Weak::new()),
            writability: watch::Sender::new(Writability::Writable),
            min_free_bytes: AtomicU64::new(min_free_bytes),
            free_bytes: AtomicU64::new(u64::MAX),
            in_flight: Arc::default(),
            _stop: stop,
        });
        let _ = handle.check_space();
        let watched = Arc::downgrade(&handle);
        std::thread::Builder::new()
            .name("agentwire-store-watch".to_owned())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(WATCH_EVERY) {
                    let Some(handle) = watched.upgrade() else { return };
                    handle.watch_once();
                }
            })
            .map_err(|error| StoreError::Engine(format!("cannot start the store's watcher: {error}")))?;
        Ok(handle)
    }

    /// The open engine, or the error every call gets while it is being reopened.
    pub(super) fn engine(&self) -> Result<Arc<T>, StoreError> {
        match &*self.current.read().expect("engine lock") {
            Some(engine) => Ok(Arc::clone(engine)),
            None => Err(self
                .writability
                .borrow()
                .check()
                .err()
                .unwrap_or_else(|| StoreError::Unavailable("the store is reopening".to_owned()))),
        }
    }

    /// Measures the free space now: `DiskLow` below the reserve (the state follows), the
    /// engine's failure while it is reopening.
    pub(super) fn check_space(&self) -> Result<(), StoreError> {
        let free = fs2::available_space(&self.path).unwrap_or(u64::MAX);
        self.free_bytes.store(free, Ordering::Relaxed);
        let min_free_bytes = self.min_free_bytes.load(Ordering::Relaxed);
        let measured = if free < min_free_bytes {
            Writability::DiskLow { free_bytes: free, min_free_bytes }
        } else {
            Writability::Writable
        };
        self.writability.send_if_modified(|current| {
            if matches!(current, Writability::Failed(_)) {
                return false;
            }
            let changed = !current.same_state(&measured);
            if changed {
                tracing::warn!(
                    state = measured.name(),
                    free_bytes = free,
                    min_free_bytes,
                    "store writability"
                );
            }
            *current = measured.clone();
            changed
        });
        self.writability.borrow().check()
    }

    /// Room for a save of about `bytes`: `Ok` (held until the guard drops, once the save is
    /// committed) when the disk keeps its reserve after this save and every other one in flight,
    /// each counted twice (the engine writes a record's log entry, then its page). A save that
    /// would not fit is refused before it reaches the engine, whatever the reserve, so a disk
    /// fills with refusals rather than with a write the engine cannot finish.
    pub(super) fn room_for(&self, bytes: u64) -> Result<InFlight, StoreError> {
        self.check_space()?;
        let needed = bytes.saturating_mul(2);
        let pending = self.in_flight.fetch_add(needed, Ordering::AcqRel).saturating_add(needed);
        let held = InFlight { counter: Arc::clone(&self.in_flight), bytes: needed };
        let free = self.free_bytes.load(Ordering::Relaxed);
        let min_free_bytes = self.min_free_bytes.load(Ordering::Relaxed);
        if free.saturating_sub(pending) < min_free_bytes {
            return Err(StoreError::DiskLow { free_bytes: free.saturating_sub(pending), min_free_bytes });
        }
        Ok(held)
    }

    /// Closes `engine` after it failed a write with `reason`: calls fail until it is reopened.
    pub(super) fn failed(&self, engine: &Arc<T>, reason: &str) {
        let mut current = self.current.write().expect("engine lock");
        if current.as_ref().is_some_and(|open| Arc::ptr_eq(open, engine)) {
            *current = None;
            *self.failed.lock().expect("failed lock") = Arc::downgrade(engine);
            tracing::error!(reason, "the store failed a write: closed, reopening once it can write");
            self.writability.send_replace(Writability::Failed(reason.to_owned()));
        }
    }

    /// One look: reopens a failed engine once nothing holds it and a probe write works, and
    /// refreshes the free space.
    fn watch_once(&self) {
        if self.current.read().expect("engine lock").is_none() {
            if self.failed.lock().expect("failed lock").strong_count() > 0 {
                return; // a call still holds the failed engine
            }
            match (self.opener)() {
                Ok(engine) => {
                    *self.current.write().expect("engine lock") = Some(Arc::new(engine));
                    self.writability.send_replace(Writability::Writable);
                    tracing::info!("the store reopened and takes writes again");
                }
                Err(error) => {
                    tracing::debug!(%error, "the store cannot reopen yet");
                    return;
                }
            }
        }
        let _ = self.check_space();
    }

    /// Refuses writes when less than `bytes` are free on the disk.
    pub(super) fn set_min_free_bytes(&self, bytes: u64) {
        self.min_free_bytes.store(bytes, Ordering::Relaxed);
        let _ = self.check_space();
    }

    /// Free bytes on the disk, as last measured.
    pub(super) fn free_bytes(&self) -> u64 {
        self.free_bytes.load(Ordering::Relaxed)
    }

    /// The state, to watch.
    pub(super) fn writability(&self) -> watch::Receiver<Writability> {
        self.writability.subscribe()
    }

    /// The open engine, if any (for settings that apply to it).
    pub(super) fn current(&self) -> Option<Arc<T>> {
        self.current.read().expect("engine lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    /// A save must fit above the reserve together with the saves in flight, each counted twice:
    /// with 1 GiB above the reserve, one 300 MiB save fits, a second while it is in flight does
    /// not, and once the first is committed the next fits again.
    #[test]
    fn a_save_must_fit_above_the_reserve_with_those_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let opener: Opener<()> = Box::new(|| Ok(()));
        let engine = Reopening::open(dir.path().to_owned(), opener, 0).unwrap();
        let free = fs2::available_space(dir.path()).unwrap();
        if free < 2048 * MIB {
            eprintln!("under 2 GiB free: skipped");
            return;
        }
        engine.set_min_free_bytes(free - 1024 * MIB);
        let first = engine.room_for(300 * MIB).expect("600 MiB fits in 1 GiB");
        let second = engine.room_for(300 * MIB);
        assert!(matches!(second, Err(StoreError::DiskLow { .. })), "1.2 GiB does not: {second:?}");
        drop(first);
        engine.room_for(300 * MIB).expect("the first is committed: room again");
    }
}
