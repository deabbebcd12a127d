//! [`MemoryRun`]: one run's view of memory — the store, the thread and resource, the agent's
//! memory options, and what the run will save — shared by that run's memory processors.

use std::sync::{Arc, Mutex};

use super::MemoryKind;
use super::config::MemoryConfig;
use super::embedder::Embedder;
use super::history::MessageHistory;
use super::recall::SemanticRecall;
use super::working::{UpdateWorkingMemory, WorkingMemory, WorkingState};
use crate::processor::Processor;
use crate::storage::{EmbeddingRecord, Store};
use crate::tool::Tool;

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
}

/// The memory processors of one run, by kind, and the tools they offer.
pub struct MemoryProcessors {
    history: Arc<dyn Processor>,
    working: Option<Arc<dyn Processor>>,
    recall: Option<Arc<dyn Processor>>,
    tools: Vec<Arc<dyn Tool>>,
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
        }
    }

    /// The run's memory processors.
    pub fn processors(self) -> MemoryProcessors {
        let run = Arc::new(self);
        let working_on = run.config.active_working_memory().is_some();
        let recall_on = run.config.semantic_recall.is_some();
        MemoryProcessors {
            history: Arc::new(MessageHistory::new(Arc::clone(&run))),
            working: working_on.then(|| Arc::new(WorkingMemory::new(Arc::clone(&run))) as Arc<dyn Processor>),
            recall: recall_on.then(|| Arc::new(SemanticRecall::new(Arc::clone(&run))) as Arc<dyn Processor>),
            tools: if working_on {
                vec![Arc::new(UpdateWorkingMemory::new(run)) as Arc<dyn Tool>]
            } else {
                Vec::new()
            },
        }
    }
}

impl std::fmt::Debug for MemoryProcessors {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MemoryProcessors")
            .field("history", &self.history)
            .field("working", &self.working)
            .field("recall", &self.recall)
            .finish()
    }
}

impl MemoryProcessors {
    /// The memory processors run before the agent's input processors, in order: recall comes
    /// after history so that it skips what history already loaded.
    pub const INPUT: &[MemoryKind] =
        &[MemoryKind::WorkingMemory, MemoryKind::MessageHistory, MemoryKind::SemanticRecall];

    /// The memory processors run after the agent's output processors, in order: embeddings are
    /// made before the save that stores them.
    pub const OUTPUT: &[MemoryKind] = &[MemoryKind::SemanticRecall, MemoryKind::MessageHistory];

    /// The processor of a kind, when it is on for this agent.
    pub fn get(&self, kind: MemoryKind) -> Option<&Arc<dyn Processor>> {
        match kind {
            MemoryKind::MessageHistory => Some(&self.history),
            MemoryKind::WorkingMemory => self.working.as_ref(),
            MemoryKind::SemanticRecall => self.recall.as_ref(),
        }
    }

    /// The tools the memory processors offer the model in this run.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }
}
