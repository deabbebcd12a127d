//! The codes of the resources searched lately, within a memory budget: a resource is loaded
//! from the `vectors` tree on its first search, kept in step by writes while it is loaded, and
//! the least recently searched resources are dropped when the index grows past its budget (the
//! next search of one loads it again). A resource whose codes alone would not fit is not loaded
//! at all: its searches read its vectors from disk. So recall memory is the budget, whatever
//! the store holds.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::StoreError;
use super::vector_scratch::ScratchVectors;
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
    /// The int8 copies of the loaded vectors, for rescoring.
    scratch: ScratchVectors,
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
    /// An empty index of at most `budget` bytes, its scratch file in `scratch_directory`.
    pub(super) fn new(budget: usize, scratch_directory: Option<&Path>) -> VectorIndex {
        VectorIndex {
            resources: HashMap::new(),
            oversized: HashSet::new(),
            budget,
            clock: 0,
            scratch: ScratchVectors::create(scratch_directory),
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

    /// Adds vectors written to a resource's thread, if the resource is loaded (if not, the
    /// next search loads them from disk); a resource grown past the whole budget is dropped,
    /// otherwise the least recently searched others make room.
    pub(super) fn written(&mut self, resource_id: &str, thread_id: &str, vectors: &[(u64, Vec<f32>)]) {
        let Some(loaded) = self.resources.get_mut(resource_id) else { return };
        for (seq, vector) in vectors {
            loaded.vectors.insert(thread_id, *seq, vector, &mut self.scratch);
        }
        self.scratch.flush();
        loaded.vectors.keep_clustered(&mut self.scratch);
        if loaded.vectors.memory_bytes() > self.budget {
            self.drop_resource(resource_id);
            self.oversized.insert(resource_id.to_owned());
        } else {
            self.evict_beyond_budget(Some(resource_id));
        }
    }

    /// Forgets a thread's vectors (its resource may fit the budget again).
    pub(super) fn thread_deleted(&mut self, resource_id: &str, thread_id: &str) {
        if let Some(loaded) = self.resources.get_mut(resource_id) {
            loaded.vectors.remove_thread(thread_id, &mut self.scratch);
        }
        self.oversized.remove(resource_id);
    }

    /// Forgets a resource.
    pub(super) fn remove(&mut self, resource_id: &str) {
        self.drop_resource(resource_id);
        self.oversized.remove(resource_id);
    }

    /// Drops a loaded resource, giving its scratch slots back.
    fn drop_resource(&mut self, resource_id: &str) {
        if let Some(loaded) = self.resources.remove(resource_id) {
            loaded.vectors.release(&mut self.scratch);
        }
    }

    /// A resource's codes for a search, with the scratch file their candidates are rescored
    /// from, loaded with `load` when they are not, then the least recently searched others
    /// dropped until the index fits its budget. `load` fills empty codes and returns whether
    /// they fit the budget it is given; when they do not, this is `None`, then and for every
    /// later search of that resource: search it on disk.
    pub(super) fn searched(
        &mut self,
        resource_id: &str,
        load: impl FnOnce(&mut ResourceVectors, &mut ScratchVectors, usize) -> Result<bool, StoreError>,
    ) -> Result<Option<(&ResourceVectors, &ScratchVectors)>, StoreError> {
        if self.oversized.contains(resource_id) {
            return Ok(None);
        }
        self.clock += 1;
        if !self.resources.contains_key(resource_id) {
            let mut vectors = ResourceVectors::default();
            let fits = load(&mut vectors, &mut self.scratch, self.budget);
            self.scratch.flush();
            if !matches!(fits, Ok(true)) {
                vectors.release(&mut self.scratch);
                fits?;
                self.oversized.insert(resource_id.to_owned());
                return Ok(None);
            }
            self.resources.insert(resource_id.to_owned(), Loaded { vectors, last_used: self.clock });
            self.evict_beyond_budget(Some(resource_id));
        }
        let loaded = self.resources.get_mut(resource_id).expect("just loaded or present");
        loaded.last_used = self.clock;
        Ok(Some((&loaded.vectors, &self.scratch)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads `count` vectors of one thread into a resource searched through `index`.
    fn search(index: &mut VectorIndex, resource: &str, count: u64) -> bool {
        let loaded = index.searched(resource, |vectors, scratch, budget| {
            for seq in 0..count {
                vectors.insert("t", seq, &[1.0, seq as f32], scratch);
            }
            Ok(vectors.memory_bytes() <= budget)
        });
        loaded.expect("loaded").is_some()
    }

    /// A write that grows a loaded resource makes room by dropping the least recently searched
    /// other resource, never the one written; one grown past the whole budget is dropped and
    /// searched on disk from then on.
    #[test]
    fn a_write_drops_the_least_recently_searched_other_resource() {
        let mut probe = VectorIndex::new(usize::MAX, None);
        assert!(search(&mut probe, "probe", 100));
        let hundred = probe.bytes();
        let mut index = VectorIndex::new(3 * hundred + hundred / 2, None);
        for resource in ["a", "b", "c"] {
            assert!(search(&mut index, resource, 100));
        }
        assert!(search(&mut index, "a", 100), "a is searched again: b is now the least recent");
        let grown: Vec<(u64, Vec<f32>)> = (100..160).map(|seq| (seq, vec![0.5, 1.0])).collect();
        index.written("c", "t", &grown);
        assert!(index.resources.contains_key("c") && index.resources.contains_key("a"));
        assert!(!index.resources.contains_key("b"), "the least recently searched other is dropped");
        assert!(index.bytes() <= index.budget);

        let huge: Vec<(u64, Vec<f32>)> = (160..1_000).map(|seq| (seq, vec![0.5, 1.0])).collect();
        index.written("c", "t", &huge);
        assert!(!index.resources.contains_key("c"), "grown past the budget");
        assert!(!search(&mut index, "c", 0), "searched on disk from then on");
    }
}
