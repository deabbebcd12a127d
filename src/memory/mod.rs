//! Memory: the processors that give agents a past — [`WorkingMemory`] (a document about the user
//! the model keeps up to date) and [`MessageHistory`] (the last messages of the thread) — built per
//! run over the [`Store`](crate::storage::Store) from the agent's `memory` table.
//!
//! Memory processors run first on input (they load what guardrails then see) and last on output
//! (they persist only what every output processor accepted): an abort anywhere, or a failed run,
//! persists nothing. An agent that names a memory kind in its own lists places it there instead.
//!
//! [`MemoryRun`] (`run.rs`, a leaf) is one run's view of memory; [`MemoryRun::processors`] here
//! builds that run's processors over it; each processor lives in its own file.

pub mod embedder;
mod history;
mod recall;
mod run;
mod working;

use std::sync::Arc;

pub use self::history::MessageHistory;
pub use self::recall::SemanticRecall;
pub use self::run::MemoryRun;
pub use self::working::{
    DEFAULT_TEMPLATE, TOOL_NAME as WORKING_MEMORY_TOOL, UpdateWorkingMemory, WorkingMemory, deep_merge,
};
use crate::processor::Processor;
use crate::tool::Tool;

/// The memory processors, by kind (their kind is their id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Shows working memory to the model and offers the tool that updates it.
    WorkingMemory,
    /// Loads the thread's last messages; persists the run.
    MessageHistory,
    /// Recalls similar past messages; embeds the run's messages.
    SemanticRecall,
}

impl MemoryKind {
    /// Every memory kind, in their order on input.
    pub const ALL: [MemoryKind; 3] =
        [MemoryKind::WorkingMemory, MemoryKind::MessageHistory, MemoryKind::SemanticRecall];

    /// The kind's name, also the processor's id.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::WorkingMemory => "working-memory",
            MemoryKind::MessageHistory => "message-history",
            MemoryKind::SemanticRecall => "semantic-recall",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<MemoryKind> {
        MemoryKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// The memory processors of one run, by kind, and the tools they offer.
pub struct MemoryProcessors {
    history: Arc<dyn Processor>,
    working: Option<Arc<dyn Processor>>,
    recall: Option<Arc<dyn Processor>>,
    tools: Vec<Arc<dyn Tool>>,
}

impl MemoryRun {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryConfig;
    use crate::memory::embedder::Lexical;
    use crate::processor::hook_check::unlisted_hooks;
    use crate::storage::SledStore;

    /// Each memory processor lists every hook it implements (they are built per run, outside
    /// the registry that checks the others).
    #[test]
    fn memory_processors_list_every_hook_they_implement() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SledStore::open(dir.path()).unwrap());
        let config: MemoryConfig =
            toml::from_str("semantic_recall = { top_k = 2 }\nworking_memory = { enabled = true }").unwrap();
        let run = MemoryRun::new(store, Arc::new(config), Arc::new(Lexical::new()), "t".into(), "r".into());
        let processors = run.processors();
        for kind in MemoryKind::ALL {
            let processor = processors.get(kind).expect("every kind is on");
            assert!(unlisted_hooks(processor.as_ref()).is_empty(), "{}", kind.name());
        }
    }
}
