//! Processor kinds for tests: a probe that records every hook call, and processors that abort or
//! break in a chosen hook.

use std::sync::Arc;

use agentwire::domain::{Chunk, Hook, HookSet, Message};
use agentwire::processor::{
    Abort, ApiErrorArgs, ApiErrorOutcome, HookContext, HookError, InputArgs, InputOutcome, InputStepArgs,
    LlmRequestArgs, LlmRequestOutcome, LlmResponseArgs, OutputResultArgs, OutputStepArgs, OutputStreamArgs,
    Processor, StepOverrides, ToolResultArgs, ToolResultOutcome,
};
use serde_json::json;

use super::{Log, TestServerBuilder};

/// Registers `probe`, `abort-in` and `fail-in`.
pub fn register(builder: TestServerBuilder) -> TestServerBuilder {
    builder
        .kind("probe", |id, options, log| {
            let data_parts = options.get("data_parts").and_then(toml::Value::as_bool).unwrap_or(false);
            Arc::new(Probe { id: id.to_owned(), log, data_parts })
        })
        .kind("abort-in", |id, options, _log| Arc::new(Trap::from_options(id, &options, false)))
        .kind("fail-in", |id, options, _log| Arc::new(Trap::from_options(id, &options, true)))
}

/// Records `<id>:<hook>` for every call (with the step or chunk type where there is one) and
/// changes nothing.
pub struct Probe {
    id: String,
    log: Log,
    data_parts: bool,
}

impl Probe {
    fn record(&self, hook: Hook, detail: impl std::fmt::Display) {
        self.log.push(format!("{}:{hook}{detail}", self.id));
    }
}

#[async_trait::async_trait]
impl Processor for Probe {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::all()
    }

    fn process_data_parts(&self, _run: &agentwire::domain::RunInfo) -> bool {
        self.data_parts
    }

    async fn process_input(&self, _args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        self.record(Hook::ProcessInput, "");
        Ok(InputOutcome::Unchanged)
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        self.record(Hook::ProcessInputStep, format!(":{}", args.step_number));
        Ok(StepOverrides::default())
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        self.record(Hook::ProcessLlmRequest, format!(":{}", args.step_number));
        Ok(LlmRequestOutcome::default())
    }

    async fn process_llm_response(&self, args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        self.record(Hook::ProcessLlmResponse, format!(":{}", args.step_number));
        Ok(())
    }

    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        self.record(Hook::ProcessApiError, format!(":{}", args.step_number));
        Ok(ApiErrorOutcome::default())
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        self.record(Hook::ProcessOutputStream, format!(":{}", args.part.type_name()));
        Ok(Some(args.part))
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        self.record(Hook::ProcessOutputStep, format!(":{}", args.step_number));
        Ok(None)
    }

    async fn process_tool_result(&self, args: ToolResultArgs<'_>) -> Result<ToolResultOutcome, HookError> {
        self.record(Hook::ProcessToolResult, format!(":{}", args.tool_name));
        Ok(ToolResultOutcome::default())
    }

    async fn process_output_result(
        &self,
        _args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        self.record(Hook::ProcessOutputResult, "");
        Ok(None)
    }
}

/// Aborts (`abort-in`) or breaks (`fail-in`; with `panic = true` it panics) in one hook, named by
/// the `hook` option; `retry = true` asks for a retry, `silent = true` aborts with no reason.
/// The stream hook fires on the first text delta.
pub struct Trap {
    id: String,
    hook: Hook,
    retry: bool,
    fail: bool,
    panic: bool,
    silent: bool,
}

impl Trap {
    fn from_options(id: &str, options: &toml::Table, fail: bool) -> Trap {
        let hook_name = options.get("hook").and_then(toml::Value::as_str).expect("`hook` option");
        let flag = |name: &str| options.get(name).and_then(toml::Value::as_bool).unwrap_or(false);
        Trap {
            id: id.to_owned(),
            hook: Hook::from_name(hook_name).unwrap_or_else(|| panic!("unknown hook {hook_name}")),
            retry: flag("retry"),
            fail,
            panic: flag("panic"),
            silent: flag("silent"),
        }
    }

    /// Springs in the trap's own hook; any other hook behaves as the trait's default (and says
    /// so, since the trap lists only its own hook).
    fn spring<T: Default>(&self, ctx: &HookContext<'_>, hook: Hook) -> Result<T, HookError> {
        if hook != self.hook {
            ctx.note_default();
            return Ok(T::default());
        }
        if self.panic {
            panic!("trap {} in {}", self.id, self.hook);
        }
        if self.fail {
            return Err(HookError::Failed("returned malformed data".to_owned()));
        }
        let reason = if self.silent { String::new() } else { format!("aborted in {}", self.hook) };
        let mut abort = Abort::new(reason).metadata(json!({ "hook": self.hook.name() }));
        if self.retry {
            abort = abort.retry();
        }
        Err(abort.into())
    }
}

#[async_trait::async_trait]
impl Processor for Trap {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[self.hook])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        self.spring(&args.ctx, Hook::ProcessInput)
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        self.spring(&args.ctx, Hook::ProcessInputStep)
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        self.spring(&args.ctx, Hook::ProcessLlmRequest)
    }

    async fn process_llm_response(&self, args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        self.spring(&args.ctx, Hook::ProcessLlmResponse)
    }

    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        self.spring(&args.ctx, Hook::ProcessApiError)
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        match args.part {
            Chunk::TextDelta { .. } if self.hook == Hook::ProcessOutputStream => {
                self.spring(&args.ctx, Hook::ProcessOutputStream)
            }
            part => {
                args.ctx.note_default();
                Ok(Some(part))
            }
        }
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        self.spring(&args.ctx, Hook::ProcessOutputStep)
    }

    async fn process_tool_result(&self, args: ToolResultArgs<'_>) -> Result<ToolResultOutcome, HookError> {
        self.spring(&args.ctx, Hook::ProcessToolResult)
    }

    async fn process_output_result(
        &self,
        args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        self.spring(&args.ctx, Hook::ProcessOutputResult)
    }
}
