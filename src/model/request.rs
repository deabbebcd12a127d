//! The request of one model call: the prompt (already converted from the message list), the
//! tools on offer and the settings.

use serde_json::Value;

use crate::domain::{ModelSettings, PromptMessage, ToolChoice, ToolDefinition};

/// Everything one model call receives.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The prompt, system messages first.
    pub prompt: Vec<PromptMessage>,
    /// The tools on offer (already filtered by `active_tools`).
    pub tools: Vec<ToolDefinition>,
    /// How tools may be used.
    pub tool_choice: ToolChoice,
    /// Sampling settings.
    pub settings: ModelSettings,
    /// Provider-specific options, passed through untouched.
    pub provider_options: Value,
    /// A JSON schema the answer must follow, if any.
    pub structured_output: Option<Value>,
    /// How many model calls this run made before this one. Deterministic models use it to
    /// script a conversation; real providers ignore it.
    pub call_index: u32,
    /// Whether anyone sees the answer as it comes (a streamed run, or a processor of the
    /// stream). When nobody does, a provider may answer in one piece: one response to read
    /// rather than an event per token.
    pub streamed: bool,
}
