//! What a step is made of before the model call ([`StepInput`], which `processInputStep` may
//! override) and what it left behind ([`StepResult`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chunk::{FinishReason, Tripwire, Usage};
use super::message::{ToolCall, ToolResult};
use super::prompt::{ModelSettings, ToolChoice, ToolDefinition};

/// The step's model and options, as `processInputStep` sees and overrides them.
#[derive(Debug, Clone, PartialEq)]
pub struct StepInput {
    /// The `provider/model` id serving the step.
    pub model: String,
    /// The tools on offer.
    pub tools: Vec<ToolDefinition>,
    /// How tools may be used.
    pub tool_choice: ToolChoice,
    /// When set, only these tools are offered.
    pub active_tools: Option<Vec<String>>,
    /// Sampling settings.
    pub settings: ModelSettings,
    /// Provider-specific options.
    pub provider_options: Value,
    /// A JSON schema the answer must follow.
    pub structured_output: Option<Value>,
}

impl StepInput {
    /// The tools the model is offered: `tools`, narrowed by `active_tools`.
    pub fn offered_tools(&self) -> Vec<ToolDefinition> {
        match &self.active_tools {
            None => self.tools.clone(),
            Some(active) => self.tools.iter().filter(|tool| active.contains(&tool.name)).cloned().collect(),
        }
    }
}

/// What one model step produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// The step number, from 0.
    pub step: u32,
    /// The model that served it.
    pub model: String,
    /// The text the client saw (empty when a processor rejected the step).
    pub text: String,
    /// The reasoning the client saw.
    pub reasoning: String,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The step's usage.
    pub usage: Usage,
    /// The tool calls the model made.
    pub tool_calls: Vec<ToolCall>,
    /// The results of those calls, after `processToolResult`.
    pub tool_results: Vec<ToolResult>,
    /// Set when `processOutputStep` rejected the step.
    pub tripwire: Option<Tripwire>,
}
