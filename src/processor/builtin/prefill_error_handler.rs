//! `prefill-error-handler`: the seed's error processor for providers that refuse a prompt ending
//! with an assistant turn ("assistant message prefill"). On such a rejection it appends a hidden
//! user turn (`continue`, source `signal`: the model sees it, memory never stores it) and asks
//! for one retry. A prompt that already ends with a user turn is left alone: the retry could not
//! help, so the rejection stands.

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{CONTINUE_TURN, Hook, HookSet, Message, MessageSource, Part, Role};
use crate::model::ModelError;
use crate::processor::{ApiErrorArgs, ApiErrorOutcome, BuildError, HookError, Processor, parse_options};

pub(super) const KIND: &str = "prefill-error-handler";

/// What providers say when they refuse a trailing assistant turn (lowercase substrings):
/// Anthropic, Qwen-style servers with thinking enabled, and Gemini.
const PREFILL_REFUSALS: &[&str] = &[
    "does not support assistant message prefill",
    "assistant response prefill is incompatible",
    "requests ending with a model turn are not supported",
    "conversation must end with a user message",
    "final message must be a user message",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// More provider messages (case-insensitive substrings) that mean the same refusal.
    #[serde(default)]
    also_match: Vec<String>,
}

/// Repairs a refused assistant prefill and retries once.
#[derive(Debug)]
pub(super) struct PrefillErrorHandler {
    id: String,
    also_match: Vec<String>,
}

impl PrefillErrorHandler {
    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let Options { also_match } = parse_options(options)?;
        let also_match = also_match.iter().map(|pattern| pattern.to_lowercase()).collect();
        Ok(Arc::new(PrefillErrorHandler { id: id.to_owned(), also_match }))
    }

    fn is_prefill_refusal(&self, error: &ModelError) -> bool {
        let ModelError::Rejected { message, .. } = error else { return false };
        let message = message.to_lowercase();
        PREFILL_REFUSALS
            .iter()
            .copied()
            .chain(self.also_match.iter().map(String::as_str))
            .any(|pattern| message.contains(pattern))
    }
}

#[async_trait::async_trait]
impl Processor for PrefillErrorHandler {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessApiError])
    }

    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        let Some(last) = args.message_list.all().last() else { return Ok(ApiErrorOutcome::default()) };
        if last.role != Role::Assistant || !self.is_prefill_refusal(args.error) {
            return Ok(ApiErrorOutcome::default());
        }
        let mut signal = Message::new(Role::User, vec![Part::text(CONTINUE_TURN)]);
        signal.created_at = signal.created_at.max(last.created_at);
        args.message_list.add(signal, MessageSource::Signal);
        Ok(ApiErrorOutcome { retry: true })
    }
}
