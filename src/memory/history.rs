//! `message-history`: loads the thread's last messages before the model call, and saves the
//! run's input and response messages after every output processor accepted them.

use std::collections::HashSet;
use std::sync::Arc;

use super::run::MemoryRun;
use super::working::{MAX_REBASES, is_working_memory_traffic};
use crate::domain::{Hook, HookSet, Message, MessageList, MessageSource, Part, Role};
use crate::processor::{HookError, InputArgs, InputOutcome, OutputResultArgs, Processor};
use crate::storage::{RunSave, StoreError};

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

/// What a run keeps: its input and response messages, without system messages and without the
/// working-memory tool's calls and results (working memory itself is saved instead).
fn persisted(list: &MessageList) -> Vec<Message> {
    list.run_messages()
        .filter(|message| message.role != Role::System)
        .filter_map(|message| {
            let mut kept = message.clone();
            kept.parts.retain(|part| !is_working_memory_traffic(part));
            (!kept.parts.is_empty()).then_some(kept)
        })
        .collect()
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

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let limit = usize::try_from(self.run.config.last_messages).unwrap_or(usize::MAX);
        if limit == 0 {
            return Ok(InputOutcome::Unchanged);
        }
        let stored = self
            .run
            .store
            .last_messages(&self.run.resource_id, &self.run.thread_id, limit)
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

    async fn process_output_result(
        &self,
        args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        let messages = persisted(args.message_list);
        let mut rebases = 0;
        loop {
            let save = RunSave {
                thread_id: self.run.thread_id.clone(),
                resource_id: self.run.resource_id.clone(),
                messages: messages.clone(),
                embeddings: self.run.pending_embeddings.lock().expect("embeddings lock").clone(),
                working_memory: self.run.pending_working_memory(),
                quota: self.run.quota,
            };
            match self.run.store.save_run(save).await {
                Ok(()) => return Ok(None),
                // Working memory changed under this run: merge again on top and retry.
                Err(StoreError::VersionConflict { .. }) if rebases < MAX_REBASES => {
                    rebases += 1;
                    self.run
                        .rebase_working_memory()
                        .await
                        .map_err(|error| storage_failure("update working memory", error))?;
                }
                Err(error) => return Err(storage_failure("save the run", error)),
            }
        }
    }
}
