//! The tool frames of the processor stream in domain types, named as the proto names them: the
//! tools an instance executes ([`ToolSpec`]), a call ([`ToolInvocation`]) and its answer
//! ([`ToolOutput`]). `server/remote_convert.rs` maps them to and from protobuf.

use serde_json::Value;

use crate::domain::{JsonSchema, TraceContext};

/// A tool an instance executes.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// Its arguments' schema, checked before every call.
    pub parameters: JsonSchema,
}

/// One tool call.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    /// Set by the session that sends it.
    pub call_id: u64,
    /// The run.
    pub run_id: String,
    /// The agent.
    pub agent_id: String,
    /// The model's id for the call.
    pub tool_call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The (checked) arguments.
    pub args: Value,
    /// Milliseconds since the Unix epoch by which the answer is due.
    pub deadline_unix_ms: i64,
    /// The W3C trace context of the tool call's span.
    pub trace_context: TraceContext,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The result, or the error the model sees.
    pub result: Result<Value, String>,
}
