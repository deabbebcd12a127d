//! The hooks of a run around the model call, each over every processor of its chain in order:
//! `processInput` once, then per step `processInputStep`, `processLLMRequest`, `processAPIError`
//! (error processors, on a rejection), `processLLMResponse` and `processOutputStep`, and
//! `processOutputResult` once at the end. (`processOutputStream` is in `output_stream.rs`,
//! `processToolResult` in `tools.rs`.)

use std::sync::Arc;

use serde_json::Value;

use super::{Closing, DEFAULT_API_ERROR_RETRIES, Run, RunStop, guarded, stop, tripwire_of};
use crate::domain::{
    Chunk, FinishReason, Hook, MessageSource, PromptMessage, ReconcileScope, StepInput, Tripwire,
};
use crate::model::ModelError;
use crate::processor::{
    ApiErrorArgs, HookError, InputArgs, InputOutcome, InputStepArgs, LlmRequestArgs, LlmResponseArgs,
    OutputResultArgs, OutputStepArgs, OutputSummary, StepOverrides,
};

impl Run {
    pub(super) async fn process_input(&mut self) -> Result<(), RunStop> {
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessInput) {
            let args = InputArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                messages: self.list.snapshot(ReconcileScope::Input),
                system_messages: self.list.system_messages().to_vec(),
                tagged_system_messages: self.list.tagged_system_messages().clone(),
                message_list: &mut self.list,
            };
            let outcome =
                guarded(&self.recorder, processor.id(), Hook::ProcessInput, processor.process_input(args))
                    .await
                    .map_err(|error| stop(processor.as_ref(), Hook::ProcessInput, error))?;
            match outcome {
                InputOutcome::Unchanged => {}
                InputOutcome::Messages(messages) => {
                    self.check_replaced(processor.as_ref(), Hook::ProcessInput, &messages)?;
                    self.list.reconcile(ReconcileScope::Input, messages, MessageSource::Input);
                }
                InputOutcome::MessagesAndSystem { messages, system_messages } => {
                    self.check_replaced(processor.as_ref(), Hook::ProcessInput, &messages)?;
                    self.list.replace_system_messages(system_messages);
                    self.list.reconcile(ReconcileScope::Input, messages, MessageSource::Input);
                }
            }
        }
        // What the processors emitted goes out after `start` (see `drive`).
        Ok(())
    }

    pub(super) async fn process_input_step(&mut self, step_number: u32) -> Result<StepInput, RunStop> {
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
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.system_messages().to_vec(),
                tagged_system_messages: self.list.tagged_system_messages().clone(),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
                step: &step,
            };
            let overrides = guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessInputStep,
                processor.process_input_step(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessInputStep, error))?;
            let StepOverrides { messages, system_messages, .. } = overrides.apply_to(&mut step);
            if let Some(system_messages) = system_messages {
                self.list.replace_system_messages(system_messages);
            }
            if let Some(messages) = messages {
                self.check_replaced(processor.as_ref(), Hook::ProcessInputStep, &messages)?;
                self.list.reconcile(ReconcileScope::All, messages, MessageSource::Input);
            }
            self.flush_emitted(Closing::All).await?;
        }
        Ok(step)
    }

    /// `processLLMRequest` over the input processors: the prompt each returns replaces the
    /// prompt for the next and for the model; the first cached response wins.
    pub(super) async fn process_llm_request(
        &mut self,
        step_number: u32,
        step: &StepInput,
        mut prompt: Vec<PromptMessage>,
    ) -> Result<(Vec<PromptMessage>, Option<Vec<Chunk>>), RunStop> {
        let mut response = None;
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessLlmRequest) {
            let args = LlmRequestArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                prompt: &prompt,
                model: &step.model,
                step,
                step_number,
                steps: &self.steps,
                message_list: &self.list,
            };
            let outcome = guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessLlmRequest,
                processor.process_llm_request(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessLlmRequest, error))?;
            if let Some(rewritten) = outcome.prompt {
                prompt = rewritten;
            }
            if response.is_none() {
                response = outcome.response;
            }
            self.flush_emitted(Closing::All).await?;
        }
        Ok((prompt, response))
    }

    /// `processAPIError` over the error processors. True when one asked for a retry and the
    /// retry budget allows it: `Some` names the processor that asked.
    pub(super) async fn process_api_error(
        &mut self,
        step_number: u32,
        error: &ModelError,
    ) -> Result<Option<String>, RunStop> {
        let mut retry = None;
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessApiError) {
            let args = ApiErrorArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                error,
                messages: self.list.snapshot(ReconcileScope::All),
                message_list: &mut self.list,
                step_number,
                steps: &self.steps,
            };
            let outcome = guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessApiError,
                processor.process_api_error(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessApiError, error))?;
            self.flush_emitted(Closing::All).await?;
            if outcome.retry {
                retry = Some(processor.id().to_owned());
                break;
            }
        }
        let Some(asked_by) = retry else { return Ok(None) };
        let budget = self.max_processor_retries.unwrap_or_else(|| {
            if self.processors.retry_count == 0 {
                tracing::warn!(
                agent = %self.info.agent_id,
                    "an error processor asked for a retry and max_processor_retries is not set: \
                     retrying up to the default of {DEFAULT_API_ERROR_RETRIES}"
                );
            }
            DEFAULT_API_ERROR_RETRIES
        });
        if self.processors.retry_count < budget {
            self.processors.retry_count += 1;
            return Ok(Some(asked_by));
        }
        tracing::warn!(
            agent = %self.info.agent_id,
            "the retry budget of {budget} ran out: the model's rejection stands"
        );
        Ok(None)
    }

    pub(super) async fn process_llm_response(
        &mut self,
        step_number: u32,
        model_id: &str,
        chunks: &[Chunk],
        from_cache: bool,
    ) -> Result<(), RunStop> {
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessLlmResponse) {
            let args = LlmResponseArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                chunks,
                model: model_id,
                step_number,
                steps: &self.steps,
                from_cache,
            };
            guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessLlmResponse,
                processor.process_llm_response(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessLlmResponse, error))?;
            self.flush_emitted(Closing::All).await?;
        }
        Ok(())
    }

    /// `processOutputStep` over the output processors. `Some(tripwire)` when a processor rejected
    /// the step with `retry` and the budget allows it: the step is rolled back.
    pub(super) async fn process_output_step(
        &mut self,
        step_number: u32,
        message_id: &str,
    ) -> Result<Option<Tripwire>, RunStop> {
        let current = self.steps.last().cloned().expect("the step was recorded");
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessOutputStep) {
            let args = OutputStepArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                messages: self.list.snapshot(ReconcileScope::All),
                system_messages: self.list.system_messages().to_vec(),
                tagged_system_messages: self.list.tagged_system_messages().clone(),
                message_list: &mut self.list,
                step_number,
                finish_reason: current.finish_reason,
                tool_calls: &current.tool_calls,
                text: &current.text,
                usage: current.usage,
                steps: &self.steps,
            };
            match guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessOutputStep,
                processor.process_output_step(args),
            )
            .await
            {
                Ok(Some(messages)) => {
                    self.check_replaced(processor.as_ref(), Hook::ProcessOutputStep, &messages)?;
                    self.list.reconcile(ReconcileScope::All, messages, MessageSource::Response);
                }
                Ok(None) => {}
                Err(HookError::Abort(abort)) if abort.retry && self.can_retry() => {
                    let tripwire = tripwire_of(processor.id(), abort);
                    self.list.remove_by_ids(&[message_id.to_owned()]);
                    self.reject_last_step(tripwire.clone());
                    self.processors.retry_count += 1;
                    return Ok(Some(tripwire));
                }
                Err(error) => {
                    if let HookError::Abort(abort) = &error
                        && abort.retry
                    {
                        self.warn_no_retry(processor.id());
                    }
                    let stopped = stop(processor.as_ref(), Hook::ProcessOutputStep, error);
                    if let RunStop::Tripwire(tripwire) = &stopped {
                        self.reject_last_step(tripwire.clone());
                    }
                    return Err(stopped);
                }
            }
            self.flush_emitted(Closing::All).await?;
        }
        self.refresh_step_texts();
        Ok(None)
    }

    pub(super) fn can_retry(&self) -> bool {
        self.max_processor_retries.is_some_and(|max| self.processors.retry_count < max)
    }

    /// Says why a processor's request for a retry ends the run instead.
    fn warn_no_retry(&self, processor_id: &str) {
        match self.max_processor_retries {
            None => tracing::warn!(
                agent = %self.info.agent_id,
                processor = processor_id,
                "a processor asked for a retry and max_processor_retries is not set: the run ends in a tripwire"
            ),
            Some(budget) => tracing::warn!(
                agent = %self.info.agent_id,
                processor = processor_id,
                "the retry budget of {budget} ran out: the run ends in a tripwire"
            ),
        }
    }

    pub(super) async fn process_output_result(&mut self, finish_reason: FinishReason) -> Result<(), RunStop> {
        let summary = OutputSummary {
            text: self.final_text(),
            usage: self.usage,
            finish_reason,
            steps: self.steps.clone(),
        };
        let chains = Arc::clone(&self.chains);
        for processor in chains.of(Hook::ProcessOutputResult) {
            let args = OutputResultArgs {
                ctx: self.processors.context(&self.info, &self.recorder.note, processor.id()),
                messages: self.list.snapshot(ReconcileScope::Response),
                message_list: &mut self.list,
                result: &summary,
            };
            let outcome = guarded(
                &self.recorder,
                processor.id(),
                Hook::ProcessOutputResult,
                processor.process_output_result(args),
            )
            .await
            .map_err(|error| stop(processor.as_ref(), Hook::ProcessOutputResult, error))?;
            if let Some(messages) = outcome {
                self.check_replaced(processor.as_ref(), Hook::ProcessOutputResult, &messages)?;
                self.list.reconcile(ReconcileScope::Response, messages, MessageSource::Response);
            }
            self.flush_emitted(Closing::All).await?;
            // Before the next processor: memory, last, saves what this one emitted too.
            self.attach_pending_data_parts();
        }
        self.refresh_step_texts();
        Ok(())
    }
}
