//! An agent's `script`: the replies of the `mock/script` model, one per model call.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::FinishReason;

/// The replies of `mock/script`, one per model call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct MockScript {
    /// Reply *n* answers call *n*; the last one repeats.
    pub replies: Vec<MockReply>,
}

/// One scripted model reply.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockReply {
    /// Answer text, streamed word by word.
    #[serde(default)]
    pub text: Option<String>,
    /// Answer text as explicit deltas (after `text`, if both are set).
    #[serde(default)]
    pub deltas: Vec<String>,
    /// Replays the run's last user text verbatim (after `text` and `deltas`), in deltas of these
    /// many characters, cycled (`[1]`: one character per delta); how evaluations stream a corpus.
    #[serde(default)]
    pub repeat_input: Vec<usize>,
    /// Reasoning, streamed before the text as one delta.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Tool calls, after the text.
    #[serde(default)]
    pub tool_calls: Vec<MockToolCall>,
    /// Reject the call like a provider would (e.g. status 400, "context length exceeded").
    #[serde(default)]
    pub error: Option<MockError>,
    /// Wait this long before the first event, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Wait this long between events, in milliseconds.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// The finish reason; `tool-calls` when there are tool calls, else `stop`.
    #[serde(default)]
    pub finish_reason: Option<FinishReason>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "RawMockToolCall")]
pub struct MockToolCall {
    /// The tool to call.
    pub name: String,
    /// Its arguments.
    pub args: Value,
}

/// A scripted tool call as written: `args` as a TOML table, or `args_json` as JSON text (TOML
/// has no `null`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMockToolCall {
    name: String,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    args_json: Option<String>,
}

impl TryFrom<RawMockToolCall> for MockToolCall {
    type Error = String;

    fn try_from(raw: RawMockToolCall) -> Result<MockToolCall, String> {
        let args = match (raw.args, raw.args_json) {
            (Some(_), Some(_)) => return Err("give `args` or `args_json`, not both".to_owned()),
            (Some(args), None) => args,
            (None, Some(text)) => {
                serde_json::from_str(&text).map_err(|error| format!("`args_json` is not JSON: {error}"))?
            }
            (None, None) => json!({}),
        };
        Ok(MockToolCall { name: raw.name, args })
    }
}

/// A scripted provider rejection.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockError {
    /// The HTTP-like status, e.g. 400.
    pub status: u16,
    /// The provider's message.
    pub message: String,
}
