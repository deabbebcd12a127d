//! The run a hook or a tool call is made for, and the caller's trace context it carries.

use std::collections::{BTreeMap, HashMap};

/// Trace context as W3C headers (`traceparent`, `tracestate`), by lower-case name.
pub type TraceContext = HashMap<String, String>;

/// The run a hook is called for.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    /// The run's id.
    pub run_id: String,
    /// The agent that runs.
    pub agent_id: String,
    /// The run's thread, empty when it has none.
    pub thread_id: String,
    /// The run's resource, empty when it has none.
    pub resource_id: String,
    /// The request's free key/value context.
    pub request_context: BTreeMap<String, String>,
    /// The caller's W3C trace context, as it came.
    pub trace_context: TraceContext,
}

/// The resource a thread belongs to: `resource_id`, or the thread's own id when none is given —
/// for runs, the memory API and the response cache alike.
pub fn thread_owner<'a>(thread_id: &'a str, resource_id: &'a str) -> &'a str {
    if resource_id.is_empty() { thread_id } else { resource_id }
}
