//! `[[agents]]`: an agent's model, instructions, memory, processor lists and tools.

use serde::Deserialize;
use toml::Spanned;

use super::memory::MemoryConfig;
use super::mock_script::MockScript;
use crate::domain::ModelSettings;

/// One entry of an agent's processor list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ProcessorEntry {
    /// A `[processors.*]` definition, a memory kind, or a built-in kind, by name.
    Name(String),
    /// A remote processor declared in place: `{ remote = "pii-guard", timeout_ms = 1500,
    /// on_failure = "closed", mode = "blocking" }` (the options of `kind = "remote"`, with the
    /// processor id under `remote`).
    Inline(toml::Table),
}

fn no_entries() -> Spanned<Vec<ProcessorEntry>> {
    Spanned::new(0..0, Vec::new())
}

/// One agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Unique id, used by clients.
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub instructions: String,
    /// `provider/model`, e.g. `mock/echo`.
    pub model: Spanned<String>,
    /// Tools by name.
    #[serde(default = "no_names")]
    pub tools: Spanned<Vec<String>>,
    /// Input processors, in order: definition names, built-in kinds, or inline remote processors.
    #[serde(default = "no_entries")]
    pub input_processors: Spanned<Vec<ProcessorEntry>>,
    /// Output processors, in order.
    #[serde(default = "no_entries")]
    pub output_processors: Spanned<Vec<ProcessorEntry>>,
    /// Error processors (`processAPIError`), in order.
    #[serde(default = "no_entries")]
    pub error_processors: Spanned<Vec<ProcessorEntry>>,
    /// Retries processors may ask for; unset means a processor's retry request aborts.
    #[serde(default)]
    pub max_processor_retries: Option<u32>,
    /// Model steps per run, at least 1. Default 5.
    #[serde(default = "default_max_steps")]
    pub max_steps: Spanned<u32>,
    /// Sampling settings passed to the model.
    #[serde(default)]
    pub settings: ModelSettings,
    /// Replies of `mock/script`, one per model call.
    #[serde(default)]
    pub script: Option<Spanned<MockScript>>,
    /// How the agent remembers (needs a thread id in the request).
    #[serde(default)]
    pub memory: Option<Spanned<MemoryConfig>>,
    /// A JSON schema every final answer must follow (structured output).
    #[serde(default)]
    pub output_schema: Option<Spanned<serde_json::Value>>,
    /// What this agent's run records keep beyond ids and decisions (`[agents.record]`).
    #[serde(default)]
    pub record: AgentRecordConfig,
}

/// `[agents.record]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentRecordConfig {
    /// Keep the prompt the model saw at each step and the chunks the client got. Default false:
    /// records hold ids, times and decisions only, never message texts.
    #[serde(default)]
    pub content: bool,
}

/// A default has no place in the file: its span is empty.
fn no_names() -> Spanned<Vec<String>> {
    Spanned::new(0..0, Vec::new())
}

fn default_max_steps() -> Spanned<u32> {
    Spanned::new(0..0, 5)
}
