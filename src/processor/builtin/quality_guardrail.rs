//! `quality-guardrail`: rejects a step whose text is shorter than `min_chars` and asks for a
//! retry with feedback, up to `max_retries` times, then blocks (the seed's retrying guardrail
//! example, with length as the quality score). Retries also need the agent's
//! `max_processor_retries`.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;

use crate::domain::{Hook, HookSet, Message};
use crate::processor::{Abort, BuildError, HookError, OutputStepArgs, Processor, parse_options};

pub(super) const KIND: &str = "quality-guardrail";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    min_chars: usize,
    #[serde(default = "default_max_retries")]
    max_retries: u32,
}

fn default_max_retries() -> u32 {
    3
}

/// Retries too-short answers.
#[derive(Debug, Clone)]
pub struct QualityGuardrail {
    id: String,
    min_chars: usize,
    max_retries: u32,
}

impl QualityGuardrail {
    /// A guardrail requiring `min_chars` characters, retrying up to `max_retries` times.
    pub fn new(id: impl Into<String>, min_chars: usize, max_retries: u32) -> QualityGuardrail {
        QualityGuardrail { id: id.into(), min_chars, max_retries }
    }

    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        Ok(Arc::new(QualityGuardrail::new(id, options.min_chars, options.max_retries)))
    }
}

#[async_trait::async_trait]
impl Processor for QualityGuardrail {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStep])
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        // A step that only calls tools has no answer to judge yet.
        if !args.tool_calls.is_empty() {
            return Ok(None);
        }
        let length = args.text.chars().count();
        if length >= self.min_chars {
            return Ok(None);
        }
        let metadata = json!({ "chars": length, "min_chars": self.min_chars });
        if args.ctx.retry_count < self.max_retries {
            let abort = Abort::new(format!(
                "Response too short ({length} characters, at least {} needed). Please provide more detail.",
                self.min_chars
            ));
            return Err(abort.retry().metadata(metadata).into());
        }
        Err(Abort::new("Response quality too low after multiple attempts.").metadata(metadata).into())
    }
}
