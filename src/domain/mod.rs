//! The domain: plain data that every floor above shares, with no behaviour beyond itself.
//!
//! Messages and their parts ([`Message`], [`Part`]), the live [`MessageList`] of a run, the
//! [`Chunk`]s a run streams, the prompt of a model call ([`PromptMessage`], [`ToolDefinition`]),
//! the record of a step ([`StepInput`], [`StepResult`]), the nine [`Hook`]s, the [`RunInfo`] a
//! hook is called for, and [`JsonSchema`]. Nothing here knows tokio, tonic, the store or a model.

mod calendar;
mod chunk;
mod field_limits;
mod hook;
mod id_patterns;
mod json_schema;
mod message;
mod message_list;
mod prompt;
mod quota;
mod run_info;
mod run_record;
mod run_stats;
mod run_tally;
mod stable_hash;
mod step;
mod warning;
mod window;

pub use self::calendar::UtcTime;
pub use self::chunk::{
    CHUNK_OVERHEAD, Chunk, DATA_PREFIX, DataChunk, ErrorSource, FinishReason, RunFailure, Tripwire, Usage,
};
pub use self::field_limits::{FieldLimits, TooLarge};
pub use self::hook::{Hook, HookSet};
pub use self::id_patterns::IdPatterns;
pub use self::json_schema::{JsonSchema, SchemaError};
pub use self::message::{
    MAX_ID_BYTES, Message, Part, Role, ToolCall, ToolResult, new_id, now_millis, text_of,
};
pub use self::message_list::{MessageList, MessageSource, ReconcileScope};
pub use self::prompt::{
    CONTINUE_TURN, EARLIER_CONVERSATION_TURN, ModelSettings, PromptMessage, ToolChoice, ToolDefinition,
};
pub use self::quota::{ResourceAllowance, ResourceQuota};
pub use self::run_info::{RunInfo, TraceContext, thread_owner};
pub use self::run_record::{
    HookCallRecord, HookDecision, ModelCallRecord, PromptRecord, RunContent, RunEvent, RunOutcome, RunRecord,
    RunStart, TimelineEntry, ToolCallRecord, WarningRecord,
};
pub use self::run_stats::{
    BucketLatency, HookLatency, RunStats, StatsBucket, TripwireCount, WarningCount, buckets,
};
pub use self::run_tally::{RunTally, TalliedDecision, TalliedHook, TalliedWarning};
pub use self::stable_hash::{Fnv1a, fnv1a};
pub use self::step::{StepInput, StepResult};
pub use self::warning::Warning;
pub use self::window::StreamWindow;
