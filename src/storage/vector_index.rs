//! The codes of the resources searched lately, within a memory budget: a resource is loaded
//! from the `vectors` tree on its first search, kept in step by writes while it is loaded, and
//! the least recently searched resources are dropped when the index grows past its budget (the
//! next search of one loads it again). A resource whose codes alone would not fit is not loaded
//! at all: its searches read its vectors from disk. So recall memory is the budget, whatever
//! the store holds.
//!
//! A load runs outside the index's lock ([`SharedIndex::search`]): a million messages take
//! seconds to load, and meanwhile the other loaded resources are searched and written as ever.
//! The threads written or deleted in the resource being loaded are noted (their ids, not their
//! vectors, so that heavy writes under a long load take no memory to speak of), and read again
//! from the store once it is in. One load runs at a time, so that the memory loads take stays
//! within one budget; a search that needs another load waits for it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::StoreError;
use super::vector_scratch::{ScratchVectors, ScratchWriter};
use super::vectors::ResourceVectors;

/// The default budget: 256 MiB.
pub const DEFAULT_INDEX_BYTES: usize = 256 * 1024 * 1024;

struct Loaded {
    vectors: ResourceVectors,
    last_used: u64,
}

/// Where a resource's vectors are read from for the index: the store.
pub(super) trait VectorSource {
    /// Fills empty `vectors` with every stored vector of the resource, their int8 copies put
    /// with `writer`; whether they fit `budget` (a load may stop as soon as they do not).
    fn load(
        &self,
        vectors: &mut ResourceVectors,
        writer: &mut ScratchWriter<'_>,
        budget: usize,
    ) -> Result<bool, StoreError>;

    /// Adds every stored vector of one thread of the resource.
    fn load_thread(
        &self,
        thread_id: &str,
        vectors: &mut ResourceVectors,
        writer: &mut ScratchWriter<'_>,
    ) -> Result<(), StoreError>;
}

/// The resource being loaded outside the lock, and what was done to it meanwhile.
struct Loading {
    resource_id: String,
    /// Threads written or deleted under the load: read again once it is in.
    touched: BTreeSet<String>,
    /// The resource was deleted under the load: what it loaded is thrown away.
    removed: bool,
}

impl Loading {
    fn touch(&mut self, thread_id: &str) {
        if !self.touched.contains(thread_id) {
            self.touched.insert(thread_id.to_owned());
        }
    }
}

/// Loaded resources' vectors, by resource id.
pub(super) struct VectorIndex {
    resources: HashMap<String, Loaded>,
    /// Resources found too large for the budget, searched from disk until one of their threads
    /// is deleted or the budget changes.
    oversized: HashSet<String>,
    budget: usize,
    clock: u64,
    /// The int8 copies of the loaded vectors, for rescoring; shared with the load that runs
    /// outside the lock.
    scratch: Arc<ScratchVectors>,
    loading: Option<Loading>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("VectorIndex")
            .field("resources", &self.resources.len())
            .field("oversized", &self.oversized.len())
            .field("bytes", &self.bytes())
            .field("budget", &self.budget)
            .field("loading", &self.loading.as_ref().map(|loading| &loading.resource_id))
            .finish()
    }
}

/// What a search finds of a resource in the index.
enum Found {
    /// Its codes are in: scan them.
    Loaded,
    /// Too large for the budget: search it on disk.
    OnDisk,
    /// It must be loaded, and no other load is running: load it.
    ToLoad,
    /// It is being loaded, or must be and another load is running: wait for that load's end.
    Wait,
}

impl VectorIndex {
    /// An empty index of at most `budget` bytes, its scratch file in `scratch_directory`.
    pub(super) fn new(budget: usize, scratch_directory: Option<&Path>) -> VectorIndex {
        VectorIndex {
            resources: HashMap::new(),
            oversized: HashSet::new(),
            budget,
            clock: 0,
            scratch: Arc::new(ScratchVectors::create(scratch_directory)),
            loading: None,
        }
    }

    /// Changes the budget: resources past it are dropped now, and those found too large are
    /// tried again.
    pub(super) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
        self.oversized.clear();
        self.evict_beyond_budget(None);
    }

    /// The memory the loaded vectors take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.resources.values().map(|loaded| loaded.vectors.memory_bytes()).sum()
    }

    /// The load running outside the lock, if it is of `resource_id`.
    fn loading_of(&mut self, resource_id: &str) -> Option<&mut Loading> {
        self.loading.as_mut().filter(|loading| loading.resource_id == resource_id)
    }

    /// Adds vectors written to a resource's thread, if the resource is loaded (if not, the
    /// next search loads them from disk; if it is being loaded, the thread is read again once it
    /// is in); a resource grown past the whole budget is dropped, otherwise the least recently
    /// searched others make room.
    pub(super) fn written(&mut self, resource_id: &str, thread_id: &str, vectors: &[(u64, Vec<f32>)]) {
        if let Some(loading) = self.loading_of(resource_id) {
            loading.touch(thread_id);
            return;
        }
        let Some(loaded) = self.resources.get_mut(resource_id) else { return };
        let mut writer = self.scratch.writer();
        for (seq, vector) in vectors {
            loaded.vectors.insert(thread_id, *seq, vector, &mut writer);
        }
        loaded.vectors.keep_clustered(&mut writer);
        drop(writer);
        if loaded.vectors.memory_bytes() > self.budget {
            self.drop_resource(resource_id);
            self.oversized.insert(resource_id.to_owned());
        } else {
            self.evict_beyond_budget(Some(resource_id));
        }
    }

    /// Forgets a thread's vectors (its resource may fit the budget again).
    pub(super) fn thread_deleted(&mut self, resource_id: &str, thread_id: &str) {
        if let Some(loading) = self.loading_of(resource_id) {
            loading.touch(thread_id);
        }
        if let Some(loaded) = self.resources.get_mut(resource_id) {
            loaded.vectors.remove_thread(thread_id, &mut self.scratch.writer());
        }
        self.oversized.remove(resource_id);
    }

    /// Forgets a resource.
    pub(super) fn remove(&mut self, resource_id: &str) {
        if let Some(loading) = self.loading_of(resource_id) {
            loading.removed = true;
        }
        self.drop_resource(resource_id);
        self.oversized.remove(resource_id);
    }

    /// Drops a loaded resource, giving its scratch slots back.
    fn drop_resource(&mut self, resource_id: &str) {
        if let Some(loaded) = self.resources.remove(resource_id) {
            loaded.vectors.release(&self.scratch);
        }
    }

    /// Where a search of `resource_id` stands.
    fn find(&self, resource_id: &str) -> Found {
        if self.resources.contains_key(resource_id) {
            Found::Loaded
        } else if self.oversized.contains(resource_id) {
            Found::OnDisk
        } else if self.loading.is_some() {
            Found::Wait
        } else {
            Found::ToLoad
        }
    }

    /// Marks `resource_id` as being loaded; the scratch file and the budget to load it with.
    fn begin_load(&mut self, resource_id: &str) -> (Arc<ScratchVectors>, usize) {
        self.loading =
            Some(Loading { resource_id: resource_id.to_owned(), touched: BTreeSet::new(), removed: false });
        (Arc::clone(&self.scratch), self.budget)
    }

    /// Ends the load of `resource_id` with what it loaded and whether that fit its budget: the
    /// threads touched meanwhile read again from `source`, the resource put in (the least
    /// recently searched others dropped to make room), or marked too large, or thrown away when
    /// it was deleted meanwhile.
    fn end_load(
        &mut self,
        resource_id: &str,
        mut vectors: ResourceVectors,
        fits: Result<bool, StoreError>,
        source: &dyn VectorSource,
    ) -> Result<(), StoreError> {
        let loading = self.loading.take().filter(|loading| loading.resource_id == resource_id);
        let Some(loading) = loading.filter(|loading| !loading.removed) else {
            vectors.release(&self.scratch);
            return fits.map(drop);
        };
        let fits = match fits {
            Ok(fits) => fits,
            Err(error) => {
                vectors.release(&self.scratch);
                return Err(error);
            }
        };
        let mut writer = self.scratch.writer();
        for thread_id in &loading.touched {
            vectors.remove_thread(thread_id, &mut writer);
            if let Err(error) = source.load_thread(thread_id, &mut vectors, &mut writer) {
                drop(writer);
                vectors.release(&self.scratch);
                return Err(error);
            }
        }
        vectors.keep_clustered(&mut writer);
        drop(writer);
        if !fits || vectors.memory_bytes() > self.budget {
            vectors.release(&self.scratch);
            self.oversized.insert(resource_id.to_owned());
            return Ok(());
        }
        self.resources.insert(resource_id.to_owned(), Loaded { vectors, last_used: self.clock });
        self.evict_beyond_budget(Some(resource_id));
        Ok(())
    }

    /// A loaded resource's codes for a search, with the scratch file their candidates are
    /// rescored from; it becomes the most recently searched.
    fn searched(&mut self, resource_id: &str) -> Option<(&ResourceVectors, &ScratchVectors)> {
        self.clock += 1;
        let loaded = self.resources.get_mut(resource_id)?;
        loaded.last_used = self.clock;
        Some((&loaded.vectors, &self.scratch))
    }

    /// Drops the least recently searched resources, never `keep`, until the index fits.
    fn evict_beyond_budget(&mut self, keep: Option<&str>) {
        let mut bytes = self.bytes();
        while bytes > self.budget {
            let oldest = self
                .resources
                .iter()
                .filter(|(id, _)| Some(id.as_str()) != keep)
                .min_by_key(|(_, loaded)| loaded.last_used)
                .map(|(id, loaded)| (id.clone(), loaded.vectors.memory_bytes()));
            let Some((id, freed)) = oldest else { break };
            self.drop_resource(&id);
            bytes -= freed;
        }
    }
}

/// The index behind its lock, and the signal that a load outside it has ended.
#[derive(Debug)]
pub(super) struct SharedIndex {
    index: Mutex<VectorIndex>,
    load_ended: Condvar,
}

impl SharedIndex {
    /// An empty index of at most `budget` bytes, its scratch file in `scratch_directory`.
    pub(super) fn new(budget: usize, scratch_directory: Option<&Path>) -> SharedIndex {
        SharedIndex {
            index: Mutex::new(VectorIndex::new(budget, scratch_directory)),
            load_ended: Condvar::new(),
        }
    }

    /// The index, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, VectorIndex> {
        self.index.lock().expect("index lock")
    }

    /// Scans a resource's codes with `scan`, under the lock; loads them first from `source`,
    /// outside the lock, when they are not in. `None` when the resource is too large for the
    /// budget, then and for every later search of it (or was deleted under its load): search it
    /// on disk.
    pub(super) fn search<T>(
        &self,
        resource_id: &str,
        source: &dyn VectorSource,
        scan: impl FnOnce(&ResourceVectors, &ScratchVectors) -> T,
    ) -> Result<Option<T>, StoreError> {
        let mut loaded_once = false;
        let mut index = self.lock();
        loop {
            match index.find(resource_id) {
                Found::Loaded => {
                    let (vectors, scratch) = index.searched(resource_id).expect("found loaded");
                    return Ok(Some(scan(vectors, scratch)));
                }
                Found::OnDisk => return Ok(None),
                Found::Wait => index = self.load_ended.wait(index).expect("index lock"),
                Found::ToLoad => {
                    if loaded_once {
                        // Deleted under this search's load.
                        return Ok(None);
                    }
                    loaded_once = true;
                    let (scratch, budget) = index.begin_load(resource_id);
                    drop(index);
                    let ending = LoadEnding { shared: self };
                    let mut vectors = ResourceVectors::default();
                    let fits = source.load(&mut vectors, &mut scratch.writer(), budget);
                    // The load ended without a panic: it is ended below, under the lock.
                    std::mem::forget(ending);
                    index = self.lock();
                    let ended = index.end_load(resource_id, vectors, fits, source);
                    self.load_ended.notify_all();
                    ended?;
                }
            }
        }
    }
}

/// Ends a load that panicked: no search waits for it forever.
struct LoadEnding<'a> {
    shared: &'a SharedIndex,
}

impl Drop for LoadEnding<'_> {
    fn drop(&mut self) {
        let mut index = self.shared.index.lock().unwrap_or_else(PoisonError::into_inner);
        index.loading = None;
        self.shared.load_ended.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::mpsc;

    use super::*;

    /// A thread's vectors by seq.
    type Thread = Vec<(u64, Vec<f32>)>;

    /// Vectors of two components by thread, standing in for the store; a load can be held until
    /// told to go on, and one that is to be in already panics.
    #[derive(Default)]
    struct Stored {
        threads: Mutex<BTreeMap<String, Thread>>,
        /// Told when a load has read everything, then waited on before it ends.
        hold: Option<(mpsc::Sender<()>, Mutex<mpsc::Receiver<()>>)>,
        loaded_already: bool,
    }

    impl Stored {
        /// `count` vectors in thread `t`.
        fn with(count: u64) -> Stored {
            let stored = Stored::default();
            stored.write("t", 0..count);
            stored
        }

        fn write(&self, thread_id: &str, seqs: std::ops::Range<u64>) {
            let mut threads = self.threads.lock().expect("stored");
            let thread = threads.entry(thread_id.to_owned()).or_default();
            thread.extend(seqs.map(|seq| (seq, vec![1.0, seq as f32])));
        }
    }

    impl VectorSource for Stored {
        fn load(
            &self,
            vectors: &mut ResourceVectors,
            writer: &mut ScratchWriter<'_>,
            budget: usize,
        ) -> Result<bool, StoreError> {
            assert!(!self.loaded_already, "loaded again");
            for (thread_id, thread) in self.threads.lock().expect("stored").iter() {
                for (seq, vector) in thread {
                    vectors.load(thread_id, *seq, vector, writer);
                }
            }
            if let Some((started, go)) = &self.hold {
                started.send(()).expect("sent");
                go.lock().expect("go").recv().expect("told to go");
            }
            Ok(vectors.finish_load(writer) && vectors.memory_bytes() <= budget)
        }

        fn load_thread(
            &self,
            thread_id: &str,
            vectors: &mut ResourceVectors,
            writer: &mut ScratchWriter<'_>,
        ) -> Result<(), StoreError> {
            for (seq, vector) in self.threads.lock().expect("stored").get(thread_id).into_iter().flatten() {
                vectors.insert(thread_id, *seq, vector, writer);
            }
            Ok(())
        }
    }

    /// Searches `resource` through `index`, loading it from `source` if it must be loaded; how
    /// many vectors the search saw, `None` when it was sent to disk.
    fn search(index: &SharedIndex, resource: &str, source: &Stored) -> Option<usize> {
        index.search(resource, source, |vectors, _| vectors.len()).expect("searched")
    }

    /// A search that must not load: the resource is in.
    fn search_loaded(index: &SharedIndex, resource: &str) -> Option<usize> {
        search(index, resource, &Stored { loaded_already: true, ..Stored::default() })
    }

    /// A write that grows a loaded resource makes room by dropping the least recently searched
    /// other resource, never the one written; one grown past the whole budget is dropped and
    /// searched on disk from then on.
    #[test]
    fn a_write_drops_the_least_recently_searched_other_resource() {
        let probe = SharedIndex::new(usize::MAX, None);
        assert_eq!(search(&probe, "probe", &Stored::with(100)), Some(100));
        let hundred = probe.lock().bytes();
        let index = SharedIndex::new(3 * hundred + hundred / 2, None);
        for resource in ["a", "b", "c"] {
            assert_eq!(search(&index, resource, &Stored::with(100)), Some(100));
        }
        assert_eq!(search_loaded(&index, "a"), Some(100), "a is searched again: b is now the least recent");
        let grown: Vec<(u64, Vec<f32>)> = (100..160).map(|seq| (seq, vec![0.5, 1.0])).collect();
        let mut locked = index.lock();
        locked.written("c", "t", &grown);
        assert!(locked.resources.contains_key("c") && locked.resources.contains_key("a"));
        assert!(!locked.resources.contains_key("b"), "the least recently searched other is dropped");
        assert!(locked.bytes() <= locked.budget);

        let huge: Vec<(u64, Vec<f32>)> = (160..1_000).map(|seq| (seq, vec![0.5, 1.0])).collect();
        locked.written("c", "t", &huge);
        assert!(!locked.resources.contains_key("c"), "grown past the budget");
        drop(locked);
        assert_eq!(search(&index, "c", &Stored::default()), None, "searched on disk from then on");
    }

    /// While a resource loads outside the lock, a loaded one is searched and written (neither
    /// waits for the load), a second search of the loading one waits and finds it in without
    /// loading it again, and the threads written and deleted meanwhile are read again once it is
    /// in. A load that panics lets the searches waiting for it go on.
    #[test]
    fn a_load_runs_outside_the_lock() {
        let directory = tempfile::tempdir().expect("temp dir");
        let index = Arc::new(SharedIndex::new(usize::MAX, Some(directory.path())));
        assert_eq!(search(&index, "small", &Stored::with(10)), Some(10));
        let (started, has_started) = mpsc::channel();
        let (go, goes) = mpsc::channel::<()>();
        let big = Arc::new(Stored { hold: Some((started, Mutex::new(goes))), ..Stored::with(100) });
        big.write("gone", 0..1);
        let loader = std::thread::spawn({
            let (index, big) = (Arc::clone(&index), Arc::clone(&big));
            move || search(&index, "big", &big)
        });
        has_started.recv().expect("the load started");
        assert_eq!(search_loaded(&index, "small"), Some(10), "searched while the other loads");
        index.lock().written("small", "t", &[(10, vec![1.0, 10.0])]);
        assert_eq!(search_loaded(&index, "small"), Some(11));
        // Stored first, then told to the index, as the store does.
        big.write("u", 0..2);
        index.lock().written("big", "u", &[(0, vec![1.0, 0.0]), (1, vec![1.0, 1.0])]);
        big.threads.lock().expect("stored").remove("gone");
        index.lock().thread_deleted("big", "gone");
        let waiting = std::thread::spawn({
            let index = Arc::clone(&index);
            move || search_loaded(&index, "big")
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiting.is_finished(), "a search of the loading resource waits for its load");
        go.send(()).expect("sent");
        assert_eq!(loader.join().expect("loaded"), Some(102), "100 loaded, 2 written, 1 deleted");
        assert_eq!(waiting.join().expect("waited"), Some(102));
        assert!(index.lock().loading.is_none());

        let panicked = std::thread::spawn({
            let index = Arc::clone(&index);
            move || search_loaded(&index, "other")
        });
        assert!(panicked.join().is_err(), "the load panicked");
        assert!(index.lock().loading.is_none(), "and ended");
        assert_eq!(search(&index, "other", &Stored::with(3)), Some(3));
    }
}
