//! The output-side hooks: `processOutputStream` rewriting, dropping and data chunks,
//! `processOutputStep` retries with feedback, `processToolResult` rewriting tool results,
//! `processOutputResult` rewriting the final answer, and `state` shared by a processor's hooks.

use crate::common;

use std::sync::Arc;

use agentwire::domain::{Chunk, DataChunk, Hook, HookSet, Message, Part, Role};
use agentwire::processor::{
    HookError, InputArgs, InputOutcome, InputStepArgs, OutputResultArgs, OutputStepArgs, OutputStreamArgs,
    Processor, StepOverrides, ToolResultArgs, ToolResultOutcome,
};
use agentwire::server::pb;
use common::{Log, TestServer, TestServerBuilder, inspected, names, request, text, tripwire, types};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[processors.quality]
kind = "quality-guardrail"
min_chars = 12

[processors.shout]
kind = "shout"

[processors.drop-secret]
kind = "drop-secret"

[processors.after]
kind = "probe"

[processors.sees-data]
kind = "probe"
data_parts = true

[processors.blind-to-data]
kind = "probe"

[processors.note-emitter]
kind = "note-emitter"

[processors.inspect-on-retry]
kind = "inspect-on-retry"

[processors.retry-counter]
kind = "retry-counter"

[processors.system-watcher]
kind = "system-watcher"

[processors.redact]
kind = "redact-tool-result"

[processors.redact-in-place]
kind = "redact-tool-result"
in_place = true

[processors.signature]
kind = "signature"

[processors.upper-step]
kind = "upper-step"

[processors.stateful]
kind = "stateful"

[[agents]]
id = "echo"
model = "mock/echo"

[[agents]]
id = "short-then-long"
model = "mock/script"
max_processor_retries = 3
output_processors = ["quality"]
script = [{ text = "hi" }, { text = "a long enough answer" }]

[[agents]]
id = "always-short"
model = "mock/script"
max_processor_retries = 2
output_processors = ["retry-counter", "quality"]
script = [{ text = "hi" }]

[[agents]]
id = "no-retry-budget"
model = "mock/script"
output_processors = ["quality"]
script = [{ text = "hi" }, { text = "a long enough answer" }]

[[agents]]
id = "calc"
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "6 * 7" } }] },
  { text = "done" },
]
"#;

fn server() -> TestServerBuilder {
    TestServer::builder(CONFIG)
        .kind("shout", |id, _, _| Arc::new(Shout { id: id.to_owned() }))
        .kind("drop-secret", |id, _, _| Arc::new(DropSecret { id: id.to_owned() }))
        .kind("note-emitter", |id, _, _| Arc::new(NoteEmitter { id: id.to_owned() }))
        .kind("inspect-on-retry", |id, _, _| Arc::new(InspectOnRetry { id: id.to_owned() }))
        .kind("retry-counter", |id, _, log| Arc::new(RetryCounter { id: id.to_owned(), log }))
        .kind("system-watcher", |id, _, log| Arc::new(SystemWatcher { id: id.to_owned(), log }))
        .kind("redact-tool-result", |id, options, _| {
            let in_place = options.get("in_place").and_then(toml::Value::as_bool).unwrap_or(false);
            Arc::new(RedactToolResult { id: id.to_owned(), in_place })
        })
        .kind("signature", |id, _, _| Arc::new(Signature { id: id.to_owned() }))
        .kind("upper-step", |id, _, _| Arc::new(UpperStep { id: id.to_owned() }))
        .kind("stateful", |id, _, log| Arc::new(Stateful { id: id.to_owned(), log }))
}

fn with_processors(agent: &str, text: &str, input: &[&str], output: &[&str]) -> pb::RunRequest {
    let mut run = request(agent, text);
    run.input_processors = names(input);
    run.output_processors = names(output);
    run
}

fn data_chunks(chunks: &[pb::Chunk]) -> Vec<(String, Value)> {
    chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::Data(data)) => Some((chunk.r#type.clone(), common::json(&data.data))),
            _ => None,
        })
        .collect()
}

/// A rewritten chunk reaches the client, and the stored answer is what the client saw.
#[tokio::test]
async fn process_output_stream_rewrites_chunks() {
    let server = server().start().await;
    let chunks = server.stream(with_processors("echo", "quiet words", &[], &["shout"])).await;
    assert_eq!(text(&chunks), "ECHO: QUIET WORDS");
    let result = server.generate(with_processors("echo", "quiet words", &[], &["shout"])).await;
    assert_eq!(result.text, "ECHO: QUIET WORDS");
    assert_eq!(common::message_text(&result.messages[1]), "ECHO: QUIET WORDS");
}

/// A dropped chunk reaches neither the client nor the processors after the one that dropped it,
/// and the stream goes on.
#[tokio::test]
async fn process_output_stream_drop_skips_later_processors() {
    let server = server().start().await;
    let chunks =
        server.stream(with_processors("echo", "my secret plan", &[], &["drop-secret", "after"])).await;
    assert_eq!(text(&chunks), "echo: my plan");
    assert_eq!(types(&chunks).last().unwrap(), "finish");
    let seen_after = server.log.with_prefix("after:processOutputStream:text-delta");
    assert_eq!(seen_after.len(), 3, "`after` never saw the dropped delta");
}

/// Custom `data-*` chunks reach only the stream processors that set `processDataParts`.
#[tokio::test]
async fn data_chunks_reach_only_processors_with_process_data_parts() {
    let server = server().start().await;
    let run =
        with_processors("echo", "hi", &["note-emitter"], &["blind-to-data", "sees-data", "note-emitter"]);
    let chunks = server.stream(run).await;
    let notes: Vec<String> = data_chunks(&chunks).into_iter().map(|(kind, _)| kind).collect();
    assert_eq!(notes, ["data-input-note", "data-kept", "data-passing"]);
    assert_eq!(server.log.with_prefix("sees-data:processOutputStream:data-").len(), 3);
    assert!(server.log.with_prefix("blind-to-data:processOutputStream:data-").is_empty());
}

/// Non-transient data chunks of output hooks are kept as parts of the assistant message;
/// transient ones are streamed only.
#[tokio::test]
async fn non_transient_output_data_is_kept_on_the_answer() {
    let server = server().start().await;
    let result = server.generate(with_processors("echo", "hi", &[], &["note-emitter"])).await;
    let kept: Vec<&str> = result.messages[1]
        .parts
        .iter()
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Data(data)) => Some(data.r#type.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(kept, ["data-kept"]);
    assert_eq!(result.data.len(), 2, "both reached the client");
}

/// A `processOutputStep` abort with `retry` rolls the step back and feeds the reason to the model.
#[tokio::test]
async fn process_output_step_retry_feeds_the_reason_back() {
    let server = server().start().await;
    let result = server.generate(request("short-then-long", "tell me")).await;
    assert_eq!(result.text, "a long enough answer");
    assert_eq!(result.finish_reason, "stop");
    assert_eq!(result.steps.len(), 2);
    let rejected = result.steps[0].tripwire.as_ref().expect("the first step was rejected");
    assert!(rejected.retry);
    assert_eq!(rejected.processor_id, "quality");
    assert_eq!(result.steps[0].text, "");
    let answers: Vec<String> = result
        .messages
        .iter()
        .filter(|message| message.role == "assistant")
        .map(common::message_text)
        .collect();
    assert_eq!(answers, ["a long enough answer"], "the rejected answer was rolled back");

    let chunks = server.stream(request("short-then-long", "tell me")).await;
    let step_finishes: Vec<Option<pb::Tripwire>> = chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::StepFinish(finish)) => Some(finish.rejected.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(step_finishes.len(), 2);
    assert_eq!(
        step_finishes[0].as_ref().expect("the stream says the step was rejected").processor_id,
        "quality"
    );
    assert!(step_finishes[1].is_none());

    let mut watched = request("short-then-long", "tell me");
    watched.input_processors = names(&["inspect-on-retry"]);
    let prompt = inspected(&server.generate(watched).await.text);
    let system = prompt["system"].as_array().unwrap();
    assert!(
        system.iter().any(|text| text.as_str().unwrap().starts_with(
            "[Processor Feedback] Your previous response was not accepted: Response too short (2 characters"
        )),
        "{system:?}"
    );
}

/// The retry feedback is a tagged system message: `processInputStep` and `processOutputStep`
/// both get it under its tag, and never among the untagged `system_messages`.
#[tokio::test]
async fn tagged_system_messages_never_mix_with_the_untagged() {
    let server = server().start().await;
    let mut run = request("short-then-long", "tell me");
    run.input_processors = names(&["system-watcher"]);
    run.output_processors = names(&["system-watcher", "quality"]);
    server.generate(run).await;
    assert_eq!(
        server.log.with_prefix("system-watcher:"),
        [
            "system-watcher:processInputStep:0 untagged:",
            "system-watcher:processOutputStep:0 untagged:",
            "system-watcher:processInputStep:0 untagged:processor-retry-feedback",
            "system-watcher:processOutputStep:0 untagged:processor-retry-feedback",
        ]
    );
}

/// Retries stop at `max_processor_retries`, and `retryCount` counts them.
#[tokio::test]
async fn process_output_step_retries_are_bounded() {
    let server = server().start().await;
    let chunks = server.stream(request("always-short", "tell me")).await;
    let tripwire = tripwire(&chunks).expect("the run ends in a tripwire");
    assert!(tripwire.retry, "the processor asked for a retry it could not get");
    assert_eq!(tripwire.processor_id, "quality");
    assert_eq!(types(&chunks).iter().filter(|kind| *kind == "step-start").count(), 3);
    assert_eq!(
        server.log.with_prefix("retry-counter:"),
        ["retry-counter:0", "retry-counter:1", "retry-counter:2"]
    );

    let result = server.generate(request("always-short", "tell me")).await;
    assert_eq!(result.finish_reason, "other");
    assert_eq!(result.text, "");
    assert!(result.messages.is_empty());
}

/// Without `max_processor_retries`, a retry request is an abort, and a warning says why; so is
/// one past the budget.
#[tokio::test]
async fn retry_without_budget_is_an_abort() {
    let logs = common::logs::capture();
    let server = server().start().await;
    let result = server.generate(request("no-retry-budget", "tell me")).await;
    assert_eq!(result.finish_reason, "other");
    assert_eq!(result.steps.len(), 1);
    assert!(result.tripwire.unwrap().retry);
    server.generate(request("always-short", "tell me")).await;
    let warnings = logs.lines_with("WARN");
    assert!(warnings.iter().any(|line| line.contains("max_processor_retries is not set")), "{warnings:?}");
    assert!(warnings.iter().any(|line| line.contains("retry budget of 2 ran out")), "{warnings:?}");
}

/// Every step a processor rejected carries its tripwire and the finish reason `other`, the last
/// one too (retried or not), and keeps no text.
#[tokio::test]
async fn every_rejected_step_carries_its_tripwire() {
    let server = server().start().await;
    let bounded = server.generate(request("always-short", "tell me")).await;
    let unbudgeted = server.generate(request("no-retry-budget", "tell me")).await;
    for (result, rejected) in [(bounded, 3), (unbudgeted, 1)] {
        assert_eq!(result.steps.len(), rejected);
        for step in &result.steps {
            let tripwire = step.tripwire.as_ref().expect("each step was rejected");
            assert_eq!(tripwire.processor_id, "quality");
            assert_eq!(step.finish_reason, "other");
            assert_eq!(step.text, "");
        }
    }
}

/// `steps[].text` is the text processors kept: rewritten by `processOutputStep` or by
/// `processOutputResult`, as the result and the stored answer show it.
#[tokio::test]
async fn steps_show_the_text_processors_kept() {
    let server = server().start().await;
    let stepped = server.generate(with_processors("echo", "hi", &[], &["upper-step"])).await;
    assert_eq!(stepped.text, "ECHO: HI");
    assert_eq!(stepped.steps[0].text, "ECHO: HI");
    let signed = server.generate(with_processors("echo", "hi", &[], &["signature"])).await;
    assert_eq!(signed.steps[0].text, "echo: hi -- signed");
}

/// A step's `tool-result` chunks come before its `step-finish`, and the next step starts after.
#[tokio::test]
async fn tool_results_come_before_their_step_finish() {
    let server = server().start().await;
    let kinds = types(&server.stream(request("calc", "six times seven")).await);
    let framing: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|kind| ["step-start", "tool-call", "tool-result", "step-finish"].contains(kind))
        .collect();
    assert_eq!(
        framing,
        ["step-start", "tool-call", "tool-result", "step-finish", "step-start", "step-finish"]
    );
}

/// A tool result rewritten by `processToolResult` is what the stream, the next step and the
/// stored messages see, whether returned or written into the message list.
#[tokio::test]
async fn process_tool_result_rewrites_the_result_everywhere() {
    let server = server().start().await;
    for redactor in ["redact", "redact-in-place"] {
        let mut run = with_processors("calc", "6 * 7?", &[], &[redactor]);
        let chunks = server.stream(run.clone()).await;
        let streamed = chunks
            .iter()
            .find_map(|chunk| match &chunk.payload {
                Some(pb::chunk::Payload::ToolResult(result)) => Some(common::json(&result.result)),
                _ => None,
            })
            .unwrap();
        assert_eq!(streamed, json!({ "value": "[REDACTED]" }), "{redactor}");

        run.input_processors = names(&["inspect-on-retry"]);
        let result = server.generate(run).await;
        assert_eq!(common::json(&result.steps[0].tool_results[0].result), json!({ "value": "[REDACTED]" }));
        let Some(pb::part::Part::ToolResult(stored)) = &result.messages[2].parts[0].part else {
            panic!("the tool message holds the result")
        };
        assert_eq!(common::json(&stored.result), json!({ "value": "[REDACTED]" }));
        let next_prompt = inspected(&result.text);
        let tool_message = &next_prompt["messages"][2];
        assert_eq!(tool_message["role"], "tool");
        assert_eq!(
            tool_message["parts"][0]["result"],
            json!({ "value": "[REDACTED]" }),
            "the model saw the rewrite"
        );
    }
}

/// `processOutputResult` may rewrite the final answer: the result and the finish chunk show it.
#[tokio::test]
async fn process_output_result_rewrites_the_final_text() {
    let server = server().start().await;
    let run = with_processors("echo", "hi", &[], &["signature"]);
    let chunks = server.stream(run.clone()).await;
    let Some(pb::chunk::Payload::Finish(finish)) = &chunks.last().unwrap().payload else { panic!("finish") };
    assert_eq!(finish.text, "echo: hi -- signed");
    let result = server.generate(run).await;
    assert_eq!(result.text, "echo: hi -- signed");
    assert_eq!(common::message_text(&result.messages[1]), "echo: hi -- signed");
}

/// `state` is one object per processor per run, shared by all its hooks, input and output, and
/// new for every run.
#[tokio::test]
async fn state_is_shared_by_a_processors_hooks_and_fresh_per_run() {
    let server = server().start().await;
    let run = with_processors("echo", "hi", &["stateful"], &["stateful"]);
    server.generate(run.clone()).await;
    server.generate(run).await;
    let expected = "stateful:processInput,processInputStep,processOutputStream,processOutputStep,\
                    processOutputStream,processOutputResult";
    assert_eq!(server.log.with_prefix("stateful:"), [expected, expected]);
}

// ---- processors of these tests ---------------------------------------------------------------

struct Shout {
    id: String,
}

#[async_trait::async_trait]
impl Processor for Shout {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStream])
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        Ok(Some(match args.part {
            Chunk::TextDelta { id, text } => Chunk::TextDelta { id, text: text.to_uppercase() },
            other => other,
        }))
    }
}

struct DropSecret {
    id: String,
}

#[async_trait::async_trait]
impl Processor for DropSecret {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStream])
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        match &args.part {
            Chunk::TextDelta { text, .. } if text.contains("secret") => Ok(None),
            _ => Ok(Some(args.part)),
        }
    }
}

/// Emits `data-input-note` in processInput, then `data-kept` and a transient `data-passing` in
/// processOutputResult.
struct NoteEmitter {
    id: String,
}

#[async_trait::async_trait]
impl Processor for NoteEmitter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputResult])
    }

    async fn process_input(&self, mut args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        args.ctx.emit(DataChunk::new("input-note", json!({ "seen": args.messages.len() })));
        Ok(InputOutcome::Unchanged)
    }

    async fn process_output_result(
        &self,
        mut args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        args.ctx.emit(DataChunk::new("kept", json!({ "text": args.result.text })));
        args.ctx.emit(DataChunk::new("data-passing", json!(1)).transient());
        Ok(None)
    }
}

struct InspectOnRetry {
    id: String,
}

#[async_trait::async_trait]
impl Processor for InspectOnRetry {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep])
    }

    /// Lets `mock/inspect` show the prompt of a retry, or of the step after a tool.
    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        let switch = args.ctx.retry_count > 0 || args.step_number > 0;
        Ok(StepOverrides { model: switch.then(|| "mock/inspect".to_owned()), ..StepOverrides::default() })
    }
}

/// Logs, in `processInputStep` and `processOutputStep`, how many untagged system messages it got
/// that hold retry feedback, and the tags of the tagged ones.
struct SystemWatcher {
    id: String,
    log: Log,
}

impl SystemWatcher {
    fn record(
        &self,
        hook: Hook,
        untagged: &[String],
        tagged: &std::collections::BTreeMap<String, Vec<String>>,
    ) {
        let feedback = untagged.iter().filter(|text| text.contains("[Processor Feedback]")).count();
        let tags: Vec<&str> = tagged.keys().map(String::as_str).collect();
        self.log.push(format!("{}:{hook}:{feedback} untagged:{}", self.id, tags.join(",")));
    }
}

#[async_trait::async_trait]
impl Processor for SystemWatcher {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep, Hook::ProcessOutputStep])
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        self.record(Hook::ProcessInputStep, &args.system_messages, &args.tagged_system_messages);
        Ok(StepOverrides::default())
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        self.record(Hook::ProcessOutputStep, &args.system_messages, &args.tagged_system_messages);
        Ok(None)
    }
}

struct RetryCounter {
    id: String,
    log: Log,
}

#[async_trait::async_trait]
impl Processor for RetryCounter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStep])
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        self.log.push(format!("{}:{}", self.id, args.ctx.retry_count));
        Ok(None)
    }
}

struct RedactToolResult {
    id: String,
    in_place: bool,
}

#[async_trait::async_trait]
impl Processor for RedactToolResult {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessToolResult])
    }

    async fn process_tool_result(&self, args: ToolResultArgs<'_>) -> Result<ToolResultOutcome, HookError> {
        assert_eq!(args.result["value"], 42.0, "the hook sees the raw result");
        let redacted = json!({ "value": "[REDACTED]" });
        if self.in_place {
            assert!(args.message_list.update_tool_result(args.tool_call_id, redacted));
            return Ok(ToolResultOutcome::default());
        }
        Ok(ToolResultOutcome { result: Some(redacted), messages: None })
    }
}

struct Signature {
    id: String,
}

#[async_trait::async_trait]
impl Processor for Signature {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputResult])
    }

    async fn process_output_result(
        &self,
        args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        let mut messages = args.messages;
        let last = messages.iter_mut().rev().find(|message| message.role == Role::Assistant).unwrap();
        let signed = format!("{} -- signed", last.text());
        last.parts = vec![Part::text(signed)];
        Ok(Some(messages))
    }
}

/// Uppercases the step's answer in `processOutputStep`.
struct UpperStep {
    id: String,
}

#[async_trait::async_trait]
impl Processor for UpperStep {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStep])
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        let mut messages = args.messages;
        let last = messages.iter_mut().rev().find(|message| message.role == Role::Assistant).unwrap();
        last.parts = vec![Part::text(last.text().to_uppercase())];
        Ok(Some(messages))
    }
}

/// Appends each hook's name to `state.hooks` and logs the list at the end.
struct Stateful {
    id: String,
    log: Log,
}

impl Stateful {
    fn note(state: &mut serde_json::Map<String, Value>, hook: Hook) {
        let hooks = state.entry("hooks").or_insert_with(|| json!([]));
        let hooks = hooks.as_array_mut().unwrap();
        if hooks.last() != Some(&json!(hook.name())) {
            hooks.push(json!(hook.name()));
        }
    }
}

#[async_trait::async_trait]
impl Processor for Stateful {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[
            Hook::ProcessInput,
            Hook::ProcessInputStep,
            Hook::ProcessOutputStream,
            Hook::ProcessOutputStep,
            Hook::ProcessOutputResult,
        ])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        Stateful::note(args.ctx.state, Hook::ProcessInput);
        Ok(InputOutcome::Unchanged)
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        Stateful::note(args.ctx.state, Hook::ProcessInputStep);
        Ok(StepOverrides::default())
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        // `start` streams before processInput runs; count the stream from the first step on.
        if !matches!(args.part, Chunk::Start { .. }) {
            Stateful::note(args.ctx.state, Hook::ProcessOutputStream);
        }
        Ok(Some(args.part))
    }

    async fn process_output_step(&self, args: OutputStepArgs<'_>) -> Result<Option<Vec<Message>>, HookError> {
        Stateful::note(args.ctx.state, Hook::ProcessOutputStep);
        Ok(None)
    }

    async fn process_output_result(
        &self,
        args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        Stateful::note(args.ctx.state, Hook::ProcessOutputResult);
        let hooks: Vec<&str> =
            args.ctx.state["hooks"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
        self.log.push(format!("{}:{}", self.id, hooks.join(",")));
        Ok(None)
    }
}
