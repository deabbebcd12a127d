//! The hook frames of the processor stream in domain types, named as the proto names them: a
//! [`HookCall`] (with its hook's [`HookArgs`]) goes out, a [`HookResult`] (an [`Outcome`], maybe a
//! [`Replacement`]) comes back. `server/remote_convert.rs` maps them to and from protobuf.

use serde_json::{Map, Value};

use crate::domain::{
    Chunk, DataChunk, FinishReason, Hook, Message, MessageSource, ModelSettings, PromptMessage, RunInfo,
    StepInput, StepResult, ToolCall, ToolChoice, ToolDefinition, ToolResult, TraceContext, Usage, Warning,
};
use crate::processor::Abort;

/// One hook call.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// Set by the session that sends it.
    pub call_id: u64,
    /// The hook.
    pub hook: Hook,
    /// The run.
    pub run: RunInfo,
    /// The model step (0 outside the loop).
    pub step: u32,
    /// Milliseconds since the Unix epoch by which the answer is due.
    pub deadline_unix_ms: i64,
    /// Consecutive retries processors asked for.
    pub retry_count: u32,
    /// The processor's state for this run.
    pub state: Map<String, Value>,
    /// The hook's arguments.
    pub args: HookArgs,
    /// The W3C trace context of the hook's span.
    pub trace_context: TraceContext,
}

/// A hook's arguments; only those of the hook are set.
#[derive(Debug, Clone, Default)]
pub struct HookArgs {
    /// The messages the hook sees.
    pub messages: Vec<Message>,
    /// Where each of `messages` came from, in the same order.
    pub message_sources: Vec<MessageSource>,
    /// The untagged system messages.
    pub system_messages: Vec<String>,
    /// The tagged system messages, as (tag, text), by tag.
    pub tagged_system_messages: Vec<(String, String)>,
    /// processOutputStream's chunk.
    pub part: Option<Chunk>,
    /// The step's model.
    pub model: String,
    /// The step's or the run's text.
    pub text: String,
    /// Why the step or run ended.
    pub finish_reason: Option<FinishReason>,
    /// Usage.
    pub usage: Option<Usage>,
    /// processOutputStep's tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// processToolResult's call.
    pub tool_call: Option<ToolCall>,
    /// processToolResult's result.
    pub tool_result: Option<ToolResult>,
    /// processAPIError's status and message.
    pub error: Option<(i32, String)>,
    /// processLLMRequest's prompt.
    pub prompt: Vec<PromptMessage>,
    /// processLLMResponse's chunks, or a processOutputStream window.
    pub chunks: Vec<Chunk>,
    /// processInputStep's tools on offer.
    pub tools: Vec<String>,
    /// The steps so far (v2).
    pub steps: Vec<StepResult>,
    /// The step's model call (v2): processInputStep, processLLMRequest.
    pub step_input: Option<StepInput>,
}

/// The answer to one call.
#[derive(Debug, Clone)]
pub struct HookResult {
    /// The processor's new state (`None`: unchanged).
    pub state: Option<Map<String, Value>>,
    /// What to do.
    pub outcome: Outcome,
    /// Custom chunks to stream.
    pub emitted: Vec<DataChunk>,
    /// What it warned of.
    pub warnings: Vec<Warning>,
}

/// What a remote processor decided.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Nothing changes.
    Continue,
    /// Stop the run with a tripwire.
    Abort(Abort),
    /// Replace what the hook allows.
    Replace(Box<Replacement>),
    /// Drop the chunk (processOutputStream).
    Drop,
    /// Call the model again (processAPIError), with these messages when set (v2).
    RetryApiCall(Option<Vec<Message>>),
    /// The processor failed.
    Failure(String),
}

/// What a hook may replace.
#[derive(Debug, Clone, Default)]
pub struct Replacement {
    /// Messages.
    pub messages: Option<Vec<Message>>,
    /// Untagged system messages.
    pub system_messages: Option<Vec<String>>,
    /// The chunk.
    pub part: Option<Chunk>,
    /// The tool result.
    pub tool_result: Option<Value>,
    /// The step's model.
    pub model: Option<String>,
    /// The step's tool choice.
    pub tool_choice: Option<ToolChoice>,
    /// The step's active tools.
    pub active_tools: Option<Vec<String>>,
    /// The outgoing prompt.
    pub prompt: Option<Vec<PromptMessage>>,
    /// The chunks that replace a window.
    pub parts: Option<Vec<Chunk>>,
    /// Tagged system messages to add, as (tag, text) (v2).
    pub add_tagged_system_messages: Vec<(String, String)>,
    /// Tags to empty before adding (v2).
    pub clear_system_tags: Vec<String>,
    /// processLLMRequest: the chunks that answer in the model's place (v2).
    pub response: Option<Vec<Chunk>>,
    /// processInputStep: the step's tools (v2).
    pub tools: Option<Vec<ToolDefinition>>,
    /// processInputStep: the step's settings (v2).
    pub model_settings: Option<ModelSettings>,
    /// processInputStep: the step's provider options (v2).
    pub provider_options: Option<Value>,
    /// processInputStep: the step's output schema (v2).
    pub structured_output: Option<Value>,
}

impl Replacement {
    /// The wire names of the fields it sets (`messages`, `model`, ...), in the proto's order.
    pub fn set_fields(&self) -> Vec<&'static str> {
        let fields = [
            ("messages", self.messages.is_some()),
            ("system_messages", self.system_messages.is_some()),
            ("part", self.part.is_some()),
            ("tool_result", self.tool_result.is_some()),
            ("model", self.model.is_some()),
            ("tool_choice", self.tool_choice.is_some()),
            ("active_tools", self.active_tools.is_some()),
            ("prompt", self.prompt.is_some()),
            ("parts", self.parts.is_some()),
            ("add_tagged_system_messages", !self.add_tagged_system_messages.is_empty()),
            ("clear_system_tags", !self.clear_system_tags.is_empty()),
            ("response", self.response.is_some()),
            ("tools", self.tools.is_some()),
            ("model_settings", self.model_settings.is_some()),
            ("provider_options", self.provider_options.is_some()),
            ("structured_output", self.structured_output.is_some()),
        ];
        fields.into_iter().filter(|(_, set)| *set).map(|(name, _)| name).collect()
    }

    /// Applies the tagged system messages it adds or clears to `list`.
    pub fn apply_tagged_system_messages(&mut self, list: &mut crate::domain::MessageList) {
        for tag in self.clear_system_tags.drain(..) {
            list.clear_tagged_system(&tag);
        }
        for (tag, text) in self.add_tagged_system_messages.drain(..) {
            list.add_tagged_system(&tag, text);
        }
    }
}
