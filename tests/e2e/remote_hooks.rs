//! Every hook served remotely, each with the arguments the seed gives it and the results it
//! allows: replaced input, a step's model switched, the outgoing prompt rewritten, a rejected
//! model call retried, a tool result rewritten, a step rejected and retried, the response replaced,
//! custom chunks emitted, and per-processor state carried from hook to hook.

use crate::common;

use std::sync::{Arc, Mutex};

use agentwire::server::pb;
use common::remote::{ALL_HOOKS, Answer, call_text, cont, outcome, replace, serve};
use common::{TestServer, inspected, message, request};
use prost_types::value::Kind;

const CONFIG: &str = r#"
[processors.all]
kind = "remote"
timeout_ms = 3000

[[agents]]
id = "input"
model = "mock/echo"
input_processors = ["all"]

[[agents]]
id = "step"
model = "mock/echo"
input_processors = ["all"]

[[agents]]
id = "request"
model = "mock/inspect"
input_processors = ["all"]

[[agents]]
id = "api-error"
model = "mock/script"
error_processors = ["all"]
script = [{ error = { status = 400, message = "context length exceeded" } }, { text = "recovered" }]

[[agents]]
id = "tools"
model = "mock/script"
tools = ["calculator"]
input_processors = ["all"]
output_processors = ["all"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "done" },
]

[[agents]]
id = "retry"
model = "mock/echo"
output_processors = ["all"]
max_processor_retries = 1
"#;

fn user(text: &str) -> pb::Message {
    message("user", text)
}

fn assistant(text: &str) -> pb::Message {
    message("assistant", text)
}

fn number(value: f64) -> prost_types::Value {
    prost_types::Value { kind: Some(Kind::NumberValue(value)) }
}

/// One remote processor serving all nine hooks; what it saw goes to the log.
fn all_hooks(log: Arc<Mutex<Vec<String>>>) -> Answer {
    Arc::new(move |call| {
        let hook = call.hook();
        let note = |entry: String| log.lock().unwrap().push(entry);
        match (call.agent_id.as_str(), hook) {
            ("input", pb::Hook::ProcessInput) => {
                note(format!("input saw {:?}", call_text(call)));
                // State set here travels to the later hooks of this run; a data chunk is emitted.
                let mut result = replace(pb::Replacement {
                    messages: Some(pb::MessageList { messages: vec![user("rewritten")] }),
                    ..Default::default()
                })
                .unwrap();
                result.state = Some(prost_types::Struct {
                    fields: [("seen".to_owned(), number(1.0))].into_iter().collect(),
                });
                result.emit.push(pb::Chunk {
                    r#type: "data-audit".into(),
                    payload: Some(pb::chunk::Payload::Data(pb::DataPayload {
                        data: Some(number(7.0)),
                        ..Default::default()
                    })),
                    ..Default::default()
                });
                Some(result)
            }
            ("input", pb::Hook::ProcessInputStep) => {
                let seen = call.state.as_ref().and_then(|state| state.fields.get("seen")).cloned();
                note(format!("input step state {seen:?}"));
                cont()
            }
            ("step", pb::Hook::ProcessInputStep) => {
                note(format!("step {} model {}", call.step, call.model));
                replace(pb::Replacement { model: Some("mock/inspect".into()), ..Default::default() })
            }
            ("request", pb::Hook::ProcessLlmRequest) => {
                note(format!("request prompt of {} messages for {}", call.prompt.len(), call.model));
                replace(pb::Replacement {
                    prompt: Some(pb::MessageList { messages: vec![user("only this")] }),
                    ..Default::default()
                })
            }
            ("api-error", pb::Hook::ProcessApiError) => {
                note(format!("api error {} {}", call.error_status, call.error_message));
                outcome(pb::hook_result::Outcome::RetryApiCall(pb::RetryApiCall::default()))
            }
            ("tools", pb::Hook::ProcessToolResult) => {
                let tool = call.tool_call.as_ref().map(|tool| tool.tool_name.clone()).unwrap_or_default();
                let result = call.tool_result.as_ref().and_then(|result| result.result.clone());
                note(format!("tool {tool} gave {:?}", common::json(&result)));
                replace(pb::Replacement { tool_result: Some(number(42.0)), ..Default::default() })
            }
            ("tools", pb::Hook::ProcessOutputStep) => {
                let tools: Vec<&str> = call.tool_calls.iter().map(|tool| tool.tool_name.as_str()).collect();
                note(format!("output step {} text {:?} tool calls {tools:?}", call.step, call.text));
                cont()
            }
            ("tools", pb::Hook::ProcessLlmResponse) => {
                let types: Vec<&str> = call.chunks.iter().map(|chunk| chunk.r#type.as_str()).collect();
                note(format!("llm response {} {types:?}", call.step));
                cont()
            }
            ("tools", pb::Hook::ProcessOutputStream) => {
                if let Some(part) = &call.part {
                    note(format!("stream {}", part.r#type));
                }
                cont()
            }
            ("tools", pb::Hook::ProcessOutputResult) => {
                note(format!("result text {:?}", call.text));
                replace(pb::Replacement {
                    messages: Some(pb::MessageList { messages: vec![assistant("final answer")] }),
                    ..Default::default()
                })
            }
            ("retry", pb::Hook::ProcessOutputStep) if call.retry_count == 0 => {
                outcome(pb::hook_result::Outcome::Abort(pb::Abort {
                    reason: "say it again".into(),
                    retry: true,
                    metadata: None,
                }))
            }
            _ => cont(),
        }
    })
}

async fn server_with_all_hooks() -> (TestServer, common::remote::Instance, Arc<Mutex<Vec<String>>>) {
    let server = TestServer::start(CONFIG).await;
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let instance = serve(server.channel().await, "all", &ALL_HOOKS, all_hooks(Arc::clone(&log))).await;
    (server, instance, log)
}

fn logged(log: &Mutex<Vec<String>>, prefix: &str) -> Vec<String> {
    log.lock().unwrap().iter().filter(|entry| entry.starts_with(prefix)).cloned().collect()
}

/// A remote processInput replaces messages, keeps state for later hooks, and emits data chunks.
#[tokio::test]
async fn process_input_replaces_messages_sets_state_and_emits() {
    let (server, _instance, log) = server_with_all_hooks().await;
    let result = server.generate(request("input", "original")).await;
    assert_eq!(result.text, "echo: rewritten");
    assert_eq!(logged(&log, "input saw"), [r#"input saw "original""#]);
    assert_eq!(
        logged(&log, "input step state"),
        ["input step state Some(Value { kind: Some(NumberValue(1.0)) })"]
    );
    let audit: Vec<_> = result.data.iter().filter(|chunk| chunk.r#type == "data-audit").collect();
    assert_eq!(audit.len(), 1, "{:?}", result.data);
}

/// A remote processInputStep switches the step's model.
#[tokio::test]
async fn process_input_step_switches_the_model() {
    let (server, _instance, log) = server_with_all_hooks().await;
    let result = server.generate(request("step", "which model?")).await;
    // mock/inspect answered instead of mock/echo.
    assert_eq!(inspected(&result.text)["messages"][0]["text"], "which model?");
    assert_eq!(logged(&log, "step"), ["step 0 model mock/echo"]);
}

/// A remote processLLMRequest rewrites the outgoing prompt only, not the stored messages.
#[tokio::test]
async fn process_llm_request_rewrites_the_outgoing_prompt() {
    let (server, _instance, log) = server_with_all_hooks().await;
    let result = server.generate(request("request", "the real question")).await;
    let seen = inspected(&result.text);
    assert_eq!(seen["messages"].as_array().unwrap().len(), 1);
    assert_eq!(seen["messages"][0]["text"], "only this");
    assert_eq!(logged(&log, "request"), ["request prompt of 1 messages for mock/inspect"]);
    // Transient: the run's own messages are unchanged.
    let kept: Vec<String> = result.messages.iter().map(common::message_text).collect();
    assert_eq!(kept[0], "the real question");
}

/// A remote processAPIError asks for a retry, and the model is called again.
#[tokio::test]
async fn process_api_error_retries_a_rejected_call() {
    let (server, _instance, log) = server_with_all_hooks().await;
    let result = server.generate(request("api-error", "go")).await;
    assert_eq!(result.text, "recovered");
    assert_eq!(logged(&log, "api error"), ["api error 400 context length exceeded"]);
}

/// A tool step reaches processOutputStep and processToolResult remotely, and a rewritten result is used.
#[tokio::test]
async fn tool_steps_reach_every_output_hook() {
    let (server, _instance, log) = server_with_all_hooks().await;
    let chunks = server.stream(request("tools", "add")).await;
    let tool_result = chunks
        .iter()
        .find_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::ToolResult(result)) => Some(common::json(&result.result)),
            _ => None,
        })
        .expect("a tool-result chunk");
    assert_eq!(tool_result, 42.0);
    assert_eq!(
        logged(&log, "tool"),
        [r#"tool calculator gave Object {"expression": String("1 + 1"), "value": Number(2)}"#]
    );
    assert_eq!(
        logged(&log, "output step"),
        [r#"output step 0 text "" tool calls ["calculator"]"#, r#"output step 1 text "done" tool calls []"#]
    );
    let responses = logged(&log, "llm response");
    assert_eq!(responses.len(), 2, "{responses:?}");
    assert!(responses[0].contains("tool-call") && responses[1].contains("text-delta"), "{responses:?}");
    assert!(logged(&log, "stream").contains(&"stream text-delta".to_owned()));
    assert_eq!(logged(&log, "result text"), [r#"result text "done""#]);
    let finish = chunks.last().unwrap();
    match &finish.payload {
        Some(pb::chunk::Payload::Finish(finish)) => assert_eq!(finish.text, "final answer"),
        other => panic!("the run did not finish: {other:?}"),
    }
}

/// A remote processOutputStep rejects a step with `retry`, and the model answers again with the feedback.
#[tokio::test]
async fn process_output_step_may_reject_a_step_for_a_retry() {
    let (server, _instance, _log) = server_with_all_hooks().await;
    let result = server.generate(request("retry", "once more")).await;
    assert_eq!(result.finish_reason, "stop");
    assert_eq!(result.steps.len(), 2, "the rejected step and its retry");
    assert_eq!(result.text, "echo: once more");
}
