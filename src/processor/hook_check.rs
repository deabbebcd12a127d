//! The hook list is checked, not trusted: [`Processor::hooks`] says which hooks the runtime calls,
//! so a hook implemented but missing from the list would silently never run. [`unlisted_hooks`]
//! calls every hook a processor does *not* list, once, on empty arguments: the trait's default
//! bodies say so when they run (`HookContext::note_default`), so a hook whose own body runs
//! instead is one the processor implements and forgot to list. The registry refuses to build such
//! a processor, naming the hook.
//!
//! Only the hooks a processor says it does not implement are called, and a default body finishes
//! at its first poll, so the check calls no processor code unless the list is wrong. A processor
//! whose list depends on its options (`token-limiter` without an output limit) calls
//! `ctx.note_default()` in the hooks it leaves out, and behaves as the default there.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt as _;
use serde_json::{Map, Value};

use super::{
    ApiErrorArgs, HookContext, InputArgs, InputStepArgs, LlmRequestArgs, LlmResponseArgs, OutputResultArgs,
    OutputStepArgs, OutputStreamArgs, OutputStreamEndArgs, OutputSummary, OutputWindowArgs, Processor,
    ToolResultArgs,
};
use crate::domain::{
    Chunk, DataChunk, FinishReason, Hook, MessageList, RunInfo, StepInput, ToolChoice, Usage,
};
use crate::model::ModelError;

/// The hooks `processor` implements but does not list in [`Processor::hooks`], in run order.
pub fn unlisted_hooks(processor: &dyn Processor) -> Vec<Hook> {
    let listed = processor.hooks();
    Hook::ALL.into_iter().filter(|hook| !listed.contains(*hook) && implements(processor, *hook)).collect()
}

/// True when a method of `hook` is not the trait's default: its body did not say so, or did not
/// finish at once.
fn implements(processor: &dyn Processor, hook: Hook) -> bool {
    let run = RunInfo::default();
    let step = StepInput {
        model: String::new(),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        active_tools: None,
        settings: Default::default(),
        provider_options: Value::Null,
        structured_output: None,
    };
    let summary = OutputSummary {
        text: String::new(),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
        steps: Vec::new(),
    };
    let error = ModelError::MissingScript;
    let part = Chunk::Data(DataChunk::new("data-hook-check", Value::Null));
    let methods: usize = if hook == Hook::ProcessOutputStream { 3 } else { 1 };
    (0..methods).any(|method| {
        let defaulted = AtomicBool::new(false);
        let (mut state, mut emitted, mut skipped) = (Map::new(), Vec::new(), Vec::new());
        let mut list = MessageList::new();
        let ctx = HookContext::probing(&run, &mut state, &mut emitted, &mut skipped, &defaulted);
        let finished = match (hook, method) {
            (Hook::ProcessInput, _) => {
                let args = InputArgs {
                    ctx,
                    messages: Vec::new(),
                    system_messages: Vec::new(),
                    tagged_system_messages: Default::default(),
                    message_list: &mut list,
                };
                processor.process_input(args).now_or_never().is_some()
            }
            (Hook::ProcessInputStep, _) => {
                let args = InputStepArgs {
                    ctx,
                    messages: Vec::new(),
                    system_messages: Vec::new(),
                    tagged_system_messages: Default::default(),
                    message_list: &mut list,
                    step_number: 0,
                    steps: &[],
                    step: &step,
                };
                processor.process_input_step(args).now_or_never().is_some()
            }
            (Hook::ProcessLlmRequest, _) => {
                let args = LlmRequestArgs {
                    ctx,
                    prompt: &[],
                    model: "",
                    step: &step,
                    step_number: 0,
                    steps: &[],
                    message_list: &list,
                };
                processor.process_llm_request(args).now_or_never().is_some()
            }
            (Hook::ProcessApiError, _) => {
                let args = ApiErrorArgs {
                    ctx,
                    error: &error,
                    messages: Vec::new(),
                    message_list: &mut list,
                    step_number: 0,
                    steps: &[],
                };
                processor.process_api_error(args).now_or_never().is_some()
            }
            (Hook::ProcessOutputStream, 0) => {
                let args =
                    OutputStreamArgs { ctx, part: part.clone(), stream_parts: &[], message_list: &list };
                processor.process_output_stream(args).now_or_never().is_some()
            }
            (Hook::ProcessOutputStream, 1) => {
                let args = OutputWindowArgs {
                    ctx,
                    parts: Vec::new(),
                    stream_parts: &[],
                    message_list: &list,
                    answered: None,
                };
                processor.process_output_window(args).now_or_never().is_some()
            }
            (Hook::ProcessOutputStream, _) => {
                let args = OutputStreamEndArgs { ctx, stream_parts: &[], message_list: &list };
                processor.process_output_stream_end(args).now_or_never().is_some()
            }
            (Hook::ProcessLlmResponse, _) => {
                let args = LlmResponseArgs {
                    ctx,
                    chunks: &[],
                    model: "",
                    step_number: 0,
                    steps: &[],
                    from_cache: false,
                };
                processor.process_llm_response(args).now_or_never().is_some()
            }
            (Hook::ProcessOutputStep, _) => {
                let args = OutputStepArgs {
                    ctx,
                    messages: Vec::new(),
                    message_list: &mut list,
                    step_number: 0,
                    finish_reason: FinishReason::Stop,
                    tool_calls: &[],
                    text: "",
                    usage: Usage::default(),
                    system_messages: Vec::new(),
                    tagged_system_messages: Default::default(),
                    steps: &[],
                };
                processor.process_output_step(args).now_or_never().is_some()
            }
            (Hook::ProcessToolResult, _) => {
                let args = ToolResultArgs {
                    ctx,
                    tool_name: "",
                    tool_call_id: "",
                    args: &Value::Null,
                    result: Value::Null,
                    is_error: false,
                    messages: Vec::new(),
                    message_list: &mut list,
                    system_messages: Vec::new(),
                    tagged_system_messages: Default::default(),
                    step_number: 0,
                    steps: &[],
                };
                processor.process_tool_result(args).now_or_never().is_some()
            }
            (Hook::ProcessOutputResult, _) => {
                let args =
                    OutputResultArgs { ctx, messages: Vec::new(), message_list: &mut list, result: &summary };
                processor.process_output_result(args).now_or_never().is_some()
            }
        };
        !(finished && defaulted.load(Ordering::Relaxed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::HookSet;
    use crate::processor::{HookError, ProcessorRegistry};

    /// Implements processOutputStep but lists only processInput.
    struct Forgetful;

    #[async_trait::async_trait]
    impl Processor for Forgetful {
        fn id(&self) -> &str {
            "forgetful"
        }

        fn hooks(&self) -> HookSet {
            HookSet::of(&[Hook::ProcessInput])
        }

        async fn process_output_step(
            &self,
            _args: OutputStepArgs<'_>,
        ) -> Result<Option<Vec<crate::domain::Message>>, HookError> {
            Ok(None)
        }
    }

    /// A hook implemented but not listed is found, and the registry refuses to build the
    /// processor, naming the hook; a correct list passes.
    #[test]
    fn an_unlisted_hook_is_found_and_refused() {
        assert_eq!(unlisted_hooks(&Forgetful), [Hook::ProcessOutputStep]);
        let mut registry = ProcessorRegistry::default();
        registry.register_fn("forgetful", |_, _| Ok(std::sync::Arc::new(Forgetful) as _));
        let error = registry.build("forgetful", "forgetful", toml::Table::new()).unwrap_err().to_string();
        assert!(error.contains("processOutputStep") && error.contains("hooks()"), "{error}");
        let builtins = ProcessorRegistry::with_builtins();
        let content_filter: toml::Table = toml::from_str("blocked_words = [\"x\"]").unwrap();
        let built = builtins.build("content-filter", "content-filter", content_filter).unwrap();
        assert!(unlisted_hooks(built.as_ref()).is_empty());
    }

    /// Every built-in kind lists every hook it implements (each built with the options it needs).
    #[test]
    fn builtin_kinds_list_every_hook_they_implement() {
        let options = [
            ("content-filter", "blocked_words = [\"x\"]"),
            ("language-detector", "allowed = [\"eng\"]"),
            ("moderation", "judge = { model = \"mock/echo\" }"),
            ("quality-guardrail", "min_chars = 3"),
            ("regex-filter", "patterns = [{ name = \"x\", pattern = \"x\" }]"),
            ("structured-output", "schema = { type = \"object\" }"),
            ("token-limiter", "input_limit = 100"),
            ("tool-result-redactor", "fields = [\"ssn\"]"),
            ("dynamic-model", "first_step = \"mock/echo\""),
        ];
        let registry = ProcessorRegistry::with_builtins();
        let mut checked = Vec::new();
        for kind in registry.kinds() {
            let table = options.iter().find(|(name, _)| *name == kind).map_or("", |(_, table)| table);
            match registry.build(kind, kind, toml::from_str(table).unwrap()) {
                Ok(processor) => {
                    assert!(unlisted_hooks(processor.as_ref()).is_empty(), "{kind}");
                    checked.push(kind);
                }
                // response-cache needs a store, which this registry does not lend.
                Err(error) => assert_eq!(kind, "response-cache", "{error}"),
            }
        }
        assert_eq!(checked.len(), registry.kinds().count() - 1, "{checked:?}");
    }
}
