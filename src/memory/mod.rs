//! Memory: the processors that give agents a past — [`WorkingMemory`] (a document about the user
//! the model keeps up to date) and [`MessageHistory`] (the last messages of the thread) — built per
//! run over the [`Store`](crate::storage::Store) from the agent's `memory` table.
//!
//! Memory processors run first on input (they load what guardrails then see) and last on output
//! (they persist only what every output processor accepted): an abort anywhere, or a failed run,
//! persists nothing. An agent that names a memory kind in its own lists places it there instead.

mod config;
pub mod embedder;
mod history;
mod recall;
mod run;
mod working;

pub use self::config::{
    MemoryConfig, MessageRange, RecallScopeKind, SemanticRecallConfig, WorkingMemoryConfig,
    WorkingMemoryScopeKind,
};
pub use self::history::MessageHistory;
pub use self::recall::SemanticRecall;
pub use self::run::{MemoryProcessors, MemoryRun};
pub use self::working::{
    DEFAULT_TEMPLATE, TOOL_NAME as WORKING_MEMORY_TOOL, UpdateWorkingMemory, WorkingMemory, deep_merge,
};

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
