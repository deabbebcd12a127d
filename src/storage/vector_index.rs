//! The codes of the resources searched lately, within a memory budget: a resource is loaded
//! from the `vectors` tree on its first search, kept in step by writes while it is loaded, and
//! the least recently searched resources are dropped when the index grows past its budget (the
//! next search of one loads it again). A resource whose codes alone would not fit is not loaded
//! at all: its searches read its vectors from disk. So recall memory is the budget, whatever
//! the store holds.

use std::collections::{HashMap, HashSet};

use super::StoreError;
use super::vectors::ResourceVectors;

/// The default budget: 256 MiB.
pub const DEFAULT_INDEX_BYTES: usize = 256 * 1024 * 1024;

struct Loaded {
    vectors: ResourceVectors,
    last_used: u64,
}

/// Loaded resources' vectors, by resource id.
pub(super) struct VectorIndex {
    resources: HashMap<String, Loaded>,
    /// Resources found too large for the budget, searched from disk until one of their threads
    /// is deleted or the budget changes.
    oversized: HashSet<String>,
    budget: usize,
    clock: u64,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("VectorIndex")
            .field("resources", &self.resources.len())
            .field("oversized", &self.oversized.len())
            .field("bytes", &self.bytes())
            .field("budget", &self.budget)
            .finish()
    }
}

impl VectorIndex {
    /// An empty index of at most `budget` bytes.
    pub(super) fn new(budget: usize) -> VectorIndex {
        VectorIndex { resources: HashMap::new(), oversized: HashSet::new(), budget, clock: 0 }
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

    /// Adds vectors written to a resource's thread, if the resource is loaded (if not, the
    /// next search loads them from disk); a resource grown past the whole budget is dropped,
    /// otherwise the least recently searched others make room.
    pub(super) fn written(&mut self, resource_id: &str, thread_id: &str, vectors: &[(u64, Vec<f32>)]) {
        let Some(loaded) = self.resources.get_mut(resource_id) else { return };
        for (seq, vector) in vectors {
            loaded.vectors.insert(thread_id, *seq, vector);
        }
        if loaded.vectors.memory_bytes() > self.budget {
            self.resources.remove(resource_id);
            self.oversized.insert(resource_id.to_owned());
        } else {
            self.evict_beyond_budget(Some(resource_id));
        }
    }

    /// Forgets a thread's vectors (its resource may fit the budget again).
    pub(super) fn thread_deleted(&mut self, resource_id: &str, thread_id: &str) {
        if let Some(loaded) = self.resources.get_mut(resource_id) {
            loaded.vectors.remove_thread(thread_id);
        }
        self.oversized.remove(resource_id);
    }

    /// Forgets a resource.
    pub(super) fn remove(&mut self, resource_id: &str) {
        self.resources.remove(resource_id);
        self.oversized.remove(resource_id);
    }

    /// A resource's codes for a search, loaded with `load` when they are not, then the least
    /// recently searched others dropped until the index fits its budget. `load` is given the
    /// budget and returns `None` when the resource's codes alone exceed it; then, and for
    /// every later search of that resource, this is `None`: search it on disk.
    pub(super) fn searched(
        &mut self,
        resource_id: &str,
        load: impl FnOnce(usize) -> Result<Option<ResourceVectors>, StoreError>,
    ) -> Result<Option<&ResourceVectors>, StoreError> {
        if self.oversized.contains(resource_id) {
            return Ok(None);
        }
        self.clock += 1;
        if !self.resources.contains_key(resource_id) {
            let Some(vectors) = load(self.budget)? else {
                self.oversized.insert(resource_id.to_owned());
                return Ok(None);
            };
            self.resources.insert(resource_id.to_owned(), Loaded { vectors, last_used: self.clock });
            self.evict_beyond_budget(Some(resource_id));
        }
        let loaded = self.resources.get_mut(resource_id).expect("just loaded or present");
        loaded.last_used = self.clock;
        Ok(Some(&loaded.vectors))
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
            self.resources.remove(&id);
            bytes -= freed;
        }
    }
}
