//! [`RemoteProcessor`]: a remote processor as a [`Processor`] like any built-in, so the loop
//! cannot tell them apart. It dispatches each hook call to the connected instance with the fewest
//! calls in flight, waits up to its timeout, applies the answer the hook allows, and applies its
//! failure policy when no instance answers: `closed` (a tripwire saying why) or `open` (skipped,
//! and a transient `data-processor-skipped` chunk saying so).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::hook_call::{HookArgs, HookCall, HookResult, Outcome, Replacement};
use super::pool::RemotePool;
use super::session::{CallFailure, Session};
use crate::domain::{
    Chunk, DataChunk, Hook, HookSet, Message, MessageList, MessageSource, ReconcileScope, RunInfo, StepInput,
    StreamWindow, now_millis,
};
use crate::model::ModelError;
use crate::processor::{
    Abort, ApiErrorArgs, ApiErrorOutcome, BuildError, HookContext, HookError, InputArgs, InputOutcome,
    InputStepArgs, LlmRequestArgs, LlmRequestOutcome, LlmResponseArgs, OutputResultArgs, OutputStepArgs,
    OutputStreamArgs, OutputWindowArgs, OutputWindowSendArgs, Processor, SkippedProcessor, StepOverrides,
    ToolResultArgs, ToolResultOutcome, WindowAnswered, WindowInFlight, parse_options,
};
use crate::telemetry::propagation;

/// What happens when no instance answers in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailurePolicy {
    /// The run ends in a tripwire that says which processor was unavailable or too slow.
    #[default]
    Closed,
    /// The processor is skipped for that call, and the stream says so.
    Open,
}

/// Whether a run waits for the processor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The run waits for each answer (the default).
    #[default]
    Blocking,
    /// Calls are sent and never awaited — for audit and logging; answers are ignored, and calls
    /// that find the instance's queue full are dropped and counted.
    Observe,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    remote_id: Option<String>,
    #[serde(default = "default_timeout_ms")]
    timeout_ms: u64,
    #[serde(default)]
    on_failure: FailurePolicy,
    /// Per hook (by contract name), what differs from the processor's own settings.
    #[serde(default)]
    hooks: std::collections::BTreeMap<String, HookOverrides>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookOverrides {
    mode: Option<Mode>,
    timeout_ms: Option<u64>,
    on_failure: Option<FailurePolicy>,
}

fn default_timeout_ms() -> u64 {
    1000
}

/// How one hook of a remote processor is called.
#[derive(Debug, Clone, Copy)]
struct HookPolicy {
    timeout: Duration,
    on_failure: FailurePolicy,
    mode: Mode,
}

fn timeout_of(field: &str, timeout_ms: u64) -> Result<Duration, String> {
    if timeout_ms == 0 {
        return Err(format!("`{field}` must be positive"));
    }
    Ok(Duration::from_millis(timeout_ms))
}

impl Options {
    /// The policy of every hook, in [`Hook::ALL`] order.
    fn policies(&self) -> Result<[HookPolicy; Hook::ALL.len()], String> {
        let base = HookPolicy {
            timeout: timeout_of("timeout_ms", self.timeout_ms)?,
            on_failure: self.on_failure,
            mode: self.mode,
        };
        let mut policies = [base; Hook::ALL.len()];
        for (name, overrides) in &self.hooks {
            let hook = Hook::from_name(name).ok_or_else(|| {
                let names: Vec<&str> = Hook::ALL.iter().map(|hook| hook.name()).collect();
                format!("`hooks.{name}`: unknown hook (one of {})", names.join(", "))
            })?;
            let policy = &mut policies[hook.index()];
            if let Some(timeout_ms) = overrides.timeout_ms {
                policy.timeout = timeout_of(&format!("hooks.{name}.timeout_ms"), timeout_ms)?;
            }
            policy.on_failure = overrides.on_failure.unwrap_or(policy.on_failure);
            policy.mode = overrides.mode.unwrap_or(policy.mode);
        }
        Ok(policies)
    }
}

/// How many runs' instances a processor remembers (oldest forgotten first).
const STICKY_RUNS: usize = 4096;

/// Which instance serves each live run, so that a run keeps its instance while it lives.
#[derive(Debug, Default)]
struct Stickiness {
    by_run: HashMap<String, Weak<Session>>,
    order: VecDeque<String>,
}

impl Stickiness {
    /// The run's instance, if it is still connected and serves `hook`.
    fn get(&self, run_id: &str, hook: Hook) -> Option<Arc<Session>> {
        self.by_run
            .get(run_id)
            .and_then(Weak::upgrade)
            .filter(|session| session.hooks.contains(hook) && !session.is_closed())
    }

    fn remember(&mut self, run_id: &str, session: &Arc<Session>) {
        if self.by_run.insert(run_id.to_owned(), Arc::downgrade(session)).is_none() {
            self.order.push_back(run_id.to_owned());
            if self.order.len() > STICKY_RUNS
                && let Some(oldest) = self.order.pop_front()
            {
                self.by_run.remove(&oldest);
            }
        }
    }
}

/// A processor served by connected instances.
#[derive(Debug)]
pub struct RemoteProcessor {
    /// The definition's name: the processor's id in runs (state, tripwires).
    id: String,
    /// The id instances connect as.
    remote_id: String,
    pool: Arc<RemotePool>,
    /// By [`Hook::index`].
    policies: [HookPolicy; Hook::ALL.len()],
    sticky: Mutex<Stickiness>,
}

/// How a call sent to an instance ended.
#[derive(Debug)]
enum Called {
    Answered(HookResult),
    Gone,
    Mismatched,
    TimedOut,
}

/// Sends `call` to `session` and waits up to `timeout` for the answer.
async fn called(session: &Session, call: HookCall, timeout: Duration) -> Called {
    match tokio::time::timeout(timeout, session.call(call)).await {
        Ok(Ok(reply)) => Called::Answered(reply),
        Ok(Err(CallFailure::Gone)) => Called::Gone,
        Ok(Err(CallFailure::Mismatched)) => Called::Mismatched,
        Err(_) => {
            session.record_error();
            Called::TimedOut
        }
    }
}

/// A window sent ahead, as it came back: the instance it went to, and how the call ended.
struct SentAhead {
    session: Arc<Session>,
    answer: Called,
}

/// Why a call could not be answered.
enum Unanswered {
    NoInstance,
    Draining,
    TimedOut(Duration),
    /// The instance went away; with what it sent when the server broke the session off.
    Disconnected(Option<String>),
}

impl RemoteProcessor {
    /// Builds a `remote` definition named `id`; registers its remote id with the pool.
    pub fn from_options(
        id: &str,
        options: toml::Table,
        pool: &Arc<RemotePool>,
    ) -> Result<RemoteProcessor, BuildError> {
        let options: Options = parse_options(options)?;
        let policies = options.policies()?;
        let remote_id = options.remote_id.unwrap_or_else(|| id.to_owned());
        pool.expect(&remote_id);
        // A hook that waits for the answer and fails closed: runs cannot do without an instance.
        if policies
            .iter()
            .any(|policy| policy.mode == Mode::Blocking && policy.on_failure == FailurePolicy::Closed)
        {
            pool.need(&remote_id);
        }
        Ok(RemoteProcessor {
            id: id.to_owned(),
            remote_id,
            pool: Arc::clone(pool),
            policies,
            sticky: Mutex::new(Stickiness::default()),
        })
    }

    fn policy(&self, hook: Hook) -> HookPolicy {
        self.policies[hook.index()]
    }

    /// The instance serving `run` at `hook`: the one it already uses, else the least loaded
    /// (which it then keeps). `failed` is an instance that just went away.
    fn session_for(&self, run_id: &str, hook: Hook, failed: Option<&Arc<Session>>) -> Option<Arc<Session>> {
        if self.pool.is_draining() {
            return None;
        }
        let sticky = match failed {
            None => self.sticky.lock().expect("sticky lock").get(run_id, hook),
            Some(_) => None,
        };
        let session = sticky.or_else(|| self.pool.pick(&self.remote_id, hook, failed))?;
        self.sticky.lock().expect("sticky lock").remember(run_id, &session);
        Some(session)
    }

    /// Calls `hook` on an instance; `None` when the processor does not take part (no instance
    /// implements the hook while others are connected, or the open policy skipped it).
    async fn invoke(
        &self,
        ctx: &mut HookContext<'_>,
        hook: Hook,
        step: u32,
        args: HookArgs,
    ) -> Result<Option<Outcome>, HookError> {
        let call = self.hook_call(ctx, hook, step, args);
        self.invoke_call(ctx, hook, call, None).await
    }

    /// The call of `hook` with `args`, as of `ctx`.
    fn hook_call(&self, ctx: &HookContext<'_>, hook: Hook, step: u32, args: HookArgs) -> HookCall {
        let deadline =
            now_millis() + i64::try_from(self.policy(hook).timeout.as_millis()).unwrap_or(i64::MAX);
        HookCall {
            call_id: 0,
            hook,
            run: ctx.run.clone(),
            step,
            deadline_unix_ms: deadline,
            retry_count: ctx.retry_count,
            state: ctx.state.clone(),
            args,
            trace_context: propagation::outgoing(&ctx.run.trace_context),
        }
    }

    /// Sends `call` to the run's instance and settles the answer; `failed` is an instance that
    /// went away with it already (it moves to another instance once).
    async fn invoke_call(
        &self,
        ctx: &mut HookContext<'_>,
        hook: Hook,
        call: HookCall,
        mut failed: Option<Arc<Session>>,
    ) -> Result<Option<Outcome>, HookError> {
        let policy = self.policy(hook);
        let unanswered = loop {
            let Some(session) = self.session_for(&call.run.run_id, hook, failed.as_ref()) else {
                let connected = self.pool.sessions(&self.remote_id);
                if let Some(failed) = &failed {
                    break Unanswered::Disconnected(failed.broken());
                }
                if !connected.is_empty() && connected.iter().all(|session| !session.hooks.contains(hook)) {
                    return Ok(None); // connected, but no instance implements this hook
                }
                if self.pool.is_draining() {
                    break Unanswered::Draining;
                }
                break Unanswered::NoInstance;
            };
            if self.observed_on(&session, hook) {
                ctx.note_observed(&session.instance_id);
                session.observe(call);
                return Ok(None);
            }
            match called(&session, call.clone(), policy.timeout).await {
                // The instance went away mid-call: move the call to another one, once.
                Called::Gone if failed.is_none() => failed = Some(session),
                answer => return self.settle(ctx, hook, &session, answer),
            }
        };
        self.unanswered(ctx, hook, unanswered).map(|()| None)
    }

    /// True when calls of `hook` to `session` are sent and never awaited: observe mode, by the
    /// processor's policy or by the instance's Hello.
    fn observed_on(&self, session: &Session, hook: Hook) -> bool {
        self.policy(hook).mode == Mode::Observe || session.observed.contains(hook)
    }

    /// What an instance's answer (or its absence) to a call of `hook` means for the run.
    fn settle(
        &self,
        ctx: &mut HookContext<'_>,
        hook: Hook,
        session: &Session,
        answer: Called,
    ) -> Result<Option<Outcome>, HookError> {
        match answer {
            Called::Answered(reply) => {
                ctx.note_instance(&session.instance_id);
                self.apply(ctx, hook, reply).map(Some)
            }
            Called::Gone => {
                self.unanswered(ctx, hook, Unanswered::Disconnected(session.broken())).map(|()| None)
            }
            Called::Mismatched => Err(HookError::Failed(format!(
                "remote processor `{}` answered a hook call with a tool result",
                self.remote_id
            ))),
            Called::TimedOut => {
                self.unanswered(ctx, hook, Unanswered::TimedOut(self.policy(hook).timeout)).map(|()| None)
            }
        }
    }

    fn apply(&self, ctx: &mut HookContext<'_>, hook: Hook, reply: HookResult) -> Result<Outcome, HookError> {
        if let Some(refusal) = outcome_refusal(hook, &reply.outcome) {
            return Err(HookError::Failed(format!(
                "remote processor `{}` answered {hook} with {refusal}",
                self.remote_id
            )));
        }
        if let Some(state) = reply.state {
            *ctx.state = state;
        }
        for chunk in reply.emitted {
            ctx.emit(chunk);
        }
        for warning in reply.warnings {
            ctx.warn(warning);
        }
        match reply.outcome {
            Outcome::Abort(abort) => Err(HookError::Abort(abort)),
            Outcome::Failure(message) => {
                Err(HookError::Failed(format!("remote processor `{}` failed: {message}", self.remote_id)))
            }
            outcome => Ok(outcome),
        }
    }

    fn unanswered(
        &self,
        ctx: &mut HookContext<'_>,
        hook: Hook,
        unanswered: Unanswered,
    ) -> Result<(), HookError> {
        let (cause, why) = match unanswered {
            Unanswered::NoInstance => ("unavailable", "is unavailable (no instance connected)".to_owned()),
            Unanswered::Draining => {
                ("unavailable", "is unavailable (the server is shutting down)".to_owned())
            }
            Unanswered::Disconnected(None) => ("disconnected", "disconnected before answering".to_owned()),
            Unanswered::Disconnected(Some(broken)) => {
                ("disconnected", format!("was disconnected before answering: it sent {broken}"))
            }
            Unanswered::TimedOut(timeout) => {
                ("timeout", format!("timed out after {} ms", timeout.as_millis()))
            }
        };
        let details = json!({ "processor": self.remote_id, "hook": hook.name(), "cause": cause });
        match self.policy(hook).on_failure {
            FailurePolicy::Closed => {
                let reason = format!("remote processor `{}` {why} in {hook}", self.remote_id);
                Err(Abort::new(reason).metadata(details).into())
            }
            FailurePolicy::Open => {
                ctx.report_skipped(SkippedProcessor {
                    processor_id: self.id.clone(),
                    hook: hook.name().to_owned(),
                    cause: cause.to_owned(),
                });
                ctx.emit(DataChunk::new("processor-skipped", details).transient());
                Ok(())
            }
        }
    }

    fn replacement(outcome: Option<Outcome>) -> Option<Replacement> {
        match outcome {
            Some(Outcome::Replace(replacement)) => Some(*replacement),
            _ => None,
        }
    }

    /// The replacement of an answer, its tagged system messages already applied to `list`.
    fn replacement_in(outcome: Option<Outcome>, list: &mut MessageList) -> Option<Replacement> {
        let mut replacement = RemoteProcessor::replacement(outcome)?;
        replacement.apply_tagged_system_messages(list);
        Some(replacement)
    }
}

#[async_trait::async_trait]
impl Processor for RemoteProcessor {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::all()
    }

    /// The hooks of the instances connected as the run starts; every hook while none is (each
    /// call then meets the failure policy) or while the server drains.
    fn hooks_for(&self, _run: &RunInfo) -> HookSet {
        if self.pool.is_draining() {
            return HookSet::all();
        }
        self.pool.hooks_served(&self.remote_id).unwrap_or_else(HookSet::all)
    }

    fn process_data_parts(&self, run: &RunInfo) -> bool {
        self.session_for(&run.run_id, Hook::ProcessOutputStream, None)
            .is_some_and(|session| session.data_parts)
    }

    async fn process_input(&self, mut args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            tagged_system_messages: tagged(args.tagged_system_messages),
            messages: args.messages,
            system_messages: args.system_messages,
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessInput, 0, remote).await?;
        Ok(match RemoteProcessor::replacement_in(outcome, args.message_list) {
            Some(Replacement {
                messages: Some(messages), system_messages: Some(system_messages), ..
            }) => InputOutcome::MessagesAndSystem { messages, system_messages },
            Some(Replacement { messages: Some(messages), .. }) => InputOutcome::Messages(messages),
            Some(Replacement { system_messages: Some(system_messages), .. }) => {
                let messages = args.message_list.snapshot(ReconcileScope::Input);
                InputOutcome::MessagesAndSystem { messages, system_messages }
            }
            _ => InputOutcome::Unchanged,
        })
    }

    async fn process_input_step(&self, mut args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            tagged_system_messages: tagged(args.tagged_system_messages),
            messages: args.messages,
            system_messages: args.system_messages,
            model: args.step.model.clone(),
            tools: args.step.tools.iter().map(|tool| tool.name.clone()).collect(),
            steps: args.steps.to_vec(),
            step_input: Some(args.step.clone()),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessInputStep, args.step_number, remote).await?;
        let Some(replacement) = RemoteProcessor::replacement_in(outcome, args.message_list) else {
            return Ok(StepOverrides::default());
        };
        Ok(StepOverrides {
            model: replacement.model,
            tools: replacement.tools,
            tool_choice: replacement.tool_choice,
            active_tools: replacement.active_tools,
            messages: replacement.messages,
            system_messages: replacement.system_messages,
            model_settings: replacement.model_settings,
            provider_options: replacement.provider_options,
            structured_output: replacement.structured_output,
        })
    }

    async fn process_llm_request(
        &self,
        mut args: LlmRequestArgs<'_>,
    ) -> Result<LlmRequestOutcome, HookError> {
        let step_input = StepInput { model: args.model.to_owned(), ..args.step.clone() };
        let remote = HookArgs {
            prompt: args.prompt.to_vec(),
            model: args.model.to_owned(),
            steps: args.steps.to_vec(),
            step_input: Some(step_input),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessLlmRequest, args.step_number, remote).await?;
        let replacement = RemoteProcessor::replacement(outcome).unwrap_or_default();
        Ok(LlmRequestOutcome { prompt: replacement.prompt, response: replacement.response })
    }

    async fn process_llm_response(&self, mut args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        let remote = HookArgs {
            chunks: args.chunks.to_vec(),
            model: args.model.to_owned(),
            steps: args.steps.to_vec(),
            ..HookArgs::default()
        };
        self.invoke(&mut args.ctx, Hook::ProcessLlmResponse, args.step_number, remote).await?;
        Ok(())
    }

    async fn process_api_error(&self, mut args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        let error = match args.error {
            ModelError::Rejected { status, message, .. } => (i32::from(*status), message.clone()),
            other => (0, other.to_string()),
        };
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            messages: args.messages,
            error: Some(error),
            steps: args.steps.to_vec(),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessApiError, args.step_number, remote).await?;
        match outcome {
            Some(Outcome::RetryApiCall(messages)) => {
                if let Some(messages) = messages {
                    args.message_list.reconcile(ReconcileScope::All, messages, MessageSource::Input);
                }
                Ok(ApiErrorOutcome { retry: true })
            }
            _ => Ok(ApiErrorOutcome { retry: false }),
        }
    }

    async fn process_output_stream(
        &self,
        mut args: OutputStreamArgs<'_>,
    ) -> Result<Option<Chunk>, HookError> {
        let remote = HookArgs { part: Some(args.part.clone()), ..HookArgs::default() };
        match self.invoke(&mut args.ctx, Hook::ProcessOutputStream, 0, remote).await? {
            Some(Outcome::Drop) => Ok(None),
            Some(Outcome::Replace(replacement)) => Ok(Some(replacement.part.unwrap_or(args.part))),
            _ => Ok(Some(args.part)),
        }
    }

    fn stream_window(&self, run: &RunInfo) -> Option<StreamWindow> {
        let hook = Hook::ProcessOutputStream;
        let window = self.session_for(&run.run_id, hook, None)?.window?;
        Some(if self.policy(hook).mode == Mode::Observe { window.observed() } else { window })
    }

    fn send_output_window(&self, args: OutputWindowSendArgs<'_>) -> Option<WindowInFlight> {
        let hook = Hook::ProcessOutputStream;
        let policy = self.policy(hook);
        let session = self.session_for(&args.ctx.run.run_id, hook, None)?;
        if self.observed_on(&session, hook) {
            return None;
        }
        let remote = HookArgs { chunks: args.parts.to_vec(), ..HookArgs::default() };
        let call = self.hook_call(&args.ctx, hook, 0, remote);
        Some(WindowInFlight::new(async move {
            let answer = called(&session, call, policy.timeout).await;
            WindowAnswered::new(SentAhead { session, answer })
        }))
    }

    async fn process_output_window(&self, mut args: OutputWindowArgs<'_>) -> Result<Vec<Chunk>, HookError> {
        let hook = Hook::ProcessOutputStream;
        let outcome = match args.answered.take().and_then(WindowAnswered::take::<SentAhead>) {
            Some(SentAhead { session, answer }) if !matches!(answer, Called::Gone) => {
                self.settle(&mut args.ctx, hook, &session, answer)?
            }
            // Not sent ahead, or its instance went away with it: it goes now (to another
            // instance, once, in that case; the state is still the one it was sent with).
            sent => {
                let gone = sent.map(|sent| sent.session);
                let remote = HookArgs { chunks: args.parts.clone(), ..HookArgs::default() };
                let call = self.hook_call(&args.ctx, hook, 0, remote);
                self.invoke_call(&mut args.ctx, hook, call, gone).await?
            }
        };
        match outcome {
            Some(Outcome::Drop) => Ok(Vec::new()),
            Some(Outcome::Replace(replacement)) => replacement.parts.ok_or_else(|| {
                HookError::Failed(format!(
                    "remote processor `{}` answered a window without `replace.parts`",
                    self.remote_id
                ))
            }),
            _ => Ok(args.parts),
        }
    }

    async fn process_output_step(
        &self,
        mut args: OutputStepArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            tagged_system_messages: tagged(args.tagged_system_messages),
            messages: args.messages,
            system_messages: args.system_messages,
            text: args.text.to_owned(),
            finish_reason: Some(args.finish_reason),
            usage: Some(args.usage),
            tool_calls: args.tool_calls.to_vec(),
            steps: args.steps.to_vec(),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessOutputStep, args.step_number, remote).await?;
        Ok(RemoteProcessor::replacement_in(outcome, args.message_list)
            .and_then(|replacement| replacement.messages))
    }

    async fn process_tool_result(
        &self,
        mut args: ToolResultArgs<'_>,
    ) -> Result<ToolResultOutcome, HookError> {
        let call = crate::domain::ToolCall {
            tool_call_id: args.tool_call_id.to_owned(),
            tool_name: args.tool_name.to_owned(),
            args: args.args.clone(),
        };
        let result = crate::domain::ToolResult {
            tool_call_id: args.tool_call_id.to_owned(),
            tool_name: args.tool_name.to_owned(),
            result: args.result,
            is_error: args.is_error,
        };
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            tagged_system_messages: tagged(args.tagged_system_messages),
            messages: args.messages,
            system_messages: args.system_messages,
            tool_call: Some(call),
            tool_result: Some(result),
            steps: args.steps.to_vec(),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessToolResult, args.step_number, remote).await?;
        let replacement = RemoteProcessor::replacement_in(outcome, args.message_list).unwrap_or_default();
        Ok(ToolResultOutcome { result: replacement.tool_result, messages: replacement.messages })
    }

    async fn process_output_result(
        &self,
        mut args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        let remote = HookArgs {
            message_sources: sources(&args.messages, args.message_list),
            messages: args.messages,
            text: args.result.text.clone(),
            finish_reason: Some(args.result.finish_reason),
            usage: Some(args.result.usage),
            steps: args.result.steps.clone(),
            ..HookArgs::default()
        };
        let outcome = self.invoke(&mut args.ctx, Hook::ProcessOutputResult, 0, remote).await?;
        Ok(RemoteProcessor::replacement(outcome).and_then(|replacement| replacement.messages))
    }
}

/// The `Replacement` fields each hook takes; any other is refused.
fn replaceable(hook: Hook) -> &'static [&'static str] {
    const TAGGED: [&str; 2] = ["add_tagged_system_messages", "clear_system_tags"];
    match hook {
        Hook::ProcessInput => &["messages", "system_messages", TAGGED[0], TAGGED[1]],
        Hook::ProcessInputStep => &[
            "messages",
            "system_messages",
            TAGGED[0],
            TAGGED[1],
            "model",
            "tool_choice",
            "active_tools",
            "tools",
            "model_settings",
            "provider_options",
            "structured_output",
        ],
        Hook::ProcessLlmRequest => &["prompt", "response"],
        Hook::ProcessOutputStream => &["part", "parts"],
        Hook::ProcessOutputStep => &["messages", TAGGED[0], TAGGED[1]],
        Hook::ProcessToolResult => &["tool_result", "messages", TAGGED[0], TAGGED[1]],
        Hook::ProcessOutputResult => &["messages"],
        Hook::ProcessApiError | Hook::ProcessLlmResponse => &[],
    }
}

/// Why an outcome is not one `hook` may answer with, if it is not: `drop` belongs to
/// processOutputStream, `retry_api_call` to processAPIError, and a replacement must set at least
/// one field, and only fields its hook takes. Such an answer is a bug in the processor, reported as its failure
/// (fail closed), never taken for `continue`.
fn outcome_refusal(hook: Hook, outcome: &Outcome) -> Option<String> {
    match (outcome, hook) {
        (Outcome::Drop, Hook::ProcessOutputStream)
        | (Outcome::RetryApiCall(_), Hook::ProcessApiError)
        | (Outcome::Continue | Outcome::Abort(_) | Outcome::Failure(_), _) => None,
        (Outcome::Drop, _) => Some("`drop`, which only processOutputStream may".to_owned()),
        (Outcome::RetryApiCall(_), _) => Some("`retry_api_call`, which only processAPIError may".to_owned()),
        (Outcome::Replace(replacement), _) if replacement.set_fields().is_empty() => {
            Some("an empty `replace`, which changes nothing (answer `continue` to pass)".to_owned())
        }
        (Outcome::Replace(replacement), _) => {
            let allowed = replaceable(hook);
            let refused = replacement.set_fields().into_iter().find(|field| !allowed.contains(field))?;
            Some(match allowed {
                [] => format!("`replace.{refused}`, but {hook} replaces nothing"),
                _ => format!(
                    "`replace.{refused}`, which {hook} does not take (it takes {})",
                    allowed.join(", ")
                ),
            })
        }
    }
}

/// Where each message came from, as the list knows it (a message it does not hold is the run's).
fn sources(messages: &[Message], list: &MessageList) -> Vec<MessageSource> {
    messages.iter().map(|message| list.source_of(&message.id).unwrap_or(MessageSource::Input)).collect()
}

/// The tagged system messages as (tag, text) pairs, by tag.
fn tagged(by_tag: BTreeMap<String, Vec<String>>) -> Vec<(String, String)> {
    by_tag
        .into_iter()
        .flat_map(|(tag, texts)| texts.into_iter().map(move |text| (tag.clone(), text)))
        .collect()
}
