//! `tool-call-filter`: hides the tool calls and results of recalled history — all, or those of
//! the named tools — from the prompt the model gets (processLLMRequest: per call, never
//! persisted). The current run's own tool calls stay, so its tool loop works, and memory keeps
//! everything.

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Hook, HookSet, MessageSource, Part, Role};
use crate::processor::{BuildError, HookError, LlmRequestArgs, LlmRequestOutcome, Processor, parse_options};

pub(super) const KIND: &str = "tool-call-filter";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// Only these tools (default: all).
    #[serde(default)]
    tools: Option<Vec<String>>,
}

/// Hides tool calls from the model's context.
pub(super) struct ToolCallFilter {
    id: String,
    tools: Option<Vec<String>>,
}

impl ToolCallFilter {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        Ok(Arc::new(ToolCallFilter { id: id.to_owned(), tools: options.tools }))
    }

    fn hides(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|tools| tools.iter().any(|name| name == tool))
    }
}

#[async_trait::async_trait]
impl Processor for ToolCallFilter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest])
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        // The tool calls of recalled history, by id.
        let hidden: HashSet<&str> = args
            .message_list
            .from_source(MessageSource::Memory)
            .flat_map(|message| &message.parts)
            .filter_map(|part| match part {
                Part::ToolCall(call) if self.hides(&call.tool_name) => Some(call.tool_call_id.as_str()),
                Part::ToolResult(result) if self.hides(&result.tool_name) => {
                    Some(result.tool_call_id.as_str())
                }
                _ => None,
            })
            .collect();
        if hidden.is_empty() {
            return Ok(LlmRequestOutcome::default());
        }
        let mut prompt = args.prompt.to_vec();
        for message in &mut prompt {
            message.parts.retain(|part| match part {
                Part::ToolCall(call) => !hidden.contains(call.tool_call_id.as_str()),
                Part::ToolResult(result) => !hidden.contains(result.tool_call_id.as_str()),
                _ => true,
            });
        }
        prompt.retain(|message| message.role == Role::System || !message.parts.is_empty());
        Ok(LlmRequestOutcome { prompt: Some(prompt), response: None })
    }
}
