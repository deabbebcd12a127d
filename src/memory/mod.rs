//! Memory: the processors that give agents a past — [`MessageHistory`] (the last messages of the
//! thread), and, in the agent's `memory` table, their options — built per run over the
//! [`Store`](crate::storage::Store).
//!
//! Memory processors run first on input (they load what guardrails then see) and last on output
//! (they persist only what every output processor accepted): an abort anywhere, or a failed run,
//! persists nothing. An agent that names a memory kind in its own lists places it there instead.

mod config;
mod history;
mod run;

pub use self::config::MemoryConfig;
pub use self::history::MessageHistory;
pub use self::run::{MemoryProcessors, MemoryRun};

/// The memory processors, by kind (their kind is their id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Loads the thread's last messages; persists the run.
    MessageHistory,
}

impl MemoryKind {
    /// Every memory kind, in their order on input.
    pub const ALL: [MemoryKind; 1] = [MemoryKind::MessageHistory];

    /// The kind's name, also the processor's id.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::MessageHistory => "message-history",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<MemoryKind> {
        MemoryKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}
