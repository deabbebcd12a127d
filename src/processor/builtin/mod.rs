//! The built-in processors, the examples of the processor contract made usable from config:
//!
//! | kind | hooks | what it does |
//! |---|---|---|
//! | `content-filter` | processInput, processOutputStream | aborts when input or output contains a blocked word |
//! | `lowercase` | processInput | lowercases the input's text |
//! | `word-counter` | processOutputStream, processOutputResult | counts streamed words, emits `data-word-count` |
//! | `quality-guardrail` | processOutputStep | retries answers shorter than `min_chars` |
//! | `pii-detector` | processInput, processOutputStream | finds personal data and secrets; blocks, warns or redacts |
//! | `regex-filter` | processInput, processOutputStream | the user's patterns; blocks, warns or redacts |
//! | `unicode-normalizer` | processInput | NFKC, strips control and zero-width characters, collapses whitespace |
//! | `tool-call-filter` | processLLMRequest | hides recalled (named) tool calls and results from the prompt |
//! | `batch-parts` | processOutputStream | coalesces text deltas by count or time |
//! | `language-detector` | processInput | blocks or warns on input outside the allowed languages |
//! | `response-cache` | processLLMRequest, processLLMResponse | answers repeated model calls from the store, per resource, thread, agent or everyone |
//! | `structured-output` | processInputStep, processOutputStep | holds the final answer to a JSON schema, retrying with the errors as feedback |
//! | `system-prompt-scrubber` | processOutputStream | redacts, blocks or reports the system prompt leaking into the answer |
//! | `moderation` | processInput, processOutputStream (windowed) | an LLM judge scores categories; blocks or warns |
//! | `prompt-injection-detector` | processInput, processToolResult | heuristic signals, then an optional LLM judge; blocks, warns or rewrites |
//! | `pass-through` | any (`hooks`) | changes nothing: the cost of the hook machinery, or a placeholder |
//! | `token-limiter` | processLLMRequest, processOutputStream | trims remembered history to a token budget; truncates or aborts long answers |
//! | `tool-result-redactor` | processToolResult | replaces named fields of tool results, at any depth |
//! | `dynamic-model` | processInputStep | picks each step's model by `request_context` or by step; takes tools away after a step |
//! | `reasoning-transformer` | processLLMRequest | carries earlier reasoning over as `<thinking>` text, or drops it, in the prompt |
//! | `prefill-error-handler` | processAPIError | on a refused assistant prefill, ends the prompt with a hidden `continue` turn and retries once |

mod batch_parts;
mod content_filter;
mod dynamic_model;
mod judge;
mod language_detector;
mod lowercase;
mod moderation;
mod pass_through;
mod phone;
mod pii;
mod prefill_error_handler;
mod prompt_injection;
mod quality_guardrail;
mod reasoning_transformer;
mod regex_filter;
mod response_cache;
mod scan;
mod scanning;
mod structured_output;
mod system_prompt_scrubber;
mod token_limiter;
mod tool_call_filter;
mod tool_result_redactor;
mod unicode_normalizer;
mod word_counter;

pub use self::content_filter::ContentFilter;
pub use self::lowercase::Lowercase;
pub use self::prompt_injection::{
    ModelFormatError, NGRAM_DIMENSION, NgramModel, injection_readings, ngram_features, ngram_windows,
};
pub use self::quality_guardrail::QualityGuardrail;
pub use self::word_counter::WordCounter;
use super::ProcessorRegistry;
use crate::domain::{Message, MessageList, Part};

/// `true`, for options that default to on (`#[serde(default = "super::yes")]`).
fn yes() -> bool {
    true
}

/// What a detector that cannot rewrite does with a finding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum BlockOrWarn {
    /// Abort the run: a tripwire.
    #[default]
    Block,
    /// Let it pass and report it.
    Warn,
}

/// The run's own input among `processInput`'s messages (not the remembered ones): the built-in
/// input processors check and rewrite only what the client just sent, so a thread's history
/// never trips or slows every later run.
fn own_input<'a>(messages: &'a [Message], list: &'a MessageList) -> impl Iterator<Item = &'a Message> {
    messages.iter().filter(move |message| !list.is_remembered(&message.id))
}

/// [`own_input`], to rewrite.
fn own_input_mut<'a>(
    messages: &'a mut [Message],
    list: &'a MessageList,
) -> impl Iterator<Item = &'a mut Message> {
    messages.iter_mut().filter(move |message| !list.is_remembered(&message.id))
}

/// Rewrites every text part of `messages` with `rewrite`; true when any changed.
fn rewrite_texts<'a>(
    messages: impl Iterator<Item = &'a mut Message>,
    rewrite: impl Fn(&str) -> String,
) -> bool {
    let mut changed = false;
    for part in messages.flat_map(|message| &mut message.parts) {
        if let Part::Text { text } = part {
            let rewritten = rewrite(text);
            if rewritten != *text {
                *text = rewritten;
                changed = true;
            }
        }
    }
    changed
}

impl ProcessorRegistry {
    /// A registry with the built-in kinds.
    pub fn with_builtins() -> ProcessorRegistry {
        let mut registry = ProcessorRegistry::default();
        register(&mut registry);
        registry
    }
}

/// Registers every built-in kind.
fn register(registry: &mut ProcessorRegistry) {
    registry.register_fn(content_filter::KIND, ContentFilter::from_options);
    registry.register_fn(lowercase::KIND, Lowercase::from_options);
    registry.register_fn(word_counter::KIND, WordCounter::from_options);
    registry.register_fn(quality_guardrail::KIND, QualityGuardrail::from_options);
    registry.register_fn(pii::KIND, pii::from_options);
    registry.register_fn(regex_filter::KIND, regex_filter::from_options);
    registry.register_fn(unicode_normalizer::KIND, unicode_normalizer::UnicodeNormalizer::from_options);
    registry.register_fn(tool_call_filter::KIND, tool_call_filter::ToolCallFilter::from_options);
    registry.register_fn(batch_parts::KIND, batch_parts::BatchParts::from_options);
    registry.register_fn(language_detector::KIND, language_detector::LanguageDetector::from_options);
    registry.register_fn(system_prompt_scrubber::KIND, system_prompt_scrubber::from_options);
    registry.register_with_resources(moderation::KIND, moderation::Moderation::from_options);
    registry.register_with_resources(
        prompt_injection::KIND,
        prompt_injection::PromptInjectionDetector::from_options,
    );
    registry.register_with_resources(response_cache::KIND, response_cache::ResponseCache::from_options);
    registry.register_fn(structured_output::KIND, structured_output::StructuredOutput::from_options);
    registry.register_fn(pass_through::KIND, pass_through::PassThrough::from_options);
    registry.register_fn(token_limiter::KIND, token_limiter::TokenLimiter::from_options);
    registry.register_fn(tool_result_redactor::KIND, tool_result_redactor::ToolResultRedactor::from_options);
    registry.register_with_resources(dynamic_model::KIND, dynamic_model::DynamicModel::from_options);
    registry
        .register_fn(reasoning_transformer::KIND, reasoning_transformer::ReasoningTransformer::from_options);
    registry
        .register_fn(prefill_error_handler::KIND, prefill_error_handler::PrefillErrorHandler::from_options);
}
