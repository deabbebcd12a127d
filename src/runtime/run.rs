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

use futures::{FutureExt, StreamExt};
use serde_json::{Map, Value};
use tracing::{Instrument as _, Span};

use super::Runtime;
use super::agent::Agent;
use super::request::RunRequest;
use super::result::RunResult;
use super::sink::ChunkSink;
use crate::domain::JsonSchema;
use crate::domain::PromptMessage;
use crate::domain::{Chunk, DataChunk, ErrorSource, FinishReason, RunFailure, Tripwire, Usage};
use crate::domain::{Hook, RunInfo};
use crate::domain::{Message, Part, Role, ToolCall, ToolResult, new_id};
use crate::domain::{MessageList, MessageSource, ReconcileScope};
use crate::domain::{StepInput, StepResult};
use crate::model::{ModelError, ModelRequest, ModelStream};
use crate::processor::{
    Abort, ApiErrorArgs, HookContext, HookError, InputArgs, InputOutcome, InputStepArgs, LlmRequestArgs,
    LlmResponseArgs, OutputResultArgs, OutputStepArgs, OutputSummary, Processor, SkippedProcessor,
    StepOverrides, ToolResultArgs,
};
use crate::telemetry::spans;
use crate::tool::{Tool, ToolCallInfo, ToolError};

mod output_stream;

use self::output_stream::{Closing, Windows};

/// How a run that was not stopped ended.
struct Completed {
    finish_reason: FinishReason,
    text: String,
    object: Option<Value>,
}

/// The tag of the system message that carries a rejected step's reason to the retry.
pub const RETRY_FEEDBACK_TAG: &str = "processor-retry-feedback";

/// Error processors may ask for this many consecutive retries when the agent sets no
/// `max_processor_retries` (Mastra's cap since PR #24503).
const DEFAULT_API_ERROR_RETRIES: u32 = 3;

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

/// The per-run state of the processors: `state` by processor id, the retry count, and what the
/// hook being called emitted or skipped.
#[derive(Default)]
struct ProcessorStates {
    states: HashMap<String, Map<String, Value>>,
    retry_count: u32,
    /// Custom chunks emitted by the hook being called, streamed after it returns.
    emitted: Vec<DataChunk>,
    /// Processors that did not take part in a call, for the result.
    skipped: Vec<SkippedProcessor>,
}

impl ProcessorStates {
    fn context<'a>(&'a mut self, run: &'a RunInfo, processor_id: &str) -> HookContext<'a> {
        if !self.states.contains_key(processor_id) {
            self.states.insert(processor_id.to_owned(), Map::new());
        }
        let state = self.states.get_mut(processor_id).expect("inserted above");
        HookContext::new(run, state, self.retry_count, &mut self.emitted, &mut self.skipped)
    }
}

/// The processors of each hook, in order: input hooks from the input list, output hooks from the
/// output list, `processAPIError` from the error list. Only processors implementing a hook are in
/// its chain, so a hook nobody implements costs nothing.
struct Chains {
    by_hook: [Vec<Arc<dyn Processor>>; Hook::ALL.len()],
}

impl Chains {
    fn new(
        input: &[Arc<dyn Processor>],
        output: &[Arc<dyn Processor>],
        error: &[Arc<dyn Processor>],
    ) -> Chains {
        let by_hook = Hook::ALL.map(|hook| {
            let list = match hook {
                Hook::ProcessInput
                | Hook::ProcessInputStep
                | Hook::ProcessLlmRequest
                | Hook::ProcessLlmResponse => input,
                Hook::ProcessOutputStream
                | Hook::ProcessOutputStep
                | Hook::ProcessToolResult
                | Hook::ProcessOutputResult => output,
                Hook::ProcessApiError => error,
            };
            list.iter().filter(|processor| processor.hooks().contains(hook)).cloned().collect()
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
    stream_parts: HashMap<String, Vec<Chunk>>,
    /// The stream processors' open windows.
    windows: Windows,
    /// The schema the final answer must follow.
    output_schema: Option<JsonSchema>,
    max_processor_retries: Option<u32>,
    max_steps: u32,
    list: MessageList,
    processors: ProcessorStates,
    sink: ChunkSink,
    steps: Vec<StepResult>,
    usage: Usage,
    model_calls: u32,
    /// Custom chunks that reached the client.
    data: Vec<DataChunk>,
    /// Non-transient custom chunks of output hooks, kept as parts of the next assistant message.
    pending_data_parts: Vec<Part>,
    /// The run's span (see [`spans::run`]), from `execute` on.
    span: Span,
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
        let run = Run {
            max_processor_retries: request.max_processor_retries.or(agent.max_processor_retries),
            max_steps: request.max_steps.unwrap_or(agent.max_steps),
            runtime,
            agent,
            info,
            chains: Arc::new(Chains::new(&input, &output, &error)),
            run_tools,
            stream_parts: HashMap::new(),
            windows: Windows::default(),
            output_schema,

            list,
            processors: ProcessorStates::default(),
            sink: ChunkSink::discard(),
            steps: Vec::new(),
            usage: Usage::default(),
            model_calls: 0,
            data: Vec::new(),
            pending_data_parts: Vec::new(),
            span: Span::none(),
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
                origin: "limits".to_owned(),
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
        let start = Chunk::Start {
            agent_id: self.info.agent_id.clone(),
            thread_id: self.info.thread_id.clone(),
            resource_id: self.info.resource_id.clone(),
        };
        self.emit(start, false).await?;
        self.process_input().await?;

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
            }
            step_number += 1;
        }
        self.process_output_result(finish_reason).await?;
        let text = self.final_text();
        let object = match &self.output_schema {
            Some(schema) => Some(schema.object_of(&text).map_err(|message| {
                RunStop::Failed(RunFailure {
                    message,
                    source: ErrorSource::Model,
                    origin: self.agent.model.clone(),
                })
            })?),
            None => None,
        };
        let finish =
            Chunk::Finish { finish_reason, usage: self.usage, text: text.clone(), object: object.clone() };
        self.emit(finish, true).await?;
        Ok(Completed { finish_reason, text, object })
    }

    /// Sends the terminal chunk of a stopped run and assembles the result.
    async fn conclude(mut self, outcome: Result<Completed, RunStop>) -> RunResult {
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
        let outcome_name = match &outcome {
            Ok(_) => "finished",
            Err(RunStop::Tripwire(tripwire)) => {
                metrics.count("agentwire_tripwires_total", &[("processor", &tripwire.processor_id)], 1);
                "tripwire"
            }
            Err(RunStop::Failed(failure)) => {
                spans::failed(&self.span, &failure.message);
                "error"
            }
            Err(RunStop::Cancelled) => "cancelled",
        };
        spans::ended(&self.span, outcome_name);
        tracing::debug!(outcome = outcome_name, steps = result.steps.len(), "run ended");
        metrics.count(
            "agentwire_runs_total",
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
                let _ = self.sink.send(Chunk::Tripwire(tripwire)).await;
            }
            Err(RunStop::Failed(failure)) => {
                result.finish_reason = FinishReason::Error;
                result.error = Some(failure.clone());
                let _ = self.sink.send(Chunk::Error(failure)).await;
            }
            Err(RunStop::Cancelled) => result.cancelled = true,
        }
        result
    }

    // ---- the hooks, in run order -------------------------------------------------------------

    async fn process_input(&mut self) -> Result<(), RunStop> {
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessInput) {
            let args = InputArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                messages: self.list.snapshot(ReconcileScope::Input),
                system_messages: self.list.system_messages().to_vec(),
                message_list: &mut self.list,
            };
            let outcome = guarded(processor.id(), Hook::ProcessInput, processor.process_input(args))
                .await
                .map_err(|error| stop(processor.as_ref(), Hook::ProcessInput, error))?;
            match outcome {
                InputOutcome::Unchanged => {}
                InputOutcome::Messages(messages) => {
                    self.list.reconcile(ReconcileScope::Input, messages, MessageSource::Input);
                }
                InputOutcome::MessagesAndSystem { messages, system_messages } => {
                    self.list.replace_system_messages(system_messages);
                    self.list.reconcile(ReconcileScope::Input, messages, MessageSource::Input);
                }
            }
            self.flush_emitted(false, Closing::All).await?;
        }
        Ok(())
    }

    async fn process_input_step(&mut self, step_number: u32) -> Result<StepInput, RunStop> {
        let mut step = StepInput {
            model: self.agent.model.clone(),
            tools: self
                .agent
                .tools
                .iter()
                .filter(|tool| tool.available())
                .map(|tool| tool.definition())
                .collect(),
            tool_choice: Default::default(),
            active_tools: None,
            settings: self.agent.settings.clone(),
            provider_options: Value::Null,
            structured_output: self.output_schema.as_ref().map(|schema| schema.schema().clone()),
        };
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessInputStep) {
            let args = InputStepArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.system_messages().to_vec(),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
                step: &step,
            };
            let overrides =
                guarded(processor.id(), Hook::ProcessInputStep, processor.process_input_step(args))
                    .await
                    .map_err(|error| stop(processor.as_ref(), Hook::ProcessInputStep, error))?;
            let StepOverrides { messages, system_messages, .. } = overrides.apply_to(&mut step);
            if let Some(system_messages) = system_messages {
                self.list.replace_system_messages(system_messages);
            }
            if let Some(messages) = messages {
                self.list.reconcile(ReconcileScope::All, messages, MessageSource::Input);
            }
            self.flush_emitted(false, Closing::All).await?;
        }
        Ok(step)
    }

    /// `processLLMRequest` over the input processors: the prompt each returns replaces the
    /// prompt for the next and for the model; the first cached response wins.
    async fn process_llm_request(
        &mut self,
        step_number: u32,
        step: &StepInput,
        mut prompt: Vec<PromptMessage>,
    ) -> Result<(Vec<PromptMessage>, Option<Vec<Chunk>>), RunStop> {
        let mut response = None;
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessLlmRequest) {
            let args = LlmRequestArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                prompt: &prompt,
                model: &step.model,
                step,
                step_number,
                steps: &self.steps,
                message_list: &self.list,
            };
            let outcome =
                guarded(processor.id(), Hook::ProcessLlmRequest, processor.process_llm_request(args))
                    .await
                    .map_err(|error| stop(processor.as_ref(), Hook::ProcessLlmRequest, error))?;
            if let Some(rewritten) = outcome.prompt {
                prompt = rewritten;
            }
            if response.is_none() {
                response = outcome.response;
            }
            self.flush_emitted(false, Closing::All).await?;
        }
        Ok((prompt, response))
    }

    /// `processAPIError` over the error processors. True when one asked for a retry and the
    /// retry budget allows it.
    async fn process_api_error(&mut self, step_number: u32, error: &ModelError) -> Result<bool, RunStop> {
        let mut retry = false;
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessApiError) {
            let args = ApiErrorArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                error,
                messages: self.list.snapshot(ReconcileScope::All),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
            };
            let outcome = guarded(processor.id(), Hook::ProcessApiError, processor.process_api_error(args))
                .await
                .map_err(|error| stop(processor.as_ref(), Hook::ProcessApiError, error))?;
            self.flush_emitted(false, Closing::All).await?;
            if outcome.retry {
                retry = true;
                break;
            }
        }
        let budget = self.max_processor_retries.unwrap_or(DEFAULT_API_ERROR_RETRIES);
        if retry && self.processors.retry_count < budget {
            self.processors.retry_count += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// One model step: the call (with error-processor retries), the stream, and everything
    /// after it up to the tools' results.
    async fn model_step(&mut self, step_number: u32, step: &StepInput) -> Result<StepOutcome, RunStop> {
        let model = self
            .runtime
            .models
            .resolve(&step.model, self.agent.script.as_ref())
            .map_err(|error| RunStop::Failed(model_failure(&step.model, &error)))?;
        let offered_tools = step.offered_tools();
        let model_started = std::time::Instant::now();
        let source = loop {
            let prompt = build_prompt(&self.list);
            let (prompt, replay) = self.process_llm_request(step_number, step, prompt).await?;
            if let Some(chunks) = replay {
                break StepSource::Replay(chunks);
            }
            let request = ModelRequest {
                prompt,
                tools: offered_tools.clone(),
                tool_choice: step.tool_choice.clone(),
                settings: step.settings.clone(),
                provider_options: step.provider_options.clone(),
                structured_output: step.structured_output.clone(),
                call_index: self.model_calls,
            };
            self.model_calls += 1;
            let call_span = spans::model_call(&step.model);
            match model.stream(request).instrument(call_span.clone()).await {
                Ok(stream) => break StepSource::Model(stream, call_span),
                Err(error) => {
                    spans::failed(&call_span, &error.to_string());
                    drop(call_span);
                    if !self.process_api_error(step_number, &error).await? {
                        return Err(RunStop::Failed(model_failure(&step.model, &error)));
                    }
                }
            }
        };

        let message_id = new_id();
        let step_start =
            Chunk::StepStart { step: step_number, message_id: message_id.clone(), model: step.model.clone() };
        self.emit_step_start(step_start).await?;
        let mut answer = StepAnswer::new(step_number, &step.model);
        let from_cache = matches!(source, StepSource::Replay(_));
        let mut raw_chunks = Vec::new();
        let mut call_span = Span::none();
        match source {
            StepSource::Replay(chunks) => {
                for chunk in chunks {
                    self.step_chunk(chunk, &mut answer, &mut raw_chunks).await?;
                }
            }
            StepSource::Model(mut stream, span) => {
                call_span = span;
                loop {
                    let event = match self.next_window_deadline() {
                        None => stream.next().await,
                        Some(deadline) => tokio::select! {
                            event = stream.next() => event,
                            () = tokio::time::sleep_until(deadline) => {
                                self.close_due_windows(&mut answer).await?;
                                continue;
                            }
                        },
                    };
                    let Some(event) = event else { break };
                    let event = event.map_err(|error| {
                        spans::failed(&call_span, &error.to_string());
                        RunStop::Failed(model_failure(&step.model, &error))
                    })?;
                    if let Some(chunk) = answer.chunk_of(event, &message_id) {
                        self.step_chunk(chunk, &mut answer, &mut raw_chunks).await?;
                    }
                }
            }
        }
        self.close_windows(&mut answer).await?;
        if !from_cache {
            let (metrics, model) = (crate::telemetry::metrics::global(), [("model", step.model.as_str())]);
            metrics.observe(
                "agentwire_model_duration_seconds",
                &model,
                model_started.elapsed().as_secs_f64(),
            );
            let usage = answer.result.usage;
            call_span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            call_span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            drop(call_span);
            for (direction, tokens) in [("input", usage.input_tokens), ("output", usage.output_tokens)] {
                let labels = [("model", step.model.as_str()), ("direction", direction)];
                metrics.count("agentwire_model_tokens_total", &labels, tokens);
            }
        }
        raw_chunks.push(Chunk::StepFinish {
            step: step_number,
            finish_reason: answer.result.finish_reason,
            usage: answer.result.usage,
            rejected: None,
        });

        self.steps.push(answer.result.clone());
        self.process_llm_response(step_number, &step.model, &raw_chunks, from_cache).await?;
        let mut parts = answer.parts;
        parts.append(&mut self.pending_data_parts);
        if !parts.is_empty() {
            let mut message = Message::new(Role::Assistant, parts);
            message.id = message_id.clone();
            self.add_response(message);
        }
        let rejection = self.process_output_step(step_number, &message_id).await?;
        let step_result = self.steps.last().cloned().expect("pushed above");
        self.usage.add(step_result.usage);
        let step_finish = Chunk::StepFinish {
            step: step_number,
            finish_reason: step_result.finish_reason,
            usage: step_result.usage,
            rejected: rejection.clone(),
        };
        if let Some(tripwire) = rejection {
            self.emit(step_finish, true).await?;
            return Ok(StepOutcome::Retry(tripwire.reason));
        }
        self.processors.retry_count = 0;
        self.emit(step_finish, true).await?;
        if step_result.tool_calls.is_empty() {
            return Ok(StepOutcome::Complete(step_result.finish_reason));
        }
        for call in &step_result.tool_calls {
            self.run_tool(step_number, call, &offered_tools).await?;
        }
        Ok(StepOutcome::Continue)
    }

    /// One chunk of a step's answer: recorded raw for processLLMResponse, then streamed.
    async fn step_chunk(
        &mut self,
        chunk: Chunk,
        answer: &mut StepAnswer,
        raw_chunks: &mut Vec<Chunk>,
    ) -> Result<(), RunStop> {
        if let Chunk::StepFinish { finish_reason, usage, .. } = chunk {
            // A replayed step's end: it carries the step's outcome; the loop emits its own.
            answer.result.finish_reason = finish_reason;
            answer.result.usage = usage;
            return Ok(());
        }
        raw_chunks.push(chunk.clone());
        self.stream_model_chunk(chunk, answer).await
    }

    async fn process_llm_response(
        &mut self,
        step_number: u32,
        model_id: &str,
        chunks: &[Chunk],
        from_cache: bool,
    ) -> Result<(), RunStop> {
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessLlmResponse) {
            let args = LlmResponseArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                chunks,
                model: model_id,
                step_number,
                steps: &self.steps,
                from_cache,
            };
            guarded(processor.id(), Hook::ProcessLlmResponse, processor.process_llm_response(args))
                .await
                .map_err(|error| stop(processor.as_ref(), Hook::ProcessLlmResponse, error))?;
            self.flush_emitted(false, Closing::All).await?;
        }
        Ok(())
    }

    /// `processOutputStep` over the output processors. `Some(tripwire)` when a processor rejected
    /// the step with `retry` and the budget allows it: the step is rolled back.
    async fn process_output_step(
        &mut self,
        step_number: u32,
        message_id: &str,
    ) -> Result<Option<Tripwire>, RunStop> {
        let current = self.steps.last().cloned().expect("the step was recorded");
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessOutputStep) {
            let args = OutputStepArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.all_system_messages(),
                message_list: &mut self.list,
                step_number,
                finish_reason: current.finish_reason,
                tool_calls: &current.tool_calls,
                text: &current.text,
                usage: current.usage,
                steps: &self.steps,
            };
            match guarded(processor.id(), Hook::ProcessOutputStep, processor.process_output_step(args)).await
            {
                Ok(Some(messages)) => {
                    self.list.reconcile(ReconcileScope::All, messages, MessageSource::Response);
                }
                Ok(None) => {}
                Err(HookError::Abort(abort)) if abort.retry && self.can_retry() => {
                    let tripwire = tripwire_of(processor.id(), Hook::ProcessOutputStep, abort);
                    self.list.remove_by_ids(&[message_id.to_owned()]);
                    let rejected = self.steps.last_mut().expect("the step was recorded");
                    rejected.text.clear();
                    rejected.tool_calls.clear();
                    rejected.tripwire = Some(tripwire.clone());
                    self.processors.retry_count += 1;
                    return Ok(Some(tripwire));
                }
                Err(error) => return Err(stop(processor.as_ref(), Hook::ProcessOutputStep, error)),
            }
            self.flush_emitted(true, Closing::All).await?;
        }
        Ok(None)
    }

    fn can_retry(&self) -> bool {
        self.max_processor_retries.is_some_and(|max| self.processors.retry_count < max)
    }

    /// Runs one tool call, then `processToolResult`, then streams the (rewritten) result.
    async fn run_tool(
        &mut self,
        step_number: u32,
        call: &ToolCall,
        offered_tools: &[crate::domain::ToolDefinition],
    ) -> Result<(), RunStop> {
        let offered = offered_tools.iter().any(|tool| tool.name == call.tool_name);
        let run_tool = self.run_tools.iter().find(|tool| tool.definition().name == call.tool_name);
        let outcome = match run_tool.or_else(|| self.runtime.tools.get(&call.tool_name)) {
            Some(tool) if offered => {
                let info = ToolCallInfo {
                    run_id: &self.info.run_id,
                    agent_id: &self.info.agent_id,
                    tool_call_id: &call.tool_call_id,
                    trace_context: &self.info.trace_context,
                };
                let span = spans::tool(&call.tool_name, &call.tool_call_id);
                let outcome = tool.execute(call.args.clone(), info).instrument(span.clone()).await;
                if let Err(error) = &outcome {
                    spans::failed(&span, &error.to_string());
                }
                outcome
            }
            _ => Err(ToolError::UnknownTool(call.tool_name.clone())),
        };
        let (result, is_error) = match outcome {
            Ok(result) => (result, false),
            Err(error) => (Value::String(error.to_string()), true),
        };
        self.add_response(Message::new(
            Role::Tool,
            vec![Part::ToolResult(ToolResult {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                result,
                is_error,
            })],
        ));

        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessToolResult) {
            let args = ToolResultArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                tool_name: &call.tool_name,
                tool_call_id: &call.tool_call_id,
                args: &call.args,
                result: stored_tool_result(&self.list, &call.tool_call_id),
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.all_system_messages(),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
            };
            let outcome =
                guarded(processor.id(), Hook::ProcessToolResult, processor.process_tool_result(args))
                    .await
                    .map_err(|error| stop(processor.as_ref(), Hook::ProcessToolResult, error))?;
            if let Some(messages) = outcome.messages {
                self.list.reconcile(ReconcileScope::All, messages, MessageSource::Response);
            }
            if let Some(result) = outcome.result {
                self.list.update_tool_result(&call.tool_call_id, result);
            }
            self.flush_emitted(true, Closing::All).await?;
        }

        let processed = ToolResult {
            tool_call_id: call.tool_call_id.clone(),
            tool_name: call.tool_name.clone(),
            result: stored_tool_result(&self.list, &call.tool_call_id),
            is_error,
        };
        self.steps.last_mut().expect("the step was recorded").tool_results.push(processed.clone());
        self.emit(Chunk::ToolResult(processed), true).await
    }

    async fn process_output_result(&mut self, finish_reason: FinishReason) -> Result<(), RunStop> {
        let summary = OutputSummary {
            text: self.final_text(),
            usage: self.usage,
            finish_reason,
            steps: self.steps.clone(),
        };
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessOutputResult) {
            let args = OutputResultArgs {
                ctx: self.processors.context(&self.info, processor.id()),
                messages: self.list.snapshot(ReconcileScope::Response),
                message_list: &mut self.list,
                result: &summary,
            };
            let outcome =
                guarded(processor.id(), Hook::ProcessOutputResult, processor.process_output_result(args))
                    .await
                    .map_err(|error| stop(processor.as_ref(), Hook::ProcessOutputResult, error))?;
            if let Some(messages) = outcome {
                self.list.reconcile(ReconcileScope::Response, messages, MessageSource::Response);
            }
            self.flush_emitted(true, Closing::All).await?;
        }
        self.attach_pending_data_parts();
        Ok(())
    }

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

/// What a step's answer is made of so far: the result, and the assistant message's parts, both
/// built from the chunks that reached the client.
struct StepAnswer {
    result: StepResult,
    parts: Vec<Part>,
}

impl StepAnswer {
    fn new(step_number: u32, model: &str) -> StepAnswer {
        StepAnswer {
            result: StepResult {
                step: step_number,
                model: model.to_owned(),
                text: String::new(),
                reasoning: String::new(),
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
                tool_calls: Vec::new(),
                tool_results: Vec::new(),
                tripwire: None,
            },
            parts: Vec::new(),
        }
    }

    /// The chunk for a model event; the final event only records the step's outcome.
    fn chunk_of(&mut self, event: crate::model::ModelEvent, message_id: &str) -> Option<Chunk> {
        use crate::model::ModelEvent;
        match event {
            ModelEvent::TextDelta(text) => Some(Chunk::TextDelta { id: message_id.to_owned(), text }),
            ModelEvent::ReasoningDelta(text) => {
                Some(Chunk::ReasoningDelta { id: message_id.to_owned(), text })
            }
            ModelEvent::ToolCall(call) => Some(Chunk::ToolCall(call)),
            ModelEvent::Finish { finish_reason, usage } => {
                self.result.finish_reason = finish_reason;
                self.result.usage = usage;
                None
            }
        }
    }

    fn absorb(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::TextDelta { text, .. } => {
                self.result.text.push_str(text);
                match self.parts.last_mut() {
                    Some(Part::Text { text: last }) => last.push_str(text),
                    _ => self.parts.push(Part::Text { text: text.clone() }),
                }
            }
            Chunk::ReasoningDelta { text, .. } => {
                self.result.reasoning.push_str(text);
                match self.parts.last_mut() {
                    Some(Part::Reasoning { text: last }) => last.push_str(text),
                    _ => self.parts.push(Part::Reasoning { text: text.clone() }),
                }
            }
            Chunk::ToolCall(call) => {
                self.parts.push(Part::ToolCall(call.clone()));
                self.result.tool_calls.push(call.clone());
            }
            _ => {}
        }
    }
}

/// Runs a hook of processor `processor_id`, turning a panic into a failure of that processor,
/// and records how long it took.
async fn guarded<T>(
    processor_id: &str,
    hook: Hook,
    hook_call: impl Future<Output = Result<T, HookError>>,
) -> Result<T, HookError> {
    let span = spans::hook(processor_id, hook);
    let started = std::time::Instant::now();
    let outcome = AssertUnwindSafe(hook_call).catch_unwind().instrument(span.clone()).await;
    crate::telemetry::metrics::global().observe(
        "agentwire_hook_duration_seconds",
        &[("processor", processor_id), ("hook", hook.name())],
        started.elapsed().as_secs_f64(),
    );
    match &outcome {
        Ok(Err(HookError::Abort(_))) => spans::ended(&span, "tripwire"),
        Ok(Err(HookError::Failed(message))) => spans::failed(&span, message),
        _ => {}
    }
    match outcome {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|message| (*message).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            let message = format!("panicked: {message}");
            spans::failed(&span, &message);
            Err(HookError::Failed(message))
        }
    }
}

fn tripwire_of(processor_id: &str, hook: Hook, abort: Abort) -> Tripwire {
    let reason = if abort.reason.is_empty() {
        match hook {
            Hook::ProcessOutputStream => format!("Stream part blocked by {processor_id}"),
            _ => format!("Tripwire triggered by {processor_id}"),
        }
    } else {
        abort.reason
    };
    Tripwire { reason, retry: abort.retry, metadata: abort.metadata, processor_id: processor_id.to_owned() }
}

fn stop(processor: &dyn Processor, hook: Hook, error: HookError) -> RunStop {
    match error {
        HookError::Abort(abort) => RunStop::Tripwire(tripwire_of(processor.id(), hook, abort)),
        HookError::Failed(message) => RunStop::Failed(RunFailure {
            message: format!("processor `{}` failed in {hook}: {message}", processor.id()),
            source: ErrorSource::Processor,
            origin: processor.id().to_owned(),
        }),
    }
}

fn model_failure(model_id: &str, error: &ModelError) -> RunFailure {
    RunFailure { message: error.to_string(), source: ErrorSource::Model, origin: model_id.to_owned() }
}

/// The result of a tool call as the message list holds it (`null` if a processor removed it).
fn stored_tool_result(list: &MessageList, tool_call_id: &str) -> Value {
    list.tool_result(tool_call_id).map(|stored| stored.result.clone()).unwrap_or(Value::Null)
}

/// The prompt for the model: every system message (untagged, then tagged), then the messages.
/// Custom data parts are for clients and memory, not for the model.
fn build_prompt(list: &MessageList) -> Vec<PromptMessage> {
    let system = list
        .all_system_messages()
        .into_iter()
        .map(|text| PromptMessage { role: Role::System, parts: vec![Part::Text { text }] });
    let messages = list.all().map(|message| PromptMessage {
        role: message.role,
        parts: message.parts.iter().filter(|part| !matches!(part, Part::Data { .. })).cloned().collect(),
    });
    system.chain(messages).collect()
}
