//! One model step: the request built from the message list and the step's input, the model's
//! stream turned into chunks (each through `processOutputStream`), and the step's answer
//! ([`StepAnswer`]) recorded from the chunks that reached the client.

use futures::StreamExt;
use tracing::{Instrument as _, Span};

use super::{Run, RunStop, StepOutcome, StepSource};
use crate::domain::{
    Chunk, ErrorSource, FinishReason, Hook, Message, MessageList, Part, PromptMessage, Role, RunFailure,
    StepInput, StepResult, Tripwire, Usage, new_id,
};
use crate::model::{ModelError, ModelRequest};
use crate::telemetry::spans;

impl Run {
    /// One model step: the call (with error-processor retries), the stream, and everything
    /// after it up to the tools' results.
    pub(super) async fn model_step(
        &mut self,
        step_number: u32,
        step: &StepInput,
    ) -> Result<StepOutcome, RunStop> {
        let model = self
            .runtime
            .models
            .resolve(&step.model, self.agent.script.as_ref())
            .map_err(|error| RunStop::Failed(model_failure(&step.model, &error)))?;
        let offered_tools = step.offered_tools();
        let model_started = std::time::Instant::now();
        let call_started;
        let source = 'call: {
            let prompt = build_prompt(&self.list);
            let (prompt, replay) = self.process_llm_request(step_number, step, prompt).await?;
            call_started = std::time::Instant::now();
            if let Some(chunks) = replay {
                break 'call StepSource::Replay(chunks);
            }
            self.recorder.prompt(step_number, &prompt);
            let request = ModelRequest {
                prompt,
                tools: offered_tools.clone(),
                tool_choice: step.tool_choice.clone(),
                settings: step.settings.clone(),
                provider_options: step.provider_options.clone(),
                structured_output: step.structured_output.clone(),
                call_index: self.model_calls,
                streamed: self.sink.streams() || !self.chains.of(Hook::ProcessOutputStream).is_empty(),
            };
            self.model_calls += 1;
            let call_span = spans::model_call(&step.model);
            match model.stream(request).instrument(call_span.clone()).await {
                Ok(stream) => StepSource::Model(stream, call_span),
                Err(error) => {
                    spans::failed(&call_span, &error.to_string());
                    drop(call_span);
                    let message = Some(error.to_string());
                    self.recorder.model(
                        &step.model,
                        step_number,
                        call_started,
                        None,
                        Usage::default(),
                        false,
                        message,
                    );
                    let Some(asked_by) = self.process_api_error(step_number, &error).await? else {
                        return Err(RunStop::Failed(model_failure(&step.model, &error)));
                    };
                    self.retried_call(step_number, &step.model, asked_by, &error).await?;
                    return Ok(StepOutcome::Again);
                }
            }
        };

        let message_id = new_id();
        let step_start =
            Chunk::StepStart { step: step_number, message_id: message_id.clone(), model: step.model.clone() };
        self.emit_step_start(step_start).await?;
        let mut answer = StepAnswer::new(step_number, &step.model);
        let from_cache = matches!(source, StepSource::Replay(_));
        // The model's chunks as they came, for processLLMResponse: kept only when it has processors.
        let mut raw_chunks = RawChunks::new(!self.chains.of(Hook::ProcessLlmResponse).is_empty());
        let mut call_span = Span::none();
        let mut first_token = None;
        match source {
            StepSource::Replay(chunks) => {
                for chunk in chunks {
                    self.step_chunk(chunk, &mut answer, &mut raw_chunks).await?;
                }
            }
            StepSource::Model(mut stream, span) => {
                call_span = span;
                loop {
                    let deadline = self.next_window_deadline();
                    let event = if deadline.is_none() && !self.windows_in_flight() {
                        stream.next().await
                    } else {
                        // A window sent ahead may be answered, or a window's delay run out,
                        // before the model's next chunk: answers go first, as they release
                        // what the client waits for.
                        let due = deadline.unwrap_or_else(tokio::time::Instant::now);
                        tokio::select! {
                            biased;
                            stage = self.windows.answered() => {
                                self.release_answered(stage, &mut answer).await?;
                                continue;
                            }
                            () = tokio::time::sleep_until(due), if deadline.is_some() => {
                                self.close_due_windows(&mut answer).await?;
                                continue;
                            }
                            event = stream.next() => event,
                        }
                    };
                    let Some(event) = event else { break };
                    let event = event.map_err(|error| {
                        spans::failed(&call_span, &error.to_string());
                        let message = Some(error.to_string());
                        let usage = answer.result.usage;
                        self.recorder.model(
                            &step.model,
                            step_number,
                            call_started,
                            first_token,
                            usage,
                            false,
                            message,
                        );
                        RunStop::Failed(model_failure(&step.model, &error))
                    })?;
                    if let Some(chunk) = answer.chunk_of(event, &message_id) {
                        first_token.get_or_insert_with(std::time::Instant::now);
                        self.step_chunk(chunk, &mut answer, &mut raw_chunks).await?;
                    }
                }
            }
        }
        self.close_windows(&mut answer).await?;
        let usage = answer.result.usage;
        self.recorder.model(&step.model, step_number, call_started, first_token, usage, from_cache, None);
        if !from_cache {
            let (metrics, model) = (crate::telemetry::metrics::global(), [("model", step.model.as_str())]);
            metrics.observe(&crate::telemetry::metrics::MODEL_DURATION, &model, model_started.elapsed());
            let usage = answer.result.usage;
            call_span.record("gen_ai.usage.input_tokens", usage.input_tokens);
            call_span.record("gen_ai.usage.output_tokens", usage.output_tokens);
            drop(call_span);
            for (direction, tokens) in [("input", usage.input_tokens), ("output", usage.output_tokens)] {
                let labels = [("model", step.model.as_str()), ("direction", direction)];
                metrics.count(&crate::telemetry::metrics::MODEL_TOKENS, &labels, tokens);
            }
        }
        raw_chunks.keep(|| Chunk::StepFinish {
            step: step_number,
            finish_reason: answer.result.finish_reason,
            usage: answer.result.usage,
            rejected: None,
        });

        self.steps.push(answer.result.clone());
        self.step_messages.push(message_id.clone());
        self.process_llm_response(step_number, &step.model, &raw_chunks.chunks, from_cache).await?;
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
            self.emit(step_finish).await?;
            return Ok(StepOutcome::Retry(tripwire.reason));
        }
        self.processors.retry_count = 0;
        // The step's tool results go out before the step closes, as streaming UIs expect.
        for call in &step_result.tool_calls {
            self.run_tool(step_number, call, &offered_tools).await?;
        }
        self.emit(step_finish).await?;
        if step_result.tool_calls.is_empty() {
            return Ok(StepOutcome::Complete(step_result.finish_reason));
        }
        Ok(StepOutcome::Continue)
    }

    /// Frames a rejected model call that an error processor retries, as a `processOutputStep`
    /// retry is: its `step-start`, a `step-finish` whose `rejected` says who asked for the retry
    /// and why, and a `retry` entry in `steps`. The step then runs again, `processInputStep` on.
    async fn retried_call(
        &mut self,
        step_number: u32,
        model: &str,
        asked_by: String,
        error: &ModelError,
    ) -> Result<(), RunStop> {
        let message_id = new_id();
        let step_start =
            Chunk::StepStart { step: step_number, message_id: message_id.clone(), model: model.to_owned() };
        self.emit_step_start(step_start).await?;
        let tripwire = Tripwire {
            reason: format!("{error}; retried"),
            retry: true,
            metadata: serde_json::json!({ "error": error.to_string() }),
            processor_id: asked_by,
        };
        let mut attempt = StepAnswer::new(step_number, model).result;
        attempt.finish_reason = FinishReason::Error;
        attempt.tripwire = Some(tripwire.clone());
        self.steps.push(attempt);
        self.step_messages.push(message_id);
        let step_finish = Chunk::StepFinish {
            step: step_number,
            finish_reason: FinishReason::Error,
            usage: Usage::default(),
            rejected: Some(tripwire),
        };
        self.emit(step_finish).await
    }

    /// One chunk of a step's answer: recorded raw for processLLMResponse, then streamed.
    pub(super) async fn step_chunk(
        &mut self,
        chunk: Chunk,
        answer: &mut StepAnswer,
        raw_chunks: &mut RawChunks,
    ) -> Result<(), RunStop> {
        if let Chunk::StepFinish { finish_reason, usage, .. } = chunk {
            // A replayed step's end: it carries the step's outcome; the loop emits its own.
            answer.result.finish_reason = finish_reason;
            answer.result.usage = usage;
            return Ok(());
        }
        raw_chunks.keep(|| chunk.clone());
        self.stream_model_chunk(chunk, answer).await
    }
}

/// A step's chunks as the model gave them, for processLLMResponse; none are copied when no
/// processor of the run implements it.
pub(super) struct RawChunks {
    chunks: Vec<Chunk>,
    wanted: bool,
}

impl RawChunks {
    fn new(wanted: bool) -> RawChunks {
        RawChunks { chunks: Vec::new(), wanted }
    }

    fn keep(&mut self, chunk: impl FnOnce() -> Chunk) {
        if self.wanted {
            self.chunks.push(chunk());
        }
    }
}

/// What a step's answer is made of so far: the result, and the assistant message's parts, both
/// built from the chunks that reached the client.
pub(super) struct StepAnswer {
    pub(super) result: StepResult,
    pub(super) parts: Vec<Part>,
}

impl StepAnswer {
    pub(super) fn new(step_number: u32, model: &str) -> StepAnswer {
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
    pub(super) fn chunk_of(&mut self, event: crate::model::ModelEvent, message_id: &str) -> Option<Chunk> {
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

    pub(super) fn absorb(&mut self, chunk: &Chunk) {
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

fn model_failure(model_id: &str, error: &ModelError) -> RunFailure {
    RunFailure { message: error.to_string(), source: ErrorSource::Model, origin: model_id.to_owned() }
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
