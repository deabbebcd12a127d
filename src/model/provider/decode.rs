//! What the providers' stream decoders share: the [`Decoder`] contract and the mapping of finish
//! reasons and tool calls.

use serde_json::Value;

use super::sse::SseEvent;
use crate::domain::{FinishReason, ToolCall, new_id};
use crate::model::ModelEvent;

/// What one server-sent event meant.
#[derive(Debug)]
pub(super) enum Decoded {
    /// Events for the run (maybe none).
    Events(Vec<ModelEvent>),
    /// The provider said the answer is complete.
    End,
    /// The provider reported an error inside the stream.
    Failed(String),
    /// The event could not be understood.
    Malformed(String),
}

/// Turns a provider's events into model events.
pub(super) trait Decoder: Send {
    /// One event.
    fn event(&mut self, event: SseEvent) -> Decoded;

    /// The stream ended: what is still pending (whole tool calls), then `Finish`.
    fn end(&mut self) -> Vec<ModelEvent>;
}

/// A provider's finish reason in agentwire's terms.
pub(super) fn finish_reason_of(reason: Option<&str>, has_tool_calls: bool) -> FinishReason {
    match reason {
        Some("stop" | "end_turn" | "stop_sequence") => FinishReason::Stop,
        Some("length" | "max_tokens") => FinishReason::Length,
        Some("tool_calls" | "tool_use" | "function_call") => FinishReason::ToolCalls,
        Some("content_filter" | "refusal") => FinishReason::ContentFilter,
        _ if has_tool_calls => FinishReason::ToolCalls,
        None => FinishReason::Stop,
        Some(_) => FinishReason::Other,
    }
}

/// A tool result as the text a provider's message carries: strings as they are, other JSON
/// serialised.
pub(super) fn tool_result_text(result: &Value) -> String {
    match result {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A whole tool call from its streamed pieces. Arguments that are not JSON are kept as a string
/// (the tool then reports them as invalid, and the model sees why).
pub(super) fn tool_call_of(id: String, name: String, arguments: &str) -> ModelEvent {
    let args = if arguments.trim().is_empty() {
        Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
    };
    let tool_call_id = if id.is_empty() { new_id() } else { id };
    ModelEvent::ToolCall(ToolCall { tool_call_id, tool_name: name, args })
}
