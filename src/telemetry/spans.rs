//! Every span agentwire makes, with its fields: one place to read what a trace holds.
//!
//! | span | level | name exported | fields |
//! | --- | --- | --- | --- |
//! | `run` | info | `run <agent>` | `agent_id`, `run_id`, `thread_id`, `resource_id`, `outcome`, `trace_id` |
//! | `step` | info | `step <n>` | `step` |
//! | `model` | info | `chat <model>` | `gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` |
//! | `tool` | info | `tool <name>` | `tool_name`, `tool_call_id` |
//! | `hook` | debug (per-chunk `processOutputStream`: trace) | `<hook> <processor>` | `processor`, `hook`, `outcome` |
//!
//! `[telemetry] spans` picks the level exported; log lines show the spans they happen in, at
//! the level `RUST_LOG` lets through. A failed span has status ERROR with the message.

use tracing::Span;
use tracing::field::Empty;

use super::propagation;
use crate::domain::{Hook, RunInfo};

/// The target of every span: `[telemetry] spans` filters on it.
pub const TARGET: &str = "agentwire";

/// A run, continuing the caller's trace (`info.trace_context`).
pub fn run(info: &RunInfo) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "run",
        otel.name = format!("run {}", info.agent_id),
        otel.kind = "server",
        agent_id = %info.agent_id,
        run_id = %info.run_id,
        thread_id = %info.thread_id,
        resource_id = %info.resource_id,
        outcome = Empty,
        trace_id = Empty,
        otel.status_description = Empty,
    );
    propagation::continue_trace(&span, &info.trace_context);
    if let Some(trace_id) = propagation::trace_id(&span) {
        span.record("trace_id", trace_id);
    }
    span
}

/// One model step of a run.
pub fn step(step: u32) -> Span {
    tracing::info_span!(target: TARGET, "step", otel.name = format!("step {step}"), step)
}

/// One call of a model, from the request to the stream's end.
pub fn model_call(model: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "model",
        otel.name = format!("chat {model}"),
        otel.kind = "client",
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        otel.status_description = Empty,
    )
}

/// One tool call.
pub fn tool(tool_name: &str, tool_call_id: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "tool",
        otel.name = format!("tool {tool_name}"),
        tool_name,
        tool_call_id,
        otel.status_description = Empty,
    )
}

/// One hook call of a processor; per-chunk `processOutputStream` calls at trace level.
pub fn hook(processor: &str, hook: Hook) -> Span {
    macro_rules! hook_span {
        ($level:expr) => {
            tracing::span!(
                target: TARGET,
                $level,
                "hook",
                otel.name = format!("{} {processor}", hook.name()),
                processor,
                hook = hook.name(),
                outcome = Empty,
                otel.status_description = Empty,
            )
        };
    }
    if hook == Hook::ProcessOutputStream {
        hook_span!(tracing::Level::TRACE)
    } else {
        hook_span!(tracing::Level::DEBUG)
    }
}

/// Marks `span` as ended by `outcome` (a run's or a hook's: `tripwire`, `error`, …).
pub fn ended(span: &Span, outcome: &str) {
    span.record("outcome", outcome);
}

/// Marks `span` as failed with `message` (its status becomes ERROR).
pub fn failed(span: &Span, message: &str) {
    span.record("otel.status_description", message);
}
