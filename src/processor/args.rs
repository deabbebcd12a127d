//! The arguments each hook receives and what each may return, as the processor contract gives
//! them. "Unchanged" is always the default, so a hook that returns `Default::default()` (or
//! mutates the message list in place) changes nothing else.

use std::collections::BTreeMap;

use serde_json::Value;

use super::context::HookContext;
use super::window_ahead::WindowAnswered;
use crate::domain::{
    Chunk, FinishReason, Message, MessageList, ModelSettings, PromptMessage, StepInput, StepResult, ToolCall,
    ToolChoice, ToolDefinition, Usage,
};
use crate::model::ModelError;

/// `processInput`: the run's input, once, before the loop.
#[derive(Debug)]
pub struct InputArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The remembered messages (loaded by the memory processors before this one) and the run's
    /// input, in order; `message_list.source_of(id)` says which is which. Rewriting or dropping a
    /// remembered message changes only this run's prompt, never what is stored.
    pub messages: Vec<Message>,
    /// The untagged system messages: the agent's instructions and what processors added.
    pub system_messages: Vec<String>,
    /// The tagged system messages (memory context, ...), by tag; never among `system_messages`.
    pub tagged_system_messages: BTreeMap<String, Vec<String>>,
    /// The live list, to mutate in place.
    pub message_list: &'a mut MessageList,
}

/// What `processInput` may return.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum InputOutcome {
    /// Nothing changed, or the message list was mutated in place.
    #[default]
    Unchanged,
    /// These messages replace the input (missing ids are removed; `system` messages become
    /// system messages).
    Messages(Vec<Message>),
    /// Replaced messages and replaced system messages.
    MessagesAndSystem {
        /// The input messages.
        messages: Vec<Message>,
        /// The untagged system messages.
        system_messages: Vec<String>,
    },
}

/// `processInputStep`: every step, before the prompt is built.
#[derive(Debug)]
pub struct InputStepArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// All messages so far: history, input and earlier steps' responses.
    pub messages: Vec<Message>,
    /// The untagged system messages of this step.
    pub system_messages: Vec<String>,
    /// The tagged system messages (retry feedback, memory context, ...), by tag; never among
    /// `system_messages`.
    pub tagged_system_messages: BTreeMap<String, Vec<String>>,
    /// The live list, to mutate in place.
    pub message_list: &'a mut MessageList,
    /// The step number, from 0.
    pub step_number: u32,
    /// The results of earlier steps.
    pub steps: &'a [StepResult],
    /// The step's model and options, as overridden by earlier processors in the chain.
    pub step: &'a StepInput,
}

/// What `processInputStep` may return: any combination of overrides for this step. Each set
/// field replaces the running value, and the next processor sees the result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepOverrides {
    /// Switch the step's model (`provider/model`).
    pub model: Option<String>,
    /// Replace the tools on offer.
    pub tools: Option<Vec<ToolDefinition>>,
    /// Replace the tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// Offer only these tools.
    pub active_tools: Option<Vec<String>>,
    /// Replace all messages (reconciled with the list).
    pub messages: Option<Vec<Message>>,
    /// Replace the untagged system messages, for this step only.
    pub system_messages: Option<Vec<String>>,
    /// Replace the sampling settings.
    pub model_settings: Option<ModelSettings>,
    /// Replace the provider options.
    pub provider_options: Option<Value>,
    /// Replace the structured output schema.
    pub structured_output: Option<Value>,
}

impl StepOverrides {
    /// Applies the step fields to `step`, and gives back the rest (the messages and system
    /// messages, which belong to the message list).
    pub fn apply_to(self, step: &mut StepInput) -> StepOverrides {
        let StepOverrides {
            model,
            tools,
            tool_choice,
            active_tools,
            messages,
            system_messages,
            model_settings,
            provider_options,
            structured_output,
        } = self;
        if let Some(model) = model {
            step.model = model;
        }
        if let Some(tools) = tools {
            step.tools = tools;
        }
        if let Some(tool_choice) = tool_choice {
            step.tool_choice = tool_choice;
        }
        if active_tools.is_some() {
            step.active_tools = active_tools;
        }
        if let Some(settings) = model_settings {
            step.settings = settings;
        }
        if let Some(provider_options) = provider_options {
            step.provider_options = provider_options;
        }
        if structured_output.is_some() {
            step.structured_output = structured_output;
        }
        StepOverrides { messages, system_messages, ..StepOverrides::default() }
    }
}

/// `processLLMRequest`: the outgoing prompt of a step, after conversion.
#[derive(Debug)]
pub struct LlmRequestArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The prompt about to be sent (as rewritten by earlier processors).
    pub prompt: &'a [PromptMessage],
    /// The model that will receive it.
    pub model: &'a str,
    /// The rest of the call: tools on offer, tool choice, settings, provider options, output
    /// schema (as `processInputStep` left them).
    pub step: &'a StepInput,
    /// The step number.
    pub step_number: u32,
    /// The results of earlier steps.
    pub steps: &'a [StepResult],
    /// The live list, read-only: nothing written here would reach the model.
    pub message_list: &'a MessageList,
}

/// What `processLLMRequest` may return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmRequestOutcome {
    /// Send this prompt instead, for this call only: never persisted, never seen by later steps.
    pub prompt: Option<Vec<PromptMessage>>,
    /// Skip the model and replay these chunks as its answer (e.g. a cache hit). The first
    /// processor to answer wins; later processors still run.
    pub response: Option<Vec<Chunk>>,
}

/// `processLLMResponse`: a step's model chunks, after its stream completed.
#[derive(Debug)]
pub struct LlmResponseArgs<'a> {
    /// Hook context (the same `state` as this step's `processLLMRequest`).
    pub ctx: HookContext<'a>,
    /// The chunks the model produced (or the cache replayed), before stream processors.
    pub chunks: &'a [Chunk],
    /// The model that produced them.
    pub model: &'a str,
    /// The step number.
    pub step_number: u32,
    /// All steps so far, the current one included.
    pub steps: &'a [StepResult],
    /// True when a `processLLMRequest` response replaced the model call.
    pub from_cache: bool,
}

/// `processAPIError`: the model rejected a call (error processors only).
#[derive(Debug)]
pub struct ApiErrorArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The rejection.
    pub error: &'a ModelError,
    /// All messages at the time of the error.
    pub messages: Vec<Message>,
    /// The live list: repair it here before asking for a retry.
    pub message_list: &'a mut MessageList,
    /// The step number.
    pub step_number: u32,
    /// The results of earlier steps.
    pub steps: &'a [StepResult],
}

/// What `processAPIError` may return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiErrorOutcome {
    /// Retry the model call with the (repaired) messages.
    pub retry: bool,
}

/// `processOutputStream`: one chunk on its way to the client.
#[derive(Debug)]
pub struct OutputStreamArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The chunk, as rewritten by earlier processors.
    pub part: Chunk,
    /// Every chunk this processor has seen in this run, the current one included.
    pub stream_parts: &'a [Chunk],
    /// The live list, read-only.
    pub message_list: &'a MessageList,
}

/// `processOutputStream` for a processor that takes windows: the window's chunks.
#[derive(Debug)]
pub struct OutputWindowArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The window's chunks, in order, as rewritten by earlier processors.
    pub parts: Vec<Chunk>,
    /// Every chunk this processor has seen in this run, the window's included (last).
    pub stream_parts: &'a [Chunk],
    /// The live list, read-only.
    pub message_list: &'a MessageList,
    /// The answer, when this processor sent the window ahead
    /// ([`Processor::send_output_window`](super::Processor::send_output_window)) and the state
    /// is still the one it was sent with.
    pub answered: Option<WindowAnswered>,
}

/// A closed window to send ahead: `processOutputStream` without waiting for the answer.
#[derive(Debug)]
pub struct OutputWindowSendArgs<'a> {
    /// Hook context; its state is the one the window is answered with.
    pub ctx: HookContext<'a>,
    /// The window's chunks, in order, as rewritten by earlier processors.
    pub parts: &'a [Chunk],
}

/// The end of a step's stream, for a stream processor that holds text back.
#[derive(Debug)]
pub struct OutputStreamEndArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// Every chunk this processor has seen in this run.
    pub stream_parts: &'a [Chunk],
    /// The live list, read-only.
    pub message_list: &'a MessageList,
}

/// `processOutputStep`: after a model step, before its tools run.
#[derive(Debug)]
pub struct OutputStepArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// All messages, the step's response included.
    pub messages: Vec<Message>,
    /// The live list, to mutate in place.
    pub message_list: &'a mut MessageList,
    /// The step number.
    pub step_number: u32,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The tool calls the model made in this step.
    pub tool_calls: &'a [ToolCall],
    /// The text of this step.
    pub text: &'a str,
    /// The step's usage.
    pub usage: Usage,
    /// The untagged system messages of this step.
    pub system_messages: Vec<String>,
    /// The tagged system messages (retry feedback, memory context, ...), by tag; never among
    /// `system_messages`.
    pub tagged_system_messages: BTreeMap<String, Vec<String>>,
    /// All steps so far, the current one included.
    pub steps: &'a [StepResult],
}

/// `processToolResult`: after a tool returned, before its result is streamed.
#[derive(Debug)]
pub struct ToolResultArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The tool.
    pub tool_name: &'a str,
    /// The call.
    pub tool_call_id: &'a str,
    /// The call's arguments.
    pub args: &'a Value,
    /// The result, as rewritten by earlier processors.
    pub result: Value,
    /// True when the tool failed: `result` holds the error the model will see.
    pub is_error: bool,
    /// All messages, the tool result included.
    pub messages: Vec<Message>,
    /// The live list; [`MessageList::update_tool_result`] rewrites the result too.
    pub message_list: &'a mut MessageList,
    /// The untagged system messages.
    pub system_messages: Vec<String>,
    /// The tagged system messages (retry feedback, memory context, ...), by tag; never among
    /// `system_messages`.
    pub tagged_system_messages: BTreeMap<String, Vec<String>>,
    /// The step number.
    pub step_number: u32,
    /// All steps so far.
    pub steps: &'a [StepResult],
}

/// What `processToolResult` may return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResultOutcome {
    /// Replace the result: what the model, the stream and memory will see.
    pub result: Option<Value>,
    /// Replace all messages (reconciled with the list).
    pub messages: Option<Vec<Message>>,
}

/// The result of a completed run, as `processOutputResult` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSummary {
    /// The text of the run.
    pub text: String,
    /// Total usage.
    pub usage: Usage,
    /// Why the run ended.
    pub finish_reason: FinishReason,
    /// Every step.
    pub steps: Vec<StepResult>,
}

/// `processOutputResult`: once, after the run completed.
#[derive(Debug)]
pub struct OutputResultArgs<'a> {
    /// Hook context.
    pub ctx: HookContext<'a>,
    /// The run's response messages.
    pub messages: Vec<Message>,
    /// The live list, to mutate in place.
    pub message_list: &'a mut MessageList,
    /// The run's result.
    pub result: &'a OutputSummary,
}
