//! One run: the loop that takes a request through every hook of every processor, the model and
//! the tools, and streams the chunks to the sink.
//!
//! Every inner step returns `Result<_, RunStop>`: a tripwire, a failure or a departed client
//! ends the run at once, from wherever it happens, and [`PreparedRun::execute`] turns the stop
//! into the terminal chunk and the result.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::{Map, Value};
use tracing::{Instrument as _, Span};

use super::Runtime;
use super::agent::Agent;
use super::pipeline::Stage;
use super::request::RunRequest;
use super::result::RunResult;
use super::sink::ChunkSink;
use crate::domain::{
    Chunk, DataChunk, ErrorSource, FinishReason, Fnv1a, Hook, HookDecision, HookSet, JsonSchema, Message,
    MessageList, MessageSource, Part, Role, RunEvent, RunFailure, RunInfo, RunOutcome, StepResult, Tripwire,
    Usage, new_id,
};
use crate::model::ModelStream;
use crate::processor::{Abort, CallNote, HookContext, HookError, Processor, SkippedProcessor};
use crate::telemetry::spans;
use crate::tool::Tool;

mod content;
mod decided;
mod hooks;
mod model_step;
mod output_stream;
mod record;
mod tools;
mod windows;

use self::decided::Decided;
use self::model_step::StepAnswer;
use self::output_stream::{ChunkBuffers, Closing};
use self::record::{Ended, Recorder};
use self::windows::Windows;

/// How a run that was not stopped ended.
struct Completed {
    finish_reason: FinishReason,
    text: String,
    object: Option<Value>,
}

/// The origin of the failure of a run that went on past `max_run_ms`.
const TIMED_OUT_ORIGIN: &str = "limits";

/// The tag of the system message that carries a rejected step's reason to the retry.
pub const RETRY_FEEDBACK_TAG: &str = "processor-retry-feedback";

/// Error processors may ask for this many consecutive retries when neither the agent nor the
/// request sets `max_processor_retries` (the seed's default; Mastra's code has 3 since #24503).
const DEFAULT_API_ERROR_RETRIES: u32 = 10;

/// Custom chunks emitted while processing custom chunks are bounded, so that a processor that
/// answers every data chunk with another cannot loop forever.
const MAX_DATA_CHUNKS_PER_EMIT: usize = 1000;

/// Why a run stopped before its end.
#[derive(Debug)]
enum RunStop {
    /// A processor aborted.
    Tripwire(Tripwire),
    /// Something broke.
    Failed(RunFailure),
    /// The client went away.
    Cancelled,
}

/// What a model step asks the loop to do next.
enum StepOutcome {
    /// Run the next step (the model called tools), unless `max_steps` is reached.
    Continue,
    /// Retry with this feedback for the model (a `processOutputStep` abort with `retry`).
    Retry(String),
    /// Run the same step again (an error processor asked to retry the rejected model call).
    Again,
    /// The run is complete.
    Complete(FinishReason),
}

/// Where a step's answer comes from.
enum StepSource {
    /// The model's stream, and the span of its call.
    Model(ModelStream, Span),
    Replay(Vec<Chunk>),
}

/// A checked request, ready to run.
pub struct PreparedRun {
    run: Run,
    /// Counts the run among the runs in flight until it is dropped.
    admitted: Option<tokio_util::task::task_tracker::TaskTrackerToken>,
}

impl std::fmt::Debug for PreparedRun {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("PreparedRun").field("run_id", &self.run.info.run_id).finish()
    }
}

/// A map by processor id. Its keys come from the config, so a fast hash will do: it is looked up
/// for every streamed chunk and processor.
type ByProcessor<V> = HashMap<String, V, std::hash::BuildHasherDefault<Fnv1a>>;

/// The per-run state of the processors: `state` by processor id, the retry count, and what the
/// hook being called emitted or skipped.
#[derive(Default)]
struct ProcessorStates {
    states: ByProcessor<Map<String, Value>>,
    retry_count: u32,
    /// Custom chunks emitted by the hook being called, streamed after it returns.
    emitted: Vec<DataChunk>,
    /// Processors that did not take part in a call, for the result.
    skipped: Vec<SkippedProcessor>,
}

impl ProcessorStates {
    fn context<'a>(
        &'a mut self,
        run: &'a RunInfo,
        note: &'a CallNote,
        processor_id: &str,
    ) -> HookContext<'a> {
        if !self.states.contains_key(processor_id) {
            self.states.insert(processor_id.to_owned(), Map::new());
        }
        let state = self.states.get_mut(processor_id).expect("inserted above");
        HookContext::new(run, state, self.retry_count, &mut self.emitted, &mut self.skipped).noting(note)
    }

    /// The processor's state in this run, once one of its hooks was called.
    fn state_of(&self, processor_id: &str) -> Option<&Map<String, Value>> {
        self.states.get(processor_id)
    }
}

/// The processors of each hook, in order: input hooks from the input list, output hooks from the
/// output list, `processAPIError` from the error list. Only processors implementing a hook are in
/// its chain, so a hook nobody implements costs nothing.
struct Chains {
    by_hook: [Vec<Arc<dyn Processor>>; Hook::ALL.len()],
}

impl Chains {
    /// The chains of `run`: each processor at the hooks it takes part in for it.
    fn new(
        run: &RunInfo,
        input: &[Arc<dyn Processor>],
        output: &[Arc<dyn Processor>],
        error: &[Arc<dyn Processor>],
    ) -> Chains {
        let hooks = |list: &[Arc<dyn Processor>]| -> Vec<HookSet> {
            list.iter().map(|processor| processor.hooks_for(run)).collect()
        };
        let (input_hooks, output_hooks, error_hooks) = (hooks(input), hooks(output), hooks(error));
        let by_hook = Hook::ALL.map(|hook| {
            let (list, hooks) = match Stage::of(hook) {
                Stage::Input => (input, &input_hooks),
                Stage::Output => (output, &output_hooks),
                Stage::Error => (error, &error_hooks),
            };
            list.iter()
                .zip(hooks)
                .filter(|(_, hooks)| hooks.contains(hook))
                .map(|(processor, _)| Arc::clone(processor))
                .collect()
        });
        Chains { by_hook }
    }

    fn of(&self, hook: Hook) -> &[Arc<dyn Processor>] {
        &self.by_hook[hook.index()]
    }
}

struct Run {
    runtime: Arc<Runtime>,
    agent: Arc<Agent>,
    info: RunInfo,
    /// Shared so the loop can walk a chain while it mutates the run.
    chains: Arc<Chains>,
    /// Tools of this run only (memory's `update_working_memory`), found before the registry's.
    run_tools: Vec<Arc<dyn Tool>>,
    /// The chunks each stream processor has seen, by processor id. Beside `processors` (not in
    /// it) so a processor's list can be lent to its hook together with its context.
    stream_parts: ByProcessor<Vec<Chunk>>,
    /// The stream processors' open windows.
    windows: Windows,
    /// Emptied chunk lists for the stream chain to reuse.
    buffers: ChunkBuffers,
    /// The schema the final answer must follow.
    output_schema: Option<JsonSchema>,
    max_processor_retries: Option<u32>,
    max_steps: u32,
    list: MessageList,
    processors: ProcessorStates,
    sink: ChunkSink,
    steps: Vec<StepResult>,
    /// The assistant message each step wrote, by step (`steps[i]` wrote `step_messages[i]`).
    step_messages: Vec<String>,
    usage: Usage,
    model_calls: u32,
    /// Custom chunks that reached the client.
    data: Vec<DataChunk>,
    /// Non-transient custom chunks of output hooks, kept as parts of the next assistant message.
    pending_data_parts: Vec<Part>,
    /// The run's span (see [`spans::run`]), from `execute` on.
    span: Span,
    /// What the run records of itself, for the record it leaves.
    recorder: Recorder,
    /// The API key it runs with, by name (empty on an open server).
    key_name: String,
}

impl PreparedRun {
    pub(super) fn new(
        runtime: Arc<Runtime>,
        agent: Arc<Agent>,
        request: RunRequest,
        [input, output, error]: [Vec<Arc<dyn Processor>>; 3],
        run_tools: Vec<Arc<dyn Tool>>,
        output_schema: Option<JsonSchema>,
    ) -> PreparedRun {
        let info = RunInfo {
            run_id: new_id(),
            agent_id: agent.id.clone(),
            thread_id: request.thread_id,
            resource_id: request.resource_id,
            request_context: request.request_context,
            trace_context: request.trace_context,
        };
        let mut list = MessageList::new();
        if !agent.instructions.is_empty() {
            list.add_system(agent.instructions.clone());
        }
        for mut message in request.messages {
            message.thread_id.clone_from(&info.thread_id);
            message.resource_id.clone_from(&info.resource_id);
            list.add(message, MessageSource::Input);
        }
        let recorder = Recorder::new(agent.record_content);
        let chains = Arc::new(Chains::new(&info, &input, &output, &error));
        let run = Run {
            max_processor_retries: request.max_processor_retries.or(agent.max_processor_retries),
            max_steps: request.max_steps.unwrap_or(agent.max_steps),
            runtime,
            agent,
            info,
            chains,
            run_tools,
            stream_parts: ByProcessor::default(),
            windows: Windows::default(),
            buffers: ChunkBuffers::default(),
            output_schema,

            list,
            processors: ProcessorStates::default(),
            sink: ChunkSink::discard(),
            steps: Vec::new(),
            step_messages: Vec::new(),
            usage: Usage::default(),
            model_calls: 0,
            data: Vec::new(),
            pending_data_parts: Vec::new(),
            span: Span::none(),
            recorder,
            key_name: request.key_name,
        };
        PreparedRun { run, admitted: None }
    }

    /// The run, counted among the runs in flight.
    pub(super) fn admitted(mut self, token: tokio_util::task::task_tracker::TaskTrackerToken) -> PreparedRun {
        self.admitted = Some(token);
        self
    }

    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run.info.run_id
    }

    /// Drives the run to its end, streaming chunks into `sink`. When the sink's client goes
    /// away the run stops at once: no more model calls, tools or hooks.
    /// A run still going after `[limits] max_run_ms` ends with an error; nothing is saved.
    pub async fn execute(mut self, sink: ChunkSink) -> RunResult {
        let span = spans::run(&self.run.info);
        self.run.span = span.clone();
        self.execute_in(sink).instrument(span).await
    }

    async fn execute_in(self, sink: ChunkSink) -> RunResult {
        let PreparedRun { mut run, admitted } = self;
        run.sink = sink.clone();
        run.runtime
            .feed
            .publish(|| RunEvent::Started(Box::new(run.recorder.start(&run.info, &run.key_name))));
        let max_run = run.runtime.max_run;
        let stop = run.runtime.lifecycle.stop().clone();
        let out_of_time = async move {
            match max_run {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = run.drive() => outcome,
            () = sink.closed() => Err(RunStop::Cancelled),
            () = out_of_time => Err(RunStop::Failed(RunFailure {
                message: format!(
                    "the run went on longer than max_run_ms ({} ms)",
                    max_run.map_or(0, |limit| limit.as_millis())
                ),
                source: ErrorSource::Runtime,
                origin: TIMED_OUT_ORIGIN.to_owned(),
            })),
            () = stop.cancelled() => Err(RunStop::Failed(RunFailure {
                message: "the server shut down before the run finished (its shutdown grace period ran out)".to_owned(),
                source: ErrorSource::Runtime,
                origin: "shutdown".to_owned(),
            })),
        };
        let result = run.conclude(outcome).await;
        drop(admitted);
        result
    }
}

impl Run {
    async fn drive(&mut self) -> Result<Completed, RunStop> {
        // processInput runs once before anything is streamed: a run an input processor stops
        // streams only its tripwire, and output processors never see it.
        self.process_input().await?;
        let start = Chunk::Start {
            agent_id: self.info.agent_id.clone(),
            thread_id: self.info.thread_id.clone(),
            resource_id: self.info.resource_id.clone(),
        };
        self.emit(start).await?;
        self.flush_emitted(Closing::All).await?;

        let initial_system_messages = self.list.system_messages().to_vec();
        let mut feedback: Option<String> = None;
        let mut step_number = 0;
        let mut finish_reason = FinishReason::Stop;
        while step_number < self.max_steps {
            self.list.replace_system_messages(initial_system_messages.clone());
            self.list.clear_tagged_system(RETRY_FEEDBACK_TAG);
            if let Some(feedback) = feedback.take() {
                self.list.add_tagged_system(RETRY_FEEDBACK_TAG, feedback);
            }
            self.recorder.at_step(Some(step_number), self.processors.retry_count);
            let step = async {
                let step_input = self.process_input_step(step_number).await?;
                self.model_step(step_number, &step_input).await
            };
            match step.instrument(spans::step(step_number)).await? {
                StepOutcome::Continue => finish_reason = FinishReason::ToolCalls,
                StepOutcome::Retry(reason) => {
                    feedback = Some(format!(
                        "[Processor Feedback] Your previous response was not accepted: {reason}. \
                         Please try again with the feedback in mind."
                    ));
                    finish_reason = FinishReason::Other;
                }
                StepOutcome::Complete(reason) => {
                    finish_reason = reason;
                    break;
                }
                StepOutcome::Again => continue,
            }
            step_number += 1;
        }
        self.recorder.at_step(None, self.processors.retry_count);
        self.process_output_result(finish_reason).await?;
        let text = self.final_text();
        let object = match &self.output_schema {
            Some(schema) => Some(schema.object_of(&text).map_err(|message| {
                RunStop::Failed(RunFailure {
                    message: message.to_string(),
                    source: ErrorSource::Model,
                    origin: self.agent.model.clone(),
                })
            })?),
            None => None,
        };
        let finish =
            Chunk::Finish { finish_reason, usage: self.usage, text: text.clone(), object: object.clone() };
        self.emit(finish).await?;
        Ok(Completed { finish_reason, text, object })
    }

    /// Sends the terminal chunk of a stopped run and assembles the result.
    async fn conclude(mut self, outcome: Result<Completed, RunStop>) -> RunResult {
        // The run is over: its slot goes back now, not once a client that may not read takes
        // its last chunk.
        self.sink.concluded();
        let mut result = RunResult {
            run_id: self.info.run_id.clone(),
            text: String::new(),
            object: None,
            finish_reason: FinishReason::Other,
            usage: self.usage,
            steps: std::mem::take(&mut self.steps),
            tripwire: None,
            error: None,
            messages: Vec::new(),
            data: std::mem::take(&mut self.data),
            skipped: std::mem::take(&mut self.processors.skipped),
            cancelled: false,
        };
        let metrics = crate::telemetry::metrics::global();
        let ended_so = match &outcome {
            Ok(_) => RunOutcome::Finished,
            Err(RunStop::Tripwire(tripwire)) => {
                metrics.count(
                    &crate::telemetry::metrics::TRIPWIRES,
                    &[("processor", &tripwire.processor_id)],
                    1,
                );
                RunOutcome::Tripwire
            }
            Err(RunStop::Failed(failure)) => {
                spans::failed(&self.span, &failure.message);
                let timed_out = failure.source == ErrorSource::Runtime && failure.origin == TIMED_OUT_ORIGIN;
                if timed_out { RunOutcome::TimedOut } else { RunOutcome::Error }
            }
            Err(RunStop::Cancelled) => RunOutcome::Cancelled,
        };
        // Spans, logs and metrics count a run over its time as an error, as they always have.
        let outcome_name = if ended_so == RunOutcome::TimedOut { "error" } else { ended_so.as_str() };
        spans::ended(&self.span, outcome_name);
        tracing::debug!(outcome = outcome_name, steps = result.steps.len(), "run ended");
        metrics.count(
            &crate::telemetry::metrics::RUNS,
            &[("agent", &self.info.agent_id), ("outcome", outcome_name)],
            1,
        );
        match outcome {
            Ok(Completed { finish_reason, text, object }) => {
                result.finish_reason = finish_reason;
                result.text = text;
                result.object = object;
                result.messages = self.list.run_messages().cloned().collect();
            }
            Err(RunStop::Tripwire(tripwire)) => {
                result.tripwire = Some(tripwire.clone());
                // The client may be gone already; the result still says what happened.
                self.send_last(Chunk::Tripwire(tripwire)).await;
            }
            Err(RunStop::Failed(failure)) => {
                result.finish_reason = FinishReason::Error;
                result.error = Some(failure.clone());
                self.send_last(Chunk::Error(failure)).await;
            }
            Err(RunStop::Cancelled) => result.cancelled = true,
        }
        let ended = Ended {
            outcome: ended_so,
            finish_reason: result.finish_reason,
            usage: result.usage,
            tripwire: result.tripwire.clone(),
            error: result.error.clone(),
        };
        let record = self.recorder.finish(&self.info, &self.key_name, ended);
        self.runtime.feed.publish(|| RunEvent::Ended(Box::new(record.clone())));
        self.runtime.records.submit(record);
        result
    }

    /// Sends a stopped run's terminal chunk, if the client takes it: within the slow-client
    /// limit, and during a shutdown that stopped the run, within the shutdown's last grace.
    async fn send_last(&self, chunk: Chunk) {
        let stop = self.runtime.lifecycle.stop();
        let shutdown_over = async {
            stop.cancelled().await;
            tokio::time::sleep(super::lifecycle::CONCLUDE_GRACE).await;
        };
        self.recorder.delivered(&chunk);
        tokio::select! {
            _ = self.sink.send(chunk) => {}
            () = shutdown_over => {}
        }
    }

    // ---- the response's messages ----------------------------------------------------------

    /// Keeps the non-transient custom chunks of the last output hooks on the last assistant
    /// message of the response (a new one if the response has none).
    fn attach_pending_data_parts(&mut self) {
        if self.pending_data_parts.is_empty() {
            return;
        }
        let parts = std::mem::take(&mut self.pending_data_parts);
        let last_assistant = self
            .list
            .from_source(MessageSource::Response)
            .filter(|message| message.role == Role::Assistant)
            .last()
            .map(|message| message.id.clone());
        match last_assistant.and_then(|id| self.list.get_mut(&id)) {
            Some(message) => message.parts.extend(parts),
            None => self.add_response(Message::new(Role::Assistant, parts)),
        }
    }

    /// Marks the last step as rejected by `tripwire`: nothing of it is kept, and its finish reason
    /// says a processor stopped it.
    fn reject_last_step(&mut self, tripwire: Tripwire) {
        let rejected = self.steps.last_mut().expect("the step was recorded");
        rejected.text.clear();
        rejected.tool_calls.clear();
        rejected.finish_reason = FinishReason::Other;
        rejected.tripwire = Some(tripwire);
    }

    /// Each accepted step's text as processors left its assistant message (empty when they
    /// removed it): the steps show what was kept.
    fn refresh_step_texts(&mut self) {
        for (step, message_id) in self.steps.iter_mut().zip(&self.step_messages) {
            if step.tripwire.is_none() {
                step.text = self.list.get(message_id).map(Message::text).unwrap_or_default();
            }
        }
    }

    /// Adds a message the run produced, in the run's thread and resource.
    fn add_response(&mut self, mut message: Message) {
        message.thread_id.clone_from(&self.info.thread_id);
        message.resource_id.clone_from(&self.info.resource_id);
        self.list.add(message, MessageSource::Response);
    }

    /// The run's text: the text of its response's assistant messages, as processors left them.
    fn final_text(&self) -> String {
        self.list
            .from_source(MessageSource::Response)
            .filter(|message| message.role == Role::Assistant)
            .map(Message::text)
            .collect()
    }
}

/// Runs a hook of processor `processor_id`, turning a panic into a failure of that processor,
/// and records how long it took and what it decided (in the metrics and the run's record).
async fn guarded<T: Decided>(
    recorder: &Recorder,
    processor_id: &str,
    hook: Hook,
    hook_call: impl Future<Output = Result<T, HookError>>,
) -> Result<T, HookError> {
    guarded_deciding(recorder, processor_id, hook, hook_call, T::decision).await
}

/// [`guarded`], with what the answer decided read by `decide`.
async fn guarded_deciding<T>(
    recorder: &Recorder,
    processor_id: &str,
    hook: Hook,
    hook_call: impl Future<Output = Result<T, HookError>>,
    decide: impl FnOnce(&T) -> Option<HookDecision>,
) -> Result<T, HookError> {
    guarded_since(recorder, processor_id, hook, std::time::Instant::now(), hook_call, decide).await
}

/// [`guarded_deciding`] for a call that began at `started` (a window sent ahead).
async fn guarded_since<T>(
    recorder: &Recorder,
    processor_id: &str,
    hook: Hook,
    started: std::time::Instant,
    hook_call: impl Future<Output = Result<T, HookError>>,
    decide: impl FnOnce(&T) -> Option<HookDecision>,
) -> Result<T, HookError> {
    let span = spans::hook(processor_id, hook);
    recorder.note.take();
    let outcome = AssertUnwindSafe(hook_call).catch_unwind().instrument(span.clone()).await;
    let elapsed = started.elapsed();
    let outcome = outcome.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|message| (*message).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Err(HookError::Failed(format!("panicked: {message}")))
    });
    let decision = match &outcome {
        Ok(answer) => decide(answer),
        Err(HookError::Abort(abort)) => {
            spans::ended(&span, "tripwire");
            Some(HookDecision::Abort {
                reason: abort.reason.clone(),
                retry: abort.retry,
                metadata: abort.metadata.clone(),
            })
        }
        Err(HookError::Failed(message)) => {
            spans::failed(&span, message);
            Some(HookDecision::Failed { message: message.clone() })
        }
    };
    recorder.hook(processor_id, hook, started, elapsed, decision);
    outcome
}

/// The tripwire of an abort; one default reason for every hook.
fn tripwire_of(processor_id: &str, abort: Abort) -> Tripwire {
    let reason =
        if abort.reason.is_empty() { format!("Tripwire triggered by {processor_id}") } else { abort.reason };
    Tripwire { reason, retry: abort.retry, metadata: abort.metadata, processor_id: processor_id.to_owned() }
}

impl Run {
    /// `Ok` when no message of a processor's replacement is larger than `[limits]
    /// max_message_bytes` — or than the message it replaces, for a model's answer over the limit —
    /// so that a processor cannot store what a client could not send. Otherwise the processor
    /// failed, and the run stops naming the message and the limit.
    fn check_replaced(
        &self,
        processor: &dyn Processor,
        hook: Hook,
        messages: &[Message],
    ) -> Result<(), RunStop> {
        let limit = self.runtime.max_message_bytes();
        for message in messages {
            let size = message.payload_bytes();
            let replaced = self.list.get(&message.id).map_or(0, Message::payload_bytes);
            if size > limit && size > replaced {
                let why = format!(
                    "replaced message `{}` with {size} bytes, over limits.max_message_bytes = {limit}",
                    message.id
                );
                return Err(stop(processor, hook, HookError::Failed(why)));
            }
        }
        Ok(())
    }
}

fn stop(processor: &dyn Processor, hook: Hook, error: HookError) -> RunStop {
    match error {
        HookError::Abort(abort) => RunStop::Tripwire(tripwire_of(processor.id(), abort)),
        HookError::Failed(message) => RunStop::Failed(RunFailure {
            message: format!("processor `{}` failed in {hook}: {message}", processor.id()),
            source: ErrorSource::Processor,
            origin: processor.id().to_owned(),
        }),
    }
}
