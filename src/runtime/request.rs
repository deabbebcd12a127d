//! What a client asks for ([`RunRequest`]) and why a request can be refused before its run
//! starts ([`RunError`]).

use std::collections::BTreeMap;

use crate::domain::{Message, ResourceAllowance, ResourceQuota, TraceContext};
use crate::storage::StoreError;

/// One run of one agent.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The agent to run.
    pub agent_id: String,
    /// The input messages (system messages join the run's system prompt).
    pub messages: Vec<Message>,
    /// The conversation, if any.
    pub thread_id: String,
    /// The owner of the conversation, if any.
    pub resource_id: String,
    /// Free context for processors.
    pub request_context: BTreeMap<String, String>,
    /// Replaces the agent's input processors (by name).
    pub input_processors: Option<Vec<String>>,
    /// Replaces the agent's output processors (by name).
    pub output_processors: Option<Vec<String>>,
    /// Replaces the agent's error processors (by name).
    pub error_processors: Option<Vec<String>>,
    /// Replaces the agent's `max_processor_retries`.
    pub max_processor_retries: Option<u32>,
    /// Replaces the agent's `max_steps`.
    pub max_steps: Option<u32>,
    /// A JSON schema the final answer must follow (replaces the agent's).
    pub output_schema: Option<serde_json::Value>,
    /// The caller's W3C trace context: the run's span continues it.
    pub trace_context: TraceContext,
    /// What the run's resource may keep (its caller's API key decides); none by default.
    pub quota: ResourceQuota,
    /// How many resources its caller's API key may create: a run that would create one more is
    /// refused before anything runs.
    pub allowance: Option<ResourceAllowance>,
    /// The API key the run is made with, by name, for its record (empty on an open server).
    pub key_name: String,
}

/// Why a run request was refused. Nothing ran.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    /// No agent has this id. The caller is at fault.
    #[error("agent `{0}` not found")]
    AgentNotFound(String),
    /// A field of the request is missing or wrong. The caller is at fault.
    #[error("{field}: {reason}")]
    InvalidArgument {
        /// The request field, e.g. `messages[1].role`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A part of the request is larger than a configured limit. The caller is at fault.
    #[error("{field}: {size} bytes exceeds the limit {limit_name} = {limit}")]
    TooLarge {
        /// The request field, e.g. `messages[0].parts[1].file.data`.
        field: String,
        /// Its size in bytes.
        size: usize,
        /// The setting that limits it.
        limit_name: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// Memory refused or failed (e.g. the thread belongs to another resource).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server is shutting down and takes no new runs.
    #[error("the server is shutting down and takes no new runs")]
    ShuttingDown,
}

impl RunError {
    /// An [`RunError::InvalidArgument`].
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> RunError {
        RunError::InvalidArgument { field: field.into(), reason: reason.into() }
    }
}
