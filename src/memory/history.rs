//! `message-history`: loads the thread's last messages before the model call, and saves the
//! run's input and response messages after every output processor accepted them.

use std::collections::HashSet;
use std::sync::Arc;

use super::run::MemoryRun;
use crate::processor::{
    Hook, HookError, HookResult, HookSet, InputArgs, InputOutcome, OutputResultArgs, Processor,
};
use crate::runtime::{Message, MessageSource, Part, Role};
use crate::storage::RunSave;

/// Message history of one run's thread.
#[derive(Debug)]
pub struct MessageHistory {
    run: Arc<MemoryRun>,
}

impl MessageHistory {
    /// The history processor of a run.
    pub fn new(run: Arc<MemoryRun>) -> MessageHistory {
        MessageHistory { run }
    }
}

fn storage_failure(action: &str, error: impl std::fmt::Display) -> HookError {
    HookError::Failed(format!("cannot {action}: {error}"))
}

/// Drops tool results at the start of a window whose calls fell outside it: a call and its
/// result are loaded together or not at all.
fn without_orphan_results(mut messages: Vec<Message>) -> Vec<Message> {
    let called: HashSet<String> = messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match part {
            Part::ToolCall(call) => Some(call.tool_call_id.clone()),
            _ => None,
        })
        .collect();
    messages.retain(|message| {
        message.role != Role::Tool
            || message.parts.iter().all(|part| match part {
                Part::ToolResult(result) => called.contains(&result.tool_call_id),
                _ => true,
            })
    });
    messages
}

#[async_trait::async_trait]
impl Processor for MessageHistory {
    fn id(&self) -> &str {
        super::MemoryKind::MessageHistory.name()
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputResult])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> HookResult<InputOutcome> {
        let limit = usize::try_from(self.run.config.last_messages).unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(InputOutcome::Unchanged);
        }
        let stored = self
            .run
            .store
            .last_messages(&self.run.thread_id, limit)
            .await
            .map_err(|error| storage_failure("load the thread's messages", error))?;
        let remembered = without_orphan_results(stored.into_iter().map(|stored| stored.message).collect());
        for message in remembered {
            // A client that echoes history sends messages we already have: the stored copy wins.
            if args.message_list.get(&message.id).is_none() {
                args.message_list.add(message, MessageSource::Memory);
            }
        }
        Ok(InputOutcome::Unchanged)
    }

    async fn process_output_result(&self, args: OutputResultArgs<'_>) -> HookResult<Option<Vec<Message>>> {
        let list = &*args.message_list;
        let messages: Vec<Message> = list
            .from_source(MessageSource::Input)
            .chain(list.from_source(MessageSource::Response))
            .filter(|message| message.role != Role::System && !message.parts.is_empty())
            .cloned()
            .collect();
        let save = RunSave {
            thread_id: self.run.thread_id.clone(),
            resource_id: self.run.resource_id.clone(),
            messages,
            embeddings: Vec::new(),
            working_memory: None,
        };
        self.run.store.save_run(save).await.map_err(|error| storage_failure("save the run", error))?;
        Ok(None)
    }
}
