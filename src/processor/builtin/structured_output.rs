//! `structured-output`: the final answer must be JSON following `schema`. A step whose answer
//! does not is rejected and retried with the validation errors as feedback (processOutputStep),
//! up to `max_retries` times (the agent's `max_processor_retries` must allow them); then
//! `on_error` decides: `block` (a tripwire), `warn` (a report, the answer passes) or `fallback`
//! (the `fallback` value stands in for the object).
//!
//! The object goes out in a `data-structured-output` chunk, kept with the answer's message (so
//! memory keeps it too). Listed among input processors as well, the processor also sends the
//! schema with every step (processInputStep), so that providers that can constrain their output
//! to a schema do.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{DataChunk, Hook, HookSet, JsonSchema, Message, Warning};
use crate::processor::{
    Abort, BuildError, HookError, InputStepArgs, OutputStepArgs, Processor, StepOverrides, parse_options,
};

pub(super) const KIND: &str = "structured-output";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum OnError {
    #[default]
    Block,
    Warn,
    Fallback,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    schema: Value,
    #[serde(default = "default_max_retries")]
    max_retries: u32,
    #[serde(default)]
    on_error: OnError,
    #[serde(default)]
    fallback: Option<Value>,
}

fn default_max_retries() -> u32 {
    2
}

/// Holds answers to a schema.
pub(super) struct StructuredOutput {
    id: String,
    schema: JsonSchema,
    max_retries: u32,
    on_error: OnError,
    fallback: Value,
}

impl StructuredOutput {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        let schema = JsonSchema::new(options.schema).map_err(|reason| format!("`schema`: {reason}"))?;
        let fallback = match (options.on_error, options.fallback) {
            (OnError::Fallback, None) => {
                return Err("`on_error = \"fallback\"` needs a `fallback` value".to_owned().into());
            }
            (OnError::Fallback, Some(fallback)) => {
                schema
                    .check(&fallback)
                    .map_err(|problems| format!("`fallback` does not follow `schema`: {problems}"))?;
                fallback
            }
            (_, Some(_)) => {
                return Err("`fallback` is only used with `on_error = \"fallback\"`".to_owned().into());
            }
            (_, None) => Value::Null,
        };
        Ok(Arc::new(StructuredOutput {
            id: id.to_owned(),
            schema,
            max_retries: options.max_retries,
            on_error: options.on_error,
            fallback,
        }))
    }
}

#[async_trait::async_trait]
impl Processor for StructuredOutput {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep, Hook::ProcessOutputStep])
    }

    async fn process_input_step(&self, _args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        Ok(StepOverrides {
            structured_output: Some(self.schema.schema().clone()),
            ..StepOverrides::default()
        })
    }

    async fn process_output_step(
        &self,
        mut args: OutputStepArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        // A step that calls tools has not answered yet.
        if !args.tool_calls.is_empty() {
            return Ok(None);
        }
        let problem = match self.schema.object_of(args.text) {
            Ok(object) => {
                args.ctx.emit(DataChunk::new("structured-output", json!({ "object": object })));
                return Ok(None);
            }
            Err(problem) => problem.to_string(),
        };
        let details = json!({ "error": problem, "attempts": args.ctx.retry_count + 1 });
        if args.ctx.retry_count < self.max_retries {
            let reason = format!(
                "{problem}. Answer with JSON only, following this JSON schema: {}",
                self.schema.schema()
            );
            return Err(Abort::new(reason).retry().metadata(details).into());
        }
        match self.on_error {
            OnError::Block => {
                let reason = format!(
                    "No answer followed the schema after {} attempts: {problem}",
                    args.ctx.retry_count + 1
                );
                Err(Abort::new(reason).metadata(details).into())
            }
            OnError::Warn => {
                let message = format!("No answer followed the schema: {problem}");
                args.ctx.warn(Warning::new("structured-output", message, details));
                Ok(None)
            }
            OnError::Fallback => {
                let object = json!({ "object": self.fallback, "fallback": true, "error": problem });
                args.ctx.emit(DataChunk::new("structured-output", object));
                Ok(None)
            }
        }
    }
}
