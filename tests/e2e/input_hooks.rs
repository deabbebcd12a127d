//! The input-side hooks: `processInput` return forms, `processInputStep` chaining and system
//! message isolation, `processLLMRequest` rewriting only the outgoing prompt, and
//! `processLLMResponse` sharing state with it.

use crate::common;

use std::sync::Arc;

use agentwire::domain::{
    Chunk, DataChunk, FinishReason, Hook, HookSet, Message, MessageSource, Part, PromptMessage, Role,
    ToolChoice, Usage,
};
use agentwire::processor::{
    HookError, InputArgs, InputOutcome, InputStepArgs, LlmRequestArgs, LlmRequestOutcome, LlmResponseArgs,
    Processor, StepOverrides,
};
use common::{Log, TestServer, TestServerBuilder, inspected, request};
use serde_json::json;

const CONFIG: &str = r#"
[processors.system-swap]
kind = "input-form"
form = "messages-and-system"

[processors.add-in-place]
kind = "input-form"
form = "in-place"

[processors.system-in-array]
kind = "input-form"
form = "system-in-array"

[processors.to-inspect]
kind = "step-override"
model = "mock/inspect"
from_step = 0

[processors.inspect-later]
kind = "step-override"
model = "mock/inspect"
from_step = 1

[processors.no-tools]
kind = "step-override"
tool_choice = "none"
active_tools = []
temperature = 0.5

[processors.step-zero-system]
kind = "step-zero-system"

[processors.rewriter]
kind = "prompt-rewriter"

[processors.recorder]
kind = "prompt-recorder"

[processors.cache-key]
kind = "cache-key"

[processors.cache-hit]
kind = "cache-hit"

[[agents]]
id = "inspect"
instructions = "Be kind."
model = "mock/inspect"

[[agents]]
id = "lower"
model = "mock/inspect"
input_processors = ["lowercase"]

[[agents]]
id = "two-steps"
instructions = "Be kind."
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "two" },
]

[[agents]]
id = "never-called"
model = "mock/script"
script = [{ error = { status = 500, message = "the model must not be called" } }]
"#;

fn server() -> TestServerBuilder {
    TestServer::builder(CONFIG)
        .kind("input-form", |id, options, _| {
            let form = options["form"].as_str().unwrap().to_owned();
            Arc::new(InputForm { id: id.to_owned(), form })
        })
        .kind("step-override", |id, options, log| Arc::new(StepOverride::from_options(id, &options, log)))
        .kind("step-zero-system", |id, _, _| Arc::new(StepZeroSystem { id: id.to_owned() }))
        .kind("prompt-rewriter", |id, _, _| Arc::new(PromptRewriter { id: id.to_owned() }))
        .kind("prompt-recorder", |id, _, log| Arc::new(PromptRecorder { id: id.to_owned(), log }))
        .kind("cache-key", |id, _, _| Arc::new(CacheKey { id: id.to_owned() }))
        .kind("cache-hit", |id, _, _| Arc::new(CacheHit { id: id.to_owned() }))
}

fn with_input(agent: &str, text: &str, processors: &[&str]) -> agentwire::server::pb::RunRequest {
    let mut run = request(agent, text);
    run.input_processors = common::names(processors);
    run
}

/// Returning a message array replaces the input: the model and the stored messages see it.
#[tokio::test]
async fn process_input_array_return_replaces_the_input() {
    let server = server().start().await;
    let result = server.generate(request("lower", "Hello LOUD World")).await;
    let prompt = inspected(&result.text);
    assert_eq!(prompt["messages"][0]["text"], "hello loud world");
    let stored_user = &result.messages[0];
    assert_eq!(stored_user.role, "user");
    assert!(format!("{:?}", stored_user.parts).contains("hello loud world"));
}

/// `{messages, systemMessages}` replaces the system messages too (the agent's instructions).
#[tokio::test]
async fn process_input_can_replace_system_messages() {
    let server = server().start().await;
    let result = server.generate(with_input("inspect", "hi", &["system-swap"])).await;
    assert_eq!(inspected(&result.text)["system"], json!(["replaced system"]));
}

/// Mutating the message list in place is kept, and `system` messages in a returned array move to
/// the system messages.
#[tokio::test]
async fn process_input_in_place_and_system_messages_in_arrays() {
    let server = server().start().await;
    let in_place = inspected(&server.generate(with_input("inspect", "hi", &["add-in-place"])).await.text);
    let texts: Vec<&str> =
        in_place["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["hi", "added in place"]);

    let moved = inspected(&server.generate(with_input("inspect", "hi", &["system-in-array"])).await.text);
    assert_eq!(moved["system"], json!(["Be kind.", "from the array"]));
    assert_eq!(moved["messages"].as_array().unwrap().len(), 1, "the system message is not a message");
}

/// `processInputStep` results chain: the second processor sees the first one's model, and the
/// step runs with every override (model, tool choice, active tools, settings).
#[tokio::test]
async fn process_input_step_overrides_chain_across_processors() {
    let server = server().start().await;
    let result = server.generate(with_input("two-steps", "hi", &["to-inspect", "no-tools"])).await;
    assert_eq!(result.steps[0].model, "mock/inspect");
    let prompt = inspected(&result.text);
    assert_eq!(prompt["tool_choice"], "none");
    assert_eq!(prompt["tools"], json!([]));
    assert_eq!(prompt["settings"]["temperature"], 0.5);
    assert_eq!(server.log.with_prefix("no-tools:"), ["no-tools:saw model mock/inspect at step 0"]);
}

/// System messages changed in `processInputStep` last one step: the next step starts again from
/// the original ones.
#[tokio::test]
async fn system_messages_reset_at_every_step() {
    let server = server().start().await;
    let result = server.generate(with_input("two-steps", "hi", &["step-zero-system", "recorder"])).await;
    assert_eq!(result.text, "two");
    let prompts = server.log.with_prefix("recorder:");
    assert_eq!(prompts.len(), 2);
    assert!(prompts[0].contains("only at step 0"), "{}", prompts[0]);
    assert!(prompts[0].contains("Be kind."));
    assert!(!prompts[1].contains("only at step 0"), "{}", prompts[1]);
    assert!(prompts[1].contains("Be kind."));
}

/// `processLLMRequest` changes the outgoing prompt of one call only: later processors and the
/// model see the rewrite, the next step and the stored messages do not.
#[tokio::test]
async fn process_llm_request_rewrites_are_not_persisted() {
    let server = server().start().await;
    let run = with_input("two-steps", "the original words", &["rewriter", "recorder", "inspect-later"]);
    let result = server.generate(run).await;
    let prompts = server.log.with_prefix("recorder:");
    assert!(prompts[0].contains("REWRITTEN") && !prompts[0].contains("original"), "{}", prompts[0]);
    let step_one_prompt = inspected(&result.text);
    assert_eq!(step_one_prompt["messages"][0]["text"], "the original words");
    assert!(format!("{:?}", result.messages[0].parts).contains("the original words"));
}

/// `processLLMResponse` gets the step's chunks and the same `state` as `processLLMRequest`.
#[tokio::test]
async fn process_llm_response_shares_state_with_the_request_hook() {
    let server = server().start().await;
    let result = server.generate(with_input("inspect", "hi", &["cache-key"])).await;
    assert_eq!(result.data.len(), 1);
    let data = common::json(&match &result.data[0].payload {
        Some(agentwire::server::pb::chunk::Payload::Data(data)) => data.data.clone(),
        other => panic!("data chunk, got {other:?}"),
    });
    assert_eq!(data["key"], "key-for-step-0");
    assert_eq!(data["from_cache"], false);
    assert_eq!(data["chunks"], json!(["text-delta", "step-finish"]));
}

/// A `processLLMRequest` response replaces the model call; `processLLMResponse` is told so.
#[tokio::test]
async fn process_llm_request_response_short_circuits_the_model() {
    let server = server().start().await;
    let result = server.generate(with_input("never-called", "hi", &["cache-hit", "cache-key"])).await;
    assert_eq!(result.finish_reason, "stop");
    assert_eq!(result.text, "cached answer");
    assert_eq!(result.usage.unwrap().output_tokens, 7);
    let Some(agentwire::server::pb::chunk::Payload::Data(data)) = &result.data[0].payload else { panic!() };
    assert_eq!(common::json(&data.data)["from_cache"], true);
}

// ---- processors of these tests ---------------------------------------------------------------

struct InputForm {
    id: String,
    form: String,
}

#[async_trait::async_trait]
impl Processor for InputForm {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        match self.form.as_str() {
            "messages-and-system" => Ok(InputOutcome::MessagesAndSystem {
                messages: args.messages,
                system_messages: vec!["replaced system".to_owned()],
            }),
            "in-place" => {
                let mut added = Message::new(Role::User, vec![Part::text("added in place")]);
                added.created_at = i64::MAX;
                args.message_list.add(added, MessageSource::Input);
                Ok(InputOutcome::Unchanged)
            }
            "system-in-array" => {
                let mut messages = args.messages;
                messages.push(Message::new(Role::System, vec![Part::text("from the array")]));
                Ok(InputOutcome::Messages(messages))
            }
            other => panic!("unknown form {other}"),
        }
    }
}

struct StepOverride {
    id: String,
    log: Log,
    model: Option<String>,
    from_step: u32,
    tool_choice: Option<ToolChoice>,
    active_tools: Option<Vec<String>>,
    temperature: Option<f64>,
}

impl StepOverride {
    fn from_options(id: &str, options: &toml::Table, log: Log) -> StepOverride {
        StepOverride {
            id: id.to_owned(),
            log,
            model: options.get("model").and_then(|v| v.as_str()).map(str::to_owned),
            from_step: options.get("from_step").and_then(|v| v.as_integer()).unwrap_or(0) as u32,
            tool_choice: options.get("tool_choice").map(|_| ToolChoice::None),
            active_tools: options.get("active_tools").map(|_| Vec::new()),
            temperature: options.get("temperature").and_then(|v| v.as_float()),
        }
    }
}

#[async_trait::async_trait]
impl Processor for StepOverride {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep])
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        self.log.push(format!("{}:saw model {} at step {}", self.id, args.step.model, args.step_number));
        if args.step_number < self.from_step {
            return Ok(StepOverrides::default());
        }
        let mut settings = args.step.settings.clone();
        settings.temperature = self.temperature.or(settings.temperature);
        Ok(StepOverrides {
            model: self.model.clone(),
            tool_choice: self.tool_choice.clone(),
            active_tools: self.active_tools.clone(),
            model_settings: self.temperature.map(|_| settings),
            ..StepOverrides::default()
        })
    }
}

struct StepZeroSystem {
    id: String,
}

#[async_trait::async_trait]
impl Processor for StepZeroSystem {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep])
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        if args.step_number > 0 {
            return Ok(StepOverrides::default());
        }
        let mut system_messages = args.system_messages;
        system_messages.push("only at step 0".to_owned());
        Ok(StepOverrides { system_messages: Some(system_messages), ..StepOverrides::default() })
    }
}

struct PromptRewriter {
    id: String,
}

#[async_trait::async_trait]
impl Processor for PromptRewriter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest])
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        if args.step_number > 0 {
            return Ok(LlmRequestOutcome::default());
        }
        let prompt = args
            .prompt
            .iter()
            .map(|message| match message.role {
                Role::User => PromptMessage { role: Role::User, parts: vec![Part::text("REWRITTEN")] },
                _ => message.clone(),
            })
            .collect();
        Ok(LlmRequestOutcome { prompt: Some(prompt), response: None })
    }
}

struct PromptRecorder {
    id: String,
    log: Log,
}

#[async_trait::async_trait]
impl Processor for PromptRecorder {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest])
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        self.log.push(format!("{}:{}", self.id, serde_json::to_string(args.prompt).unwrap()));
        Ok(LlmRequestOutcome::default())
    }
}

struct CacheKey {
    id: String,
}

#[async_trait::async_trait]
impl Processor for CacheKey {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest, Hook::ProcessLlmResponse])
    }

    async fn process_llm_request(&self, args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        args.ctx.state.insert("key".into(), json!(format!("key-for-step-{}", args.step_number)));
        Ok(LlmRequestOutcome::default())
    }

    async fn process_llm_response(&self, mut args: LlmResponseArgs<'_>) -> Result<(), HookError> {
        let chunks: Vec<&str> = args.chunks.iter().map(Chunk::type_name).collect();
        let report = json!({ "key": args.ctx.state["key"], "chunks": chunks, "from_cache": args.from_cache });
        args.ctx.emit(DataChunk::new("llm-response", report));
        Ok(())
    }
}

struct CacheHit {
    id: String,
}

#[async_trait::async_trait]
impl Processor for CacheHit {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessLlmRequest])
    }

    async fn process_llm_request(&self, _args: LlmRequestArgs<'_>) -> Result<LlmRequestOutcome, HookError> {
        let chunks = vec![
            Chunk::TextDelta { id: "cached".into(), text: "cached answer".into() },
            Chunk::StepFinish {
                step: 0,
                finish_reason: FinishReason::Stop,
                usage: Usage { input_tokens: 3, output_tokens: 7 },
                rejected: None,
            },
        ];
        Ok(LlmRequestOutcome { prompt: None, response: Some(chunks) })
    }
}
