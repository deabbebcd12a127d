//! Protocol version 2 through the real server: a remote processor can do what an in-process one
//! can — keep tagged system messages across steps, see `data-*` chunks, answer in the model's
//! place, see and change every setting of a step, learn that a tool failed, repair the messages
//! before an API-error retry, and see the steps so far — while a version-1 processor still gets
//! exactly the version-1 frames.

use crate::common;

use std::sync::{Arc, Mutex};

use agentwire::server::pb;
use agentwire::server::value::{from_struct, to_proto, to_struct};
use common::remote::{ALL_HOOKS, Answer, cont, hello_of, open, outcome, replace, serve, serve_hello};
use common::{TestServer, inspected, message, request};
use serde_json::json;
use tonic::Code;

const CONFIG: &str = r#"
[processors.v2]
kind = "remote"
timeout_ms = 3000

[[agents]]
id = "tagged"
model = "mock/script"
tools = ["calculator"]
input_processors = ["v2"]
script = [{ tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] }, { text = "done" }]

[[agents]]
id = "data"
model = "mock/echo"
input_processors = ["v2"]
output_processors = ["v2"]

[[agents]]
id = "cache"
model = "mock/script"
input_processors = ["v2"]
script = [{ error = { status = 500, message = "the model must not be called" } }]

[[agents]]
id = "settings"
model = "mock/inspect"
tools = ["calculator"]
settings = { temperature = 0.3 }
input_processors = ["v2"]

[[agents]]
id = "failing-tool"
model = "mock/script"
tools = ["calculator"]
output_processors = ["v2"]
script = [{ tool_calls = [{ name = "calculator", args = { expression = "1 +" } }] }, { text = "sorry" }]

[[agents]]
id = "repair"
model = "mock/script"
input_processors = ["v2"]
error_processors = ["v2"]
script = [{ error = { status = 400, message = "context length exceeded" } }]
"#;

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, entry: String) {
    log.lock().unwrap().push(entry);
}

fn logged(log: &Log, prefix: &str) -> Vec<String> {
    log.lock().unwrap().iter().filter(|entry| entry.starts_with(prefix)).cloned().collect()
}

fn text_chunk(text: &str) -> pb::Chunk {
    pb::Chunk {
        r#type: "text-delta".into(),
        payload: Some(pb::chunk::Payload::TextDelta(pb::DeltaPayload {
            id: String::new(),
            text: text.into(),
        })),
        ..Default::default()
    }
}

fn object(value: serde_json::Value) -> Option<prost_types::Struct> {
    value.as_object().map(to_struct)
}

/// The processor of every test: what it does depends on the agent of the call.
fn answer(log: Log) -> Answer {
    Arc::new(move |call| {
        let tagged: Vec<String> = call
            .tagged_system_messages
            .iter()
            .map(|tagged| format!("{}={}", tagged.tag, tagged.text))
            .collect();
        match (call.agent_id.as_str(), call.hook()) {
            ("tagged", pb::Hook::ProcessInputStep) if call.step == 0 => replace(pb::Replacement {
                add_tagged_system_messages: vec![pb::TaggedSystemMessage {
                    tag: "policy".into(),
                    text: "Answer in French.".into(),
                }],
                system_messages: Some(pb::StringList { values: vec!["only for step 0".into()] }),
                ..Default::default()
            }),
            ("tagged", pb::Hook::ProcessInputStep) => {
                note(&log, format!("step {} tagged {tagged:?} system {:?}", call.step, call.system_messages));
                replace(pb::Replacement { model: Some("mock/inspect".into()), ..Default::default() })
            }
            ("data", pb::Hook::ProcessInput) => {
                let mut result = cont().unwrap();
                result.emit.push(pb::Chunk {
                    r#type: "data-audit".into(),
                    payload: Some(pb::chunk::Payload::Data(pb::DataPayload {
                        data: Some(to_proto(&json!({ "checked": true }))),
                        ..Default::default()
                    })),
                    ..Default::default()
                });
                Some(result)
            }
            ("data", pb::Hook::ProcessOutputStream) => {
                let part = call.part.as_ref().map(|part| part.r#type.clone()).unwrap_or_default();
                note(&log, format!("stream {part}"));
                cont()
            }
            ("cache", pb::Hook::ProcessLlmRequest) => replace(pb::Replacement {
                response: Some(pb::ChunkList { chunks: vec![text_chunk("from "), text_chunk("the cache")] }),
                ..Default::default()
            }),
            ("settings", pb::Hook::ProcessInputStep) => {
                let step = call.step_input.clone().unwrap_or_default();
                let tools: Vec<&str> = step.tools.iter().map(|tool| tool.name.as_str()).collect();
                let temperature = step.settings.and_then(|settings| settings.temperature);
                note(
                    &log,
                    format!(
                        "input step tools {tools:?} choice {} temperature {temperature:?}",
                        step.tool_choice
                    ),
                );
                replace(pb::Replacement {
                    tools: Some(pb::ToolSpecList {
                        tools: vec![pb::ToolSpec {
                            name: "lookup".into(),
                            description: "Looks things up".into(),
                            parameters: object(json!({ "type": "object" })),
                        }],
                    }),
                    model_settings: Some(pb::ModelSettings { temperature: Some(0.9), ..Default::default() }),
                    provider_options: object(json!({ "reasoning_effort": "low" })),
                    structured_output: object(json!({ "type": "object" })),
                    tool_choice: Some("required".into()),
                    ..Default::default()
                })
            }
            ("settings", pb::Hook::ProcessLlmRequest) => {
                let step = call.step_input.clone().unwrap_or_default();
                let tools: Vec<&str> = step.tools.iter().map(|tool| tool.name.as_str()).collect();
                let temperature = step.settings.and_then(|settings| settings.temperature);
                let options = step.provider_options.map(from_struct).unwrap_or_default();
                note(
                    &log,
                    format!(
                        "request tools {tools:?} choice {} temperature {temperature:?} options {}",
                        step.tool_choice,
                        serde_json::Value::Object(options)
                    ),
                );
                cont()
            }
            ("failing-tool", pb::Hook::ProcessToolResult) => {
                let result = call.tool_result.clone().unwrap_or_default();
                note(&log, format!("tool result is_error {}", result.is_error));
                cont()
            }
            ("failing-tool", pb::Hook::ProcessOutputStep) => {
                let calls: Vec<usize> = call.steps.iter().map(|step| step.tool_calls.len()).collect();
                note(&log, format!("output step {} steps {calls:?}", call.step));
                cont()
            }
            ("failing-tool", pb::Hook::ProcessOutputResult) => {
                let texts: Vec<&str> = call.steps.iter().map(|step| step.text.as_str()).collect();
                note(&log, format!("output result steps {texts:?}"));
                cont()
            }
            ("repair", pb::Hook::ProcessApiError) => {
                outcome(pb::hook_result::Outcome::RetryApiCall(pb::RetryApiCall {
                    messages: Some(pb::MessageList { messages: vec![message("user", "a shorter question")] }),
                }))
            }
            ("repair", pb::Hook::ProcessInputStep) if call.retry_count > 0 => {
                replace(pb::Replacement { model: Some("mock/inspect".into()), ..Default::default() })
            }
            _ => cont(),
        }
    })
}

async fn start() -> (TestServer, common::remote::Instance, Log) {
    start_with(hello_of("v2", &ALL_HOOKS)).await
}

async fn start_with(hello: pb::Hello) -> (TestServer, common::remote::Instance, Log) {
    let server = TestServer::start(CONFIG).await;
    let log: Log = Arc::default();
    let instance = serve_hello(server.channel().await, hello, answer(Arc::clone(&log))).await;
    (server, instance, log)
}

/// A tagged system message added by a remote processInputStep survives into the next step (an
/// untagged one does not), reaches the model, and shows in the next call with its tag.
#[tokio::test]
async fn tagged_system_messages_survive_into_the_next_step() {
    let (server, _instance, log) = start().await;
    let result = server.generate(request("tagged", "1 + 1?")).await;
    assert_eq!(logged(&log, "step 1"), [r#"step 1 tagged ["policy=Answer in French."] system []"#]);
    let seen = inspected(&result.text);
    assert_eq!(seen["system"], json!(["Answer in French."]), "{seen}");
}

/// With `data_parts`, a remote stream processor sees `data-*` chunks; without it, it never does.
#[tokio::test]
async fn data_parts_reach_only_a_processor_that_asks() {
    let mut hello = hello_of("v2", &ALL_HOOKS);
    hello.hook_options.push(pb::HookOptions {
        hook: pb::Hook::ProcessOutputStream as i32,
        data_parts: true,
        ..Default::default()
    });
    let (server, _instance, log) = start_with(hello).await;
    server.generate(request("data", "hi")).await;
    assert!(logged(&log, "stream").contains(&"stream data-audit".to_owned()), "{:?}", logged(&log, "stream"));

    let (server, _instance, log) = start().await;
    server.generate(request("data", "hi")).await;
    assert!(!logged(&log, "stream").is_empty());
    assert!(
        !logged(&log, "stream").contains(&"stream data-audit".to_owned()),
        "{:?}",
        logged(&log, "stream")
    );
}

/// `data_parts` needs version 2 and belongs to processOutputStream: anything else is refused.
#[tokio::test]
async fn data_parts_are_refused_where_they_cannot_apply() {
    let server = TestServer::start(CONFIG).await;
    let mut old = hello_of("v2", &ALL_HOOKS);
    old.max_protocol_version = 1;
    old.hook_options.push(pb::HookOptions {
        hook: pb::Hook::ProcessOutputStream as i32,
        data_parts: true,
        ..Default::default()
    });
    let mut wrong_hook = hello_of("v2", &ALL_HOOKS);
    wrong_hook.hook_options.push(pb::HookOptions {
        hook: pb::Hook::ProcessInput as i32,
        data_parts: true,
        ..Default::default()
    });
    for (hello, says) in [(old, "version 2"), (wrong_hook, "only processOutputStream")] {
        let (stream, _sender) = open(server.channel().await, common::remote::hello_message(hello)).await;
        let status = match stream {
            Err(status) => status,
            Ok(mut stream) => stream.message().await.expect_err("refused"),
        };
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(
            status.message().contains("hello.hook_options[0].data_parts") && status.message().contains(says),
            "{}",
            status.message()
        );
    }
}

/// A remote processLLMRequest answers in the model's place: its chunks are the step's answer and
/// the model is never called.
#[tokio::test]
async fn process_llm_request_can_answer_in_the_models_place() {
    let (server, _instance, _log) = start().await;
    let result = server.generate(request("cache", "hello")).await;
    assert_eq!(result.finish_reason, "stop", "{:?}", result.error);
    assert_eq!(result.text, "from the cache");
}

/// A remote processInputStep sees the step's tools, tool choice and settings, and replaces the
/// tools, settings, provider options, output schema and tool choice; processLLMRequest sees the
/// call as it will be sent, and so does the model.
#[tokio::test]
async fn every_setting_of_a_step_is_seen_and_changed() {
    let (server, _instance, log) = start().await;
    let result = server.generate(request("settings", "look it up")).await;
    assert_eq!(
        logged(&log, "input step"),
        [r#"input step tools ["calculator"] choice auto temperature Some(0.3)"#]
    );
    assert_eq!(
        logged(&log, "request"),
        [
            r#"request tools ["lookup"] choice required temperature Some(0.9) options {"reasoning_effort":"low"}"#
        ]
    );
    let seen = inspected(&result.text);
    assert_eq!(seen["tools"], json!(["lookup"]));
    assert_eq!(seen["tool_choice"], "required");
    assert_eq!(seen["settings"]["temperature"], 0.9);
    assert_eq!(seen["provider_options"], json!({ "reasoning_effort": "low" }));
    assert_eq!(seen["structured_output"], json!({ "type": "object" }));
}

/// processToolResult is told that the tool failed; processOutputStep and processOutputResult
/// see the steps so far.
#[tokio::test]
async fn tool_failures_and_steps_are_shown() {
    let (server, _instance, log) = start().await;
    let result = server.generate(request("failing-tool", "1 +")).await;
    assert_eq!(result.text, "sorry");
    assert_eq!(logged(&log, "tool result"), ["tool result is_error true"]);
    assert_eq!(logged(&log, "output step"), ["output step 0 steps [1]", "output step 1 steps [1, 0]"]);
    assert_eq!(logged(&log, "output result"), [r#"output result steps ["", "sorry"]"#]);
}

/// A remote processAPIError repairs the messages before asking for the retry: the retried call
/// sends the repaired messages.
#[tokio::test]
async fn process_api_error_repairs_the_messages_before_the_retry() {
    let (server, _instance, _log) = start().await;
    let result = server.generate(request("repair", "a very long question")).await;
    let seen = inspected(&result.text);
    let texts: Vec<&str> =
        seen["messages"].as_array().unwrap().iter().filter_map(|m| m["text"].as_str()).collect();
    assert_eq!(texts, ["a shorter question"]);
}

/// A version-1 processor is welcomed with version 1 and gets the version-1 frame: no steps, no
/// step input, no message sources, no tagged system messages; a version-2 one gets them.
#[tokio::test]
async fn a_version_one_processor_still_works() {
    for (max, expected) in [(1, false), (2, true)] {
        let greeter = TestServer::start(CONFIG).await;
        let mut hello = hello_of("v2", &[pb::Hook::ProcessInputStep]);
        hello.max_protocol_version = max;
        let (stream, _sender) = open(greeter.channel().await, common::remote::hello_message(hello)).await;
        let mut stream = stream.expect("accepted");
        let Some(pb::server_message::Message::Welcome(welcome)) =
            stream.message().await.unwrap().unwrap().message
        else {
            panic!("a welcome first")
        };
        assert_eq!(welcome.protocol_version, max);

        let server = TestServer::start(CONFIG).await;

        let log: Log = Arc::default();
        let seen = Arc::clone(&log);
        let mut hello = hello_of("v2", &[pb::Hook::ProcessInputStep]);
        hello.max_protocol_version = max;
        let _instance = serve_hello(
            server.channel().await,
            hello,
            Arc::new(move |call| {
                note(
                    &seen,
                    format!(
                        "sources {} step input {}",
                        !call.message_sources.is_empty(),
                        call.step_input.is_some()
                    ),
                );
                cont()
            }),
        )
        .await;
        let result = server.generate(request("settings", "hi")).await;
        assert!(result.error.is_none(), "{:?}", result.error);
        assert_eq!(
            logged(&log, "sources"),
            [format!("sources {expected} step input {expected}")],
            "version {max}"
        );
    }
}

/// Sanity: the shared processor serves a plain run too.
#[tokio::test]
async fn the_processor_serves_plain_runs() {
    let server = TestServer::start(CONFIG).await;
    let _instance = serve(server.channel().await, "v2", &ALL_HOOKS, answer(Arc::default())).await;
    assert_eq!(server.generate(request("data", "hi")).await.text, "echo: hi");
}
