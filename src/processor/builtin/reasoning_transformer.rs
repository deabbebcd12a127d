//! `reasoning-transformer`: the seed's `ReasoningTransformer`, for runs that switch providers.
//! Reasoning parts of earlier assistant turns do not travel between providers (each adapter sends
//! only its own kind, and agentwire's adapters send none); this carries them over as text the next
//! model reads (`mode = "text"`, wrapped in `<thinking>`), or removes them from the prompt so no
//! later processor counts them (`mode = "drop"`). It rewrites the outgoing prompt only
//! (`processLLMRequest`): what is stored and streamed keeps the reasoning as it was.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Hook, HookSet, Part, PromptMessage, Role};
use crate::processor::{BuildError, HookError, LlmRequestArgs, LlmRequestOutcome, Processor, parse_options};

pub(super) const KIND: &str = "reasoning-transformer";

/// What becomes of a reasoning part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// A text part, `<{tag}>…</{tag}>`, in the same place.
    #[default]
    Text,
    /// Left out.
    Drop,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    mode: Mode,
    /// The element name that wraps carried-over reasoning.
    #[serde(default = "default_tag")]
    tag: String,
}

fn default_tag() -> String {
    "thinking".to_owned()
}

/// Carries reasoning over as text, or drops it, in the outgoing prompt.
#[derive(Debug)]
pub(super) struct ReasoningTransformer {
    id: String,
    mode: Mode,
    tag: String,
}

impl ReasoningTransformer {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let Options { mode, tag } = parse_options(options)?;
        let valid = tag.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(BuildError::Options(format!(
                "`tag`: `{tag}` is not an element name (letters, digits, - and _)"
            )));
        }
        Ok(Arc::new(ReasoningTransformer { id: id.to_owned(), mode, tag }))
    }

    fn transform(&self, part: &Part) -> Option<Part> {
        match (part, self.mode) {
            (Part::Reasoning { text }, Mode::Text) => {
                let tag = &self.tag;
                Some(Part::text(format!("<{tag}>{text}</{tag}>")))
            }
            (Part::Reasoning { .. }, Mode::Drop) => None,
            (other, _) => Some(other.clone()),
        }
    }
}

#[async_trait::async_trait]
impl Processor for ReasoningTransformer {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest])
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        let has_reasoning = |message: &PromptMessage| {
            message.role == Role::Assistant
                && message.parts.iter().any(|part| matches!(part, Part::Reasoning { .. }))
        };
        if !args.prompt.iter().any(has_reasoning) {
            return Ok(LlmRequestOutcome::default());
        }
        let prompt = args
            .prompt
            .iter()
            .map(|message| match message.role {
                Role::Assistant => PromptMessage {
                    role: message.role,
                    parts: message.parts.iter().filter_map(|part| self.transform(part)).collect(),
                },
                _ => message.clone(),
            })
            .collect();
        Ok(LlmRequestOutcome { prompt: Some(prompt), ..LlmRequestOutcome::default() })
    }
}
