//! The outcome of a run, as the unary `Generate` returns it.

use crate::domain::{DataChunk, FinishReason, Message, RunFailure, StepResult, Tripwire, Usage};
use crate::processor::SkippedProcessor;

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// The run's id.
    pub run_id: String,
    /// The final text (empty after a tripwire).
    pub text: String,
    /// The final answer as an object, when the run has an output schema.
    pub object: Option<serde_json::Value>,
    /// Why the run ended: `other` after a tripwire, `error` after a failure.
    pub finish_reason: FinishReason,
    /// Total usage.
    pub usage: Usage,
    /// Every step, rejected ones included.
    pub steps: Vec<StepResult>,
    /// Set when a processor aborted the run.
    pub tripwire: Option<Tripwire>,
    /// Set when the run failed.
    pub error: Option<RunFailure>,
    /// The messages the run added (input and response); empty unless it finished.
    pub messages: Vec<Message>,
    /// The custom chunks that reached the client, in order.
    pub data: Vec<DataChunk>,
    /// Processors that did not take part in some call (open failure policy).
    pub skipped: Vec<SkippedProcessor>,
    /// True when the client went away and the run was stopped.
    pub cancelled: bool,
}
