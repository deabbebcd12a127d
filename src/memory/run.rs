//! [`MemoryRun`]: one run's view of memory — the store, the thread and resource, the agent's
//! memory options, and what the run will save — shared by that run's memory processors.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::embedder::Embedder;
use crate::config::MemoryConfig;
use crate::domain::{FieldLimits, ResourceQuota};
use crate::storage::{EmbeddingRecord, Store};

/// Memory for one run.
#[derive(Debug)]
pub struct MemoryRun {
    /// Where memory lives.
    pub store: Arc<dyn Store>,
    /// The agent's memory options.
    pub config: Arc<MemoryConfig>,
    /// The run's thread.
    pub thread_id: String,
    /// The thread's owner.
    pub resource_id: String,
    /// Working memory as this run sees and changes it; saved with the run.
    pub(super) working: Mutex<WorkingState>,
    /// The embedder of semantic recall.
    pub(super) embedder: Arc<dyn Embedder>,
    /// Embeddings of the run's messages, saved with them.
    pub(super) pending_embeddings: Mutex<Vec<EmbeddingRecord>>,
    /// How large the working memory the model writes may be.
    pub field_limits: FieldLimits,
    /// What the run's resource may keep, as the caller's API key sets it.
    pub quota: ResourceQuota,
}

impl MemoryRun {
    /// Memory for a run of `thread_id`, owned by `resource_id`, recalling with `embedder`.
    pub fn new(
        store: Arc<dyn Store>,
        config: Arc<MemoryConfig>,
        embedder: Arc<dyn Embedder>,
        thread_id: String,
        resource_id: String,
    ) -> MemoryRun {
        MemoryRun {
            store,
            config,
            thread_id,
            resource_id,
            working: Mutex::new(WorkingState::default()),
            embedder,
            pending_embeddings: Mutex::new(Vec::new()),
            field_limits: FieldLimits::default(),
            quota: ResourceQuota::UNLIMITED,
        }
    }
}

/// One update the model made during the run, re-applied on top of a concurrent one.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum WorkingUpdate {
    /// Markdown: the whole new document.
    Replace(String),
    /// JSON: a patch to deep-merge.
    Merge(Value),
}

/// Working memory as the run sees it.
#[derive(Debug, Default)]
pub(super) struct WorkingState {
    /// The current document, the run's updates included.
    pub(super) content: String,
    /// The stored version the run's updates apply to.
    pub(super) base_version: u64,
    /// The run's updates, in order.
    pub(super) updates: Vec<WorkingUpdate>,
}
