//! The prompt of a model call as plain data: its messages, the tools on offer, the tool choice
//! and the sampling settings. Processors read and replace these; providers turn them into HTTP.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::{Part, Role};

/// The user turn that ends a prompt which would otherwise end with an assistant turn, for
/// providers that refuse assistant prefill (the Anthropic adapter, `prefill-error-handler`).
pub const CONTINUE_TURN: &str = "<system-reminder type=\"prefill-retry\">continue</system-reminder>";

/// The user turn that opens a prompt which would otherwise open with an assistant turn (a
/// history window that starts mid-conversation), for providers that want a user turn first.
pub const EARLIER_CONVERSATION_TURN: &str =
    "<system-reminder>the conversation continues from earlier messages</system-reminder>";
/// One message of the outgoing prompt. System messages hold a single text part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    pub parts: Vec<Part>,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: Value,
}

/// How the model may use tools in a step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool must be called.
    Tool(String),
}

/// Sampling settings passed through to the provider.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Upper bound on output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}
