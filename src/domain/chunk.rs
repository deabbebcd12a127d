//! Chunks: what a run streams to its client, named after Mastra's stream protocol.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::{ToolCall, ToolResult};

/// Token usage of a step or a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens the model produced.
    pub output_tokens: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds another usage to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why a step or a run ended (the AI SDK vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model hit its token limit.
    Length,
    /// The model called tools (a step ending this way is followed by another).
    ToolCalls,
    /// The provider filtered the content.
    ContentFilter,
    /// A processor aborted the run (the unary result of a tripwire).
    Other,
    /// The run failed.
    Error,
}

impl FinishReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool-calls",
            FinishReason::ContentFilter => "content-filter",
            FinishReason::Other => "other",
            FinishReason::Error => "error",
        }
    }
}

/// A processor's abort: the reason, whether it asks for a retry, and free metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tripwire {
    /// Human-readable reason; fed back to the model on a retry.
    pub reason: String,
    /// The processor asked the agent to retry the step with the reason as feedback.
    pub retry: bool,
    /// Structured data for downstream consumers.
    pub metadata: Value,
    /// The processor that aborted.
    pub processor_id: String,
}

/// A custom `data-*` chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataChunk {
    /// The full type name; always starts with `data-`.
    pub name: String,
    /// The payload.
    pub data: Value,
    /// An optional id chosen by the emitter.
    pub id: Option<String>,
    /// Streamed but never stored.
    pub transient: bool,
}

impl DataChunk {
    /// A non-transient data chunk. `name` gets a `data-` prefix if it lacks one.
    pub fn new(name: impl Into<String>, data: Value) -> DataChunk {
        let name = name.into();
        let name = if name.starts_with(DATA_PREFIX) { name } else { format!("{DATA_PREFIX}{name}") };
        DataChunk { name, data, id: None, transient: false }
    }

    /// Marks the chunk transient: streamed, never stored.
    pub fn transient(mut self) -> DataChunk {
        self.transient = true;
        self
    }
}

/// The prefix of every custom chunk type.
pub const DATA_PREFIX: &str = "data-";

/// Where a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorSource {
    /// The model call failed and no error processor recovered it.
    Model,
    /// A processor failed (not an abort: an abort is a tripwire).
    Processor,
    /// The run itself broke an invariant (a bug, or a step or time limit).
    Runtime,
}

impl ErrorSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorSource::Model => "model",
            ErrorSource::Processor => "processor",
            ErrorSource::Runtime => "runtime",
        }
    }
}

/// The error that ended a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFailure {
    /// What went wrong, naming the processor, model or field at fault.
    pub message: String,
    /// Where it went wrong.
    pub source: ErrorSource,
    /// The processor or model at fault, when known.
    pub origin: String,
}

/// One chunk of a run's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Chunk {
    /// The run began.
    Start {
        /// The agent that runs.
        agent_id: String,
        /// The run's thread, if any.
        thread_id: String,
        /// The run's resource, if any.
        resource_id: String,
    },
    /// A model step began.
    StepStart {
        /// The step number, from 0.
        step: u32,
        /// The assistant message this step writes.
        message_id: String,
        /// The model serving the step.
        model: String,
    },
    /// A piece of answer text.
    TextDelta {
        /// The text block this belongs to.
        id: String,
        /// The text.
        text: String,
    },
    /// A piece of reasoning.
    ReasoningDelta {
        /// The reasoning block this belongs to.
        id: String,
        /// The text.
        text: String,
    },
    /// The model called a tool.
    ToolCall(ToolCall),
    /// A tool returned (after `processToolResult`).
    ToolResult(ToolResult),
    /// A model step ended.
    StepFinish {
        /// The step number.
        step: u32,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// The step's usage.
        usage: Usage,
        /// Set when `processOutputStep` rejected the step and it is retried: the step's text is
        /// withdrawn and the next step replaces it.
        rejected: Option<Tripwire>,
    },
    /// A custom chunk.
    Data(DataChunk),
    /// A processor aborted the run; the last chunk.
    Tripwire(Tripwire),
    /// The run failed; the last chunk.
    Error(RunFailure),
    /// The run completed; the last chunk.
    Finish {
        /// Why the run ended.
        finish_reason: FinishReason,
        /// Total usage of the run.
        usage: Usage,
        /// The final text.
        text: String,
        /// The final answer as an object, when the run has an output schema.
        object: Option<Value>,
    },
}

impl Chunk {
    /// The protocol name of the chunk (`text-delta`, `data-foo`, ...).
    pub fn type_name(&self) -> &str {
        match self {
            Chunk::Start { .. } => "start",
            Chunk::StepStart { .. } => "step-start",
            Chunk::TextDelta { .. } => "text-delta",
            Chunk::ReasoningDelta { .. } => "reasoning-delta",
            Chunk::ToolCall(_) => "tool-call",
            Chunk::ToolResult(_) => "tool-result",
            Chunk::StepFinish { .. } => "step-finish",
            Chunk::Data(data) => &data.name,
            Chunk::Tripwire(_) => "tripwire",
            Chunk::Error(_) => "error",
            Chunk::Finish { .. } => "finish",
        }
    }

    /// About what the chunk takes while it waits for a client: its texts and JSON values, and
    /// [`CHUNK_OVERHEAD`] bytes for the rest.
    pub fn buffered_bytes(&self) -> usize {
        let texts = match self {
            Chunk::Start { agent_id, thread_id, resource_id } => {
                agent_id.len() + thread_id.len() + resource_id.len()
            }
            Chunk::StepStart { message_id, model, .. } => message_id.len() + model.len(),
            Chunk::TextDelta { id, text } | Chunk::ReasoningDelta { id, text } => id.len() + text.len(),
            Chunk::ToolCall(call) => call.tool_call_id.len() + call.tool_name.len() + json_bytes(&call.args),
            Chunk::ToolResult(result) => {
                result.tool_call_id.len() + result.tool_name.len() + json_bytes(&result.result)
            }
            Chunk::StepFinish { rejected, .. } => rejected.as_ref().map_or(0, tripwire_bytes),
            Chunk::Data(data) => data.name.len() + json_bytes(&data.data),
            Chunk::Tripwire(tripwire) => tripwire_bytes(tripwire),
            Chunk::Error(failure) => failure.message.len() + failure.origin.len(),
            Chunk::Finish { text, object, .. } => text.len() + object.as_ref().map_or(0, json_bytes),
        };
        CHUNK_OVERHEAD + texts
    }

    /// True for custom `data-*` chunks, which reach only processors that opt in.
    pub fn is_data(&self) -> bool {
        matches!(self, Chunk::Data(_))
    }

    /// True for what the answer is made of — text, reasoning, tool calls and results, custom
    /// data — as opposed to the run's and steps' lifecycle markers.
    pub fn is_content(&self) -> bool {
        matches!(
            self,
            Chunk::TextDelta { .. }
                | Chunk::ReasoningDelta { .. }
                | Chunk::ToolCall(_)
                | Chunk::ToolResult(_)
                | Chunk::Data(_)
        )
    }
}

/// What a chunk takes besides its texts and JSON values, about.
pub const CHUNK_OVERHEAD: usize = 64;

fn tripwire_bytes(tripwire: &Tripwire) -> usize {
    tripwire.reason.len() + tripwire.processor_id.len() + json_bytes(&tripwire.metadata)
}

/// About what a JSON value takes: its strings, and 8 bytes for every other node.
fn json_bytes(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        Value::Array(items) => 8 + items.iter().map(json_bytes).sum::<usize>(),
        Value::Object(fields) => {
            8 + fields.iter().map(|(key, value)| key.len() + json_bytes(value)).sum::<usize>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 8,
    }
}
