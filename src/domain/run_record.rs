//! The record a run leaves: who ran what, how it ended, and its timeline — every hook call,
//! model call and tool call with how long it took and what it decided. Ids and decisions are
//! always kept; message texts only when the agent opts in (`[agents.record] content = true`:
//! [`RunContent`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Chunk, FinishReason, Hook, PromptMessage, RunFailure, Tripwire, Usage, Warning};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunOutcome {
    /// It ran to its `finish` chunk.
    Finished,
    /// A processor aborted it.
    Tripwire,
    /// It failed (a model, a processor, the runtime).
    Error,
    /// The client went away.
    Cancelled,
    /// It went on past `[limits] max_run_ms`.
    TimedOut,
}

impl RunOutcome {
    /// Every outcome, in the order they are shown.
    pub const ALL: [RunOutcome; 5] = [
        RunOutcome::Finished,
        RunOutcome::Tripwire,
        RunOutcome::Error,
        RunOutcome::Cancelled,
        RunOutcome::TimedOut,
    ];

    /// The wire name (`finished`, `tripwire`, `error`, `cancelled`, `timed-out`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Finished => "finished",
            RunOutcome::Tripwire => "tripwire",
            RunOutcome::Error => "error",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::TimedOut => "timed-out",
        }
    }

    /// The outcome of a wire name.
    pub fn parse(name: &str) -> Option<RunOutcome> {
        RunOutcome::ALL.into_iter().find(|outcome| outcome.as_str() == name)
    }
}

/// What one hook call decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HookDecision {
    /// It returned normally and changed nothing.
    Continue,
    /// It returned normally with a replacement: of `what` (`messages`, `chunk`, `prompt`, ...).
    Replaced {
        /// What it replaced, comma-separated.
        what: String,
    },
    /// It dropped the chunk it was given (`processOutputStream`).
    Dropped,
    /// It aborted the run (or, with `retry`, the step).
    Abort {
        /// Its reason.
        reason: String,
        /// Whether it asked for the step to be retried.
        retry: bool,
        /// Its metadata.
        metadata: Value,
    },
    /// It failed (an error or a panic; a remote processor's failure).
    Failed {
        /// What went wrong.
        message: String,
    },
    /// It was sent to a remote observer, not awaited.
    Observed,
    /// It did not take part: a remote processor unavailable, timed out or disconnected under
    /// the `open` failure policy.
    Skipped {
        /// `unavailable`, `timeout` or `disconnected`.
        cause: String,
    },
}

/// One hook call of one processor (or, for `processOutputStream`, the calls of one processor in
/// one step with the same decision — continue, replaced, dropped — counted together; an abort or
/// failure is its own entry).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookCallRecord {
    /// The processor.
    pub processor_id: String,
    /// The hook.
    pub hook: Hook,
    /// The step it ran in; `None` for `processInput` and `processOutputResult`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// The run's processor retry count at the call.
    pub retry_count: u32,
    /// The remote instance that answered, for a remote processor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// Microseconds from the run's start to the (first) call.
    pub at_us: u64,
    /// How long the call (all the calls counted here) took, in microseconds.
    pub duration_us: u64,
    /// Calls counted in this entry (1 but for `processOutputStream`).
    pub calls: u32,
    /// The longest of them, in microseconds.
    pub max_us: u64,
    /// What it decided.
    pub decision: HookDecision,
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallRecord {
    /// `provider/model`.
    pub model: String,
    /// The step.
    pub step: u32,
    /// Microseconds from the run's start to the call.
    pub at_us: u64,
    /// How long it took, to its last event, in microseconds.
    pub duration_us: u64,
    /// Microseconds to its first text or tool-call event, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_token_us: Option<u64>,
    /// The tokens it reported.
    pub usage: Usage,
    /// Whether a processor's `processLLMRequest` answered in its place (a cached response).
    pub from_cache: bool,
    /// The provider's error, when it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The tool.
    pub name: String,
    /// The step that asked for it.
    pub step: u32,
    /// Microseconds from the run's start to the call.
    pub at_us: u64,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// Its error, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A warning of one processor's hook call (for `processOutputStream`, its warnings of one kind
/// in one step counted together).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarningRecord {
    /// The processor.
    pub processor_id: String,
    /// The hook.
    pub hook: Hook,
    /// The step it ran in; `None` for `processInput` and `processOutputResult`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// Microseconds from the run's start to the (first) call that warned.
    pub at_us: u64,
    /// Warnings counted in this entry (the first one's message and details are kept).
    pub count: u32,
    /// What it warned of.
    pub warning: Warning,
}

/// An entry of a run's timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum TimelineEntry {
    /// A hook call.
    Hook(HookCallRecord),
    /// A model call.
    Model(ModelCallRecord),
    /// A tool call.
    Tool(ToolCallRecord),
    /// A warning.
    Warning(WarningRecord),
}

impl TimelineEntry {
    /// Microseconds from the run's start to the entry.
    pub fn at_us(&self) -> u64 {
        match self {
            TimelineEntry::Hook(hook) => hook.at_us,
            TimelineEntry::Model(model) => model.at_us,
            TimelineEntry::Tool(tool) => tool.at_us,
            TimelineEntry::Warning(warning) => warning.at_us,
        }
    }
}

/// What a run left behind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its thread (empty without memory).
    pub thread_id: String,
    /// Its resource (empty without memory).
    pub resource_id: String,
    /// The API key it ran with, by name (empty on an open server).
    pub key_name: String,
    /// When it started, in milliseconds since the epoch.
    pub started_at: i64,
    /// When it ended, in milliseconds since the epoch.
    pub ended_at: i64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// Its finish reason.
    pub finish_reason: FinishReason,
    /// The tokens of its model calls.
    pub usage: Usage,
    /// The tripwire that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tripwire: Option<Tripwire>,
    /// The failure that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunFailure>,
    /// Its hook, model and tool calls, in the order they started.
    pub timeline: Vec<TimelineEntry>,
    /// What the model saw and the client got, for an agent that keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<RunContent>,
}

/// The prompt of one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRecord {
    /// The step.
    pub step: u32,
    /// The messages sent, after every `processLLMRequest`.
    pub messages: Vec<PromptMessage>,
}

/// What a run's model saw and its client got.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunContent {
    /// Each model call's prompt, in order (none for a call a processor answered).
    pub prompts: Vec<PromptRecord>,
    /// The chunks the client got, in order; consecutive text deltas of one text are kept as one.
    pub chunks: Vec<Chunk>,
    /// Whether more was seen than a record keeps (the rest is left out).
    pub truncated: bool,
}

impl RunRecord {
    /// The processors of its hook calls, each once, in the order they first appear.
    pub fn processors(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for entry in &self.timeline {
            if let TimelineEntry::Hook(hook) = entry
                && !seen.contains(&hook.processor_id.as_str())
            {
                seen.push(&hook.processor_id);
            }
        }
        seen
    }
}

/// A run beginning: what is known of it before it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStart {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent_id: String,
    /// Its thread (empty without memory).
    pub thread_id: String,
    /// Its resource (empty without memory).
    pub resource_id: String,
    /// The API key it runs with, by name (empty on an open server).
    pub key_name: String,
    /// When it started, in milliseconds since the epoch.
    pub started_at: i64,
}

/// A run beginning or ending, for those who watch runs live.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// A run began.
    Started(Box<RunStart>),
    /// A run ended, with its whole record.
    Ended(Box<RunRecord>),
}
