//! Messages and their parts: the conversation as the runtime, the processors and memory see it.
//!
//! The shape mirrors Mastra's stored message (`MastraDBMessage`): an id, the thread and resource
//! it belongs to, a role, a list of typed parts and a creation time.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions for the model. Never stored in memory.
    System,
    /// The person or service calling the agent.
    User,
    /// The model.
    Assistant,
    /// Tool results handed back to the model.
    Tool,
}

impl Role {
    /// The wire name of the role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parses a wire name; `None` for anything else.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// One typed part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// A tool call made by the model.
    ToolCall(ToolCall),
    /// The result of a tool call.
    ToolResult(ToolResult),
    /// A file, inline or by URL.
    File {
        /// The media type, e.g. `image/png`.
        media_type: String,
        /// Inline content; empty when `url` is set.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        data: Vec<u8>,
        /// Where the file lives; empty when inline.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        url: String,
        /// The original file name, if any.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        filename: String,
    },
    /// A custom `data-*` part (a non-transient data chunk that was kept).
    Data {
        /// The full type name, starting with `data-`.
        name: String,
        /// The payload.
        data: Value,
        /// An optional id chosen by the emitter.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
}

/// A tool call made by the model: in a message part, a chunk and a step's result alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Correlates the call with its result.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments, as the model wrote them.
    pub args: Value,
}

/// The result of a tool call: in a message part, a chunk and a step's result alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// What the tool returned (or the error, when `is_error`).
    pub result: Value,
    /// True when the tool failed.
    pub is_error: bool,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into() }
    }
}

/// The longest id a client may give (a message, thread, resource, agent or processor id), in
/// bytes: ids are storage keys, and a longer one is refused with INVALID_ARGUMENT.
pub const MAX_ID_BYTES: usize = 512;

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Unique id; the key for reconciling what processors return.
    pub id: String,
    /// The conversation, when the run has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub thread_id: String,
    /// The owner of the conversation, when the run has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    pub parts: Vec<Part>,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// Free metadata.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl Message {
    /// The size of what the message says, in bytes: its texts, file data and URLs, and its tool
    /// arguments, results and data as JSON (ids, names and metadata not counted).
    pub fn payload_bytes(&self) -> usize {
        let json = |value: &Value| serde_json::to_vec(value).map_or(0, |bytes| bytes.len());
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text { text } | Part::Reasoning { text } => text.len(),
                Part::ToolCall(call) => json(&call.args),
                Part::ToolResult(result) => json(&result.result),
                Part::File { data, url, .. } => data.len() + url.len(),
                Part::Data { data, .. } => json(data),
            })
            .sum()
    }

    /// A new message with a fresh id, created now.
    pub fn new(role: Role, parts: Vec<Part>) -> Message {
        Message {
            id: new_id(),
            thread_id: String::new(),
            resource_id: String::new(),
            role,
            parts,
            created_at: now_millis(),
            metadata: Map::new(),
        }
    }

    /// The concatenated text parts, the canonical way to read a message's text.
    pub fn text(&self) -> String {
        text_of(&self.parts)
    }
}

/// The concatenated text of these parts.
pub fn text_of(parts: &[Part]) -> String {
    let mut text = String::new();
    for part in parts {
        if let Part::Text { text: piece } = part {
            text.push_str(piece);
        }
    }
    text
}

/// A fresh, time-ordered unique id (UUID v7).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> i64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
