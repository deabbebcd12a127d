//! The vectors of the resources searched lately, within a memory budget: a resource is loaded
//! from the `vectors` tree on its first search, kept in step by writes while it is loaded, and
//! the least recently searched resources are dropped when the index grows past its budget (the
//! next search of one loads it again). So recall memory tracks the resources in use, not
//! everything ever stored.

use std::collections::HashMap;

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
    budget: usize,
    clock: u64,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("VectorIndex")
            .field("resources", &self.resources.len())
            .field("bytes", &self.bytes())
            .field("budget", &self.budget)
            .finish()
    }
}

impl VectorIndex {
    /// An empty index of at most `budget` bytes (one resource larger than it is still loaded,
    /// alone).
    pub(super) fn new(budget: usize) -> VectorIndex {
        VectorIndex { resources: HashMap::new(), budget, clock: 0 }
    }

    /// Changes the budget; takes effect at the next load.
    pub(super) fn set_budget(&mut self, budget: usize) {
        self.budget = budget;
    }

    /// The memory the loaded vectors take, in bytes.
    pub(super) fn bytes(&self) -> usize {
        self.resources.values().map(|loaded| loaded.vectors.memory_bytes()).sum()
    }

    /// A loaded resource, to keep in step with a write (not loaded: nothing to do).
    pub(super) fn loaded_mut(&mut self, resource_id: &str) -> Option<&mut ResourceVectors> {
        self.resources.get_mut(resource_id).map(|loaded| &mut loaded.vectors)
    }

    /// Forgets a resource.
    pub(super) fn remove(&mut self, resource_id: &str) {
        self.resources.remove(resource_id);
    }

    /// A resource's vectors for a search, loaded with `load` when they are not, then the least
    /// recently searched others dropped until the index fits its budget.
    pub(super) fn searched(
        &mut self,
        resource_id: &str,
        load: impl FnOnce() -> Result<ResourceVectors, StoreError>,
    ) -> Result<&ResourceVectors, StoreError> {
        self.clock += 1;
        if !self.resources.contains_key(resource_id) {
            let vectors = load()?;
            self.resources.insert(resource_id.to_owned(), Loaded { vectors, last_used: self.clock });
            self.evict_beyond_budget(resource_id);
        }
        let loaded = self.resources.get_mut(resource_id).expect("just loaded or present");
        loaded.last_used = self.clock;
        Ok(&loaded.vectors)
    }

    /// Drops the least recently searched resources, never `keep`, until the index fits.
    fn evict_beyond_budget(&mut self, keep: &str) {
        let mut bytes = self.bytes();
        while bytes > self.budget {
            let oldest = self
                .resources
                .iter()
                .filter(|(id, _)| id.as_str() != keep)
                .min_by_key(|(_, loaded)| loaded.last_used)
                .map(|(id, loaded)| (id.clone(), loaded.vectors.memory_bytes()));
            let Some((id, freed)) = oldest else { break };
            self.resources.remove(&id);
            bytes -= freed;
        }
    }
}
