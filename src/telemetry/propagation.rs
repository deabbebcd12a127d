//! W3C trace context (`traceparent`, `tracestate`) across the server.
//!
//! A run's span continues the trace of the call that started it; each remote hook or tool call
//! carries the context of the span it is made in, so a processor's own spans join the same trace.
//! When spans are not exported, the caller's context is passed on as it came: a processor still
//! joins the caller's trace.

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::domain::TraceContext;

/// The headers (gRPC metadata keys) that carry trace context.
pub const FIELDS: [&str; 2] = ["traceparent", "tracestate"];

/// Makes `span` a child of the caller's span, when spans are exported and the caller sent a
/// valid `traceparent`.
pub fn continue_trace(span: &Span, caller: &TraceContext) {
    if caller.is_empty() || span.is_disabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(caller);
    if parent.span().span_context().is_valid() {
        // Fails only when the span is not exported, and then there is nothing to continue.
        let _ = span.set_parent(parent);
    }
}

/// The trace context to send with a call made now: the current span's when spans are exported,
/// else the caller's, as it came.
pub fn outgoing(caller: &TraceContext) -> TraceContext {
    let current = Span::current();
    if current.is_disabled() {
        return caller.clone();
    }
    let context = current.context();
    if !context.span().span_context().is_valid() {
        return caller.clone();
    }
    let mut carrier = TraceContext::with_capacity(FIELDS.len());
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier
}

/// The trace id of `span` in hex, when it is exported.
pub fn trace_id(span: &Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id().to_string())
}
