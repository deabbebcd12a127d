//! [`MemoryRun`]: one run's view of memory — the store, the thread and resource, the agent's
//! memory options — shared by that run's memory processors.

use std::sync::Arc;

use super::MemoryKind;
use super::config::MemoryConfig;
use super::history::MessageHistory;
use crate::processor::Processor;
use crate::storage::Store;

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
}

/// The memory processors of one run, by kind.
#[derive(Debug)]
pub struct MemoryProcessors {
    history: Arc<dyn Processor>,
}

impl MemoryRun {
    /// The run's memory processors.
    pub fn processors(self) -> MemoryProcessors {
        let run = Arc::new(self);
        MemoryProcessors { history: Arc::new(MessageHistory::new(run)) }
    }
}

impl MemoryProcessors {
    /// The processor of a kind.
    pub fn get(&self, kind: MemoryKind) -> &Arc<dyn Processor> {
        match kind {
            MemoryKind::MessageHistory => &self.history,
        }
    }

    /// The memory processors run before the agent's input processors, in order.
    pub const INPUT: &[MemoryKind] = &[MemoryKind::MessageHistory];

    /// The memory processors run after the agent's output processors, in order.
    pub const OUTPUT: &[MemoryKind] = &[MemoryKind::MessageHistory];
}
