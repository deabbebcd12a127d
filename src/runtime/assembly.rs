//! A run's processor chains: the listed processors, with the run's memory processors where the
//! agent lists memory kinds, and the other memory processors first on input and last on output.

use std::sync::Arc;

use super::{Agent, NamedProcessor, ProcessorRef, RunError, RunRequest, Runtime};
use crate::domain::{Part, ResourceQuota, thread_owner};
use crate::memory::{MemoryKind, MemoryProcessors, MemoryRun};
use crate::processor::Processor;
use crate::storage::{ResourceUsage, check_quota};

/// Which list a chain is assembled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placement {
    Input,
    Output,
    Error,
}

impl Runtime {
    /// The run's memory processors, when the agent remembers and the run names a thread. A
    /// thread that belongs to another resource is refused before anything runs.
    pub(super) async fn memory_for(
        &self,
        agent: &Agent,
        request: &RunRequest,
    ) -> Result<Option<MemoryProcessors>, RunError> {
        let (Some(config), Some(store)) = (&agent.memory, &self.store) else {
            return Ok(None);
        };
        if request.thread_id.is_empty() {
            return Ok(None);
        }
        // A run that would be saved is refused up front while the store cannot take the save.
        store.check_writable()?;
        let resource_id = thread_owner(&request.thread_id, &request.resource_id).to_owned();
        if let Some(allowance) = &request.allowance {
            store.claim_resource(allowance, &resource_id).await?;
        }
        // A resource at its quota is refused before the model runs (the save checks exactly);
        // without one, nothing is read for it.
        if request.quota != ResourceQuota::UNLIMITED {
            let (usage, thread_exists) = store.usage_with_thread(&resource_id, &request.thread_id).await?;
            let grown = ResourceUsage {
                threads: usage.threads + u64::from(!thread_exists),
                messages: usage.messages + 1,
                bytes: usage.bytes + 1,
            };
            check_quota(&request.quota, &resource_id, usage, grown)?;
        }
        let embedder = Arc::clone(&agent.embedder);
        let mut run = MemoryRun::new(
            Arc::clone(store),
            Arc::clone(config),
            embedder,
            request.thread_id.clone(),
            resource_id,
        );
        run.field_limits = self.field_limits;
        run.quota = request.quota;
        Ok(Some(run.processors()))
    }
}

impl Runtime {
    /// Refuses input messages over `[limits] max_message_bytes`.
    pub(super) fn check_message_sizes(&self, request: &RunRequest) -> Result<(), RunError> {
        for (index, message) in request.messages.iter().enumerate() {
            let size = message.payload_bytes();
            if size > self.max_message_bytes {
                return Err(RunError::TooLarge {
                    field: format!("messages[{index}]"),
                    size,
                    limit_name: "limits.max_message_bytes",
                    limit: self.max_message_bytes,
                });
            }
        }
        Ok(())
    }

    /// Refuses file parts larger than what memory stores.
    pub(super) fn check_file_sizes(&self, request: &RunRequest) -> Result<(), RunError> {
        for (message_index, message) in request.messages.iter().enumerate() {
            for (part_index, part) in message.parts.iter().enumerate() {
                if let Part::File { data, .. } = part
                    && data.len() > self.max_file_bytes
                {
                    return Err(RunError::TooLarge {
                        field: format!("messages[{message_index}].parts[{part_index}].file.data"),
                        size: data.len(),
                        limit_name: "storage.max_file_bytes",
                        limit: self.max_file_bytes,
                    });
                }
            }
        }
        Ok(())
    }
}

/// The memory kinds a list names: a listed processor whose id is a memory kind's (the kind
/// itself, a definition, a remote processor) replaces the automatic one on its side.
pub(super) fn listed_memory_kinds(listed: &[NamedProcessor]) -> Vec<MemoryKind> {
    listed
        .iter()
        .filter_map(|named| match &named.processor {
            ProcessorRef::Memory(kind) => Some(*kind),
            ProcessorRef::Fixed(processor) => MemoryKind::from_name(processor.id()),
        })
        .collect()
}

/// A run's chain: the listed processors, with memory slots filled by the run's memory
/// processors (or dropped when the run has no memory), and the memory processors the list does
/// not name (by kind or by id) added before (input) or after (output) it.
pub(super) fn chain(
    listed: &[NamedProcessor],
    memory: Option<&MemoryProcessors>,
    placement: Placement,
) -> Vec<Arc<dyn Processor>> {
    let listed_memory = listed_memory_kinds(listed);
    let automatic = |kinds: Vec<MemoryKind>| -> Vec<Arc<dyn Processor>> {
        let Some(memory) = memory else { return Vec::new() };
        kinds
            .into_iter()
            .filter(|kind| !listed_memory.contains(kind))
            .filter_map(|kind| memory.get(kind).cloned())
            .collect()
    };
    let mut chain = Vec::with_capacity(listed.len() + MemoryKind::ALL.len());
    if placement == Placement::Input {
        chain.extend(automatic(MemoryProcessors::INPUT.to_vec()));
    }
    for named in listed {
        match &named.processor {
            ProcessorRef::Fixed(processor) => chain.push(Arc::clone(processor)),
            ProcessorRef::Memory(kind) => chain.extend(memory.and_then(|memory| memory.get(*kind).cloned())),
        }
    }
    if placement == Placement::Output {
        chain.extend(automatic(MemoryProcessors::OUTPUT.to_vec()));
    }
    chain
}
