//! Processors: the [`Processor`] trait with its nine hooks, the arguments and results of each
//! hook, the registry that builds processors from config by kind, and the built-in processors.
//!
//! A processor implements any subset of the hooks (each defaults to "unchanged") and declares
//! that subset in [`Processor::hooks`], so the runtime never calls a hook it does not implement.
//! The registry checks the list when it builds a processor ([`hook_check`]): a hook implemented
//! but not listed is an error naming it.
//! Aborting is returning [`HookError::Abort`]; the runtime turns it into a tripwire.

mod args;
pub mod builtin;
mod context;
pub mod hook_check;
mod registry;
mod window_ahead;

use std::fmt;

pub use self::args::{
    ApiErrorArgs, ApiErrorOutcome, InputArgs, InputOutcome, InputStepArgs, LlmRequestArgs, LlmRequestOutcome,
    LlmResponseArgs, OutputResultArgs, OutputStepArgs, OutputStreamArgs, OutputStreamEndArgs, OutputSummary,
    OutputWindowArgs, OutputWindowSendArgs, StepOverrides, ToolResultArgs, ToolResultOutcome,
};
pub use self::context::{Abort, CallNote, CallNoted, HookContext, HookError, SkippedProcessor};
pub use self::registry::{
    BuildError, ProcessorFactory, ProcessorRegistry, ProcessorResources, parse_options,
};
pub use self::window_ahead::{WindowAnswered, WindowInFlight};
use crate::domain::{Chunk, HookSet, Message, RunInfo, StreamWindow};

/// Something that takes part in runs at one or more hooks.
///
/// `state` (in each hook's context) is per processor id and per run, shared by all hooks of the
/// processor. Two processors with the same id share it.
#[async_trait::async_trait]
pub trait Processor: Send + Sync {
    /// The processor's id: the key of its state and the `processor_id` of its tripwires.
    fn id(&self) -> &str;

    /// The hooks this processor implements; the others are never called.
    fn hooks(&self) -> HookSet;

    /// The hooks it takes part in for `run` (some of [`Processor::hooks`]), asked once as the run
    /// starts: by default all of them. A remote processor answers for the instances connected
    /// then, so a run does not prepare calls to hooks no instance implements.
    fn hooks_for(&self, run: &RunInfo) -> HookSet {
        let _ = run;
        self.hooks()
    }

    /// When true, `processOutputStream` also receives custom `data-*` chunks of this run (a
    /// remote processor answers for the instance serving the run).
    fn process_data_parts(&self, run: &RunInfo) -> bool {
        let _ = run;
        false
    }

    /// Once per run, before the loop.
    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        args.ctx.note_default();
        Ok(InputOutcome::Unchanged)
    }

    /// At each step, before the prompt is built.
    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        args.ctx.note_default();
        Ok(StepOverrides::default())
    }

    /// At each step, on the outgoing prompt.
    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        args.ctx.note_default();
        Ok(LlmRequestOutcome::default())
    }

    /// At each step, after the model's stream completed.
    async fn process_llm_response(&self, args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        args.ctx.note_default();
        Ok(())
    }

    /// When the model rejects a call (error processors only).
    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        args.ctx.note_default();
        Ok(ApiErrorOutcome::default())
    }

    /// On every chunk: return it (maybe rewritten) to pass it on, `None` to drop it.
    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        args.ctx.note_default();
        Ok(Some(args.part))
    }

    /// How this processor takes `processOutputStream` chunks in `run`: `None` (the default) one
    /// by one through [`Processor::process_output_stream`], or in windows through
    /// [`Processor::process_output_window`]. Asked whenever a window would open.
    fn stream_window(&self, _run: &RunInfo) -> Option<StreamWindow> {
        None
    }

    /// A closed window of chunks: return the chunks that replace it, in order (fewer, more, or
    /// rewritten). The default passes each through [`Processor::process_output_stream`].
    async fn process_output_window(&self, mut args: OutputWindowArgs<'_>) -> Result<Vec<Chunk>, HookError> {
        args.ctx.note_default();
        let seen_before = args.stream_parts.len() - args.parts.len();
        let mut kept = Vec::with_capacity(args.parts.len());
        for (index, part) in args.parts.into_iter().enumerate() {
            let stream_parts = &args.stream_parts[..=seen_before + index];
            let single = OutputStreamArgs {
                ctx: args.ctx.reborrow(),
                part,
                stream_parts,
                message_list: args.message_list,
            };
            kept.extend(self.process_output_stream(single).await?);
        }
        Ok(kept)
    }

    /// Sends a closed window on its way without waiting for its answer, so that the run reads on
    /// while it is answered. The runtime keeps the windows in flight in order and hands each
    /// answer back to [`Processor::process_output_window`] (`answered`), unless an earlier
    /// window's answer changed the state this one was sent with: then it calls that hook again
    /// without it, and sends no more windows of this processor ahead in the run. `None` (the
    /// default): windows are answered only when that hook is called.
    fn send_output_window(&self, args: OutputWindowSendArgs<'_>) -> Option<WindowInFlight> {
        let _ = args;
        None
    }

    /// The model's stream of a step ended: return the chunks this processor still holds back (a
    /// redactor waiting to see whether a match continues), to go out before the step ends.
    async fn process_output_stream_end(
        &self,
        args: OutputStreamEndArgs<'_>,
    ) -> Result<Vec<Chunk>, HookError> {
        args.ctx.note_default();
        Ok(Vec::new())
    }

    /// After each model step, before tools. `Some(messages)` replaces all messages.
    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        args.ctx.note_default();
        Ok(None)
    }

    /// After each tool call, before its result is used.
    async fn process_tool_result(&self, args: ToolResultArgs<'_>) -> Result<ToolResultOutcome, HookError> {
        args.ctx.note_default();
        Ok(ToolResultOutcome::default())
    }

    /// Once, after the run. `Some(messages)` replaces the response messages.
    async fn process_output_result(
        &self,
        args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        args.ctx.note_default();
        Ok(None)
    }
}

impl fmt::Debug for dyn Processor {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("Processor").field("id", &self.id()).finish()
    }
}
