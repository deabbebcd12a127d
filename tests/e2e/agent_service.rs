//! AgentService through the real server: listing agents, streaming and unary runs, and the
//! status codes of bad requests.

use crate::common;

use agentwire::server::pb;
use common::{TestServer, message, names, request, text, types};
use tonic::Code;

const CONFIG: &str = r#"
[processors.no-secrets]
kind = "content-filter"
blocked_words = ["secret"]

[[agents]]
id = "echo"
name = "Echo"
instructions = "You repeat what the user says."
model = "mock/echo"
input_processors = ["no-secrets"]
output_processors = ["word-counter"]

[[agents]]
id = "calc"
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "2 + 2" } }] },
  { text = "The answer is 4" },
]

[[agents]]
id = "clumsy"
model = "mock/script"
tools = ["calculator"]
script = [
  { tool_calls = [
      { name = "calculator", args = { expr = "1 + 1" } },
      { name = "calculator", args = { expression = "1 +" } },
      { name = "hammer" },
  ] },
  { text = "sorry" },
]
"#;

/// A streamed run starts with `start`, frames each step, and ends with exactly one `finish`.
#[tokio::test]
async fn stream_frames_the_answer_between_start_and_finish() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("echo", "hello brave world")).await;
    assert_eq!(text(&chunks), "echo: hello brave world");
    let chunk_types = types(&chunks);
    assert_eq!(chunk_types.first().map(String::as_str), Some("start"));
    assert_eq!(chunk_types[1], "step-start");
    assert_eq!(chunk_types.iter().filter(|kind| *kind == "text-delta").count(), 4, "one delta per word");
    let tail: Vec<&str> = chunk_types.iter().rev().take(3).rev().map(String::as_str).collect();
    assert_eq!(tail, ["step-finish", "data-word-count", "finish"]);
    let run_id = &chunks[0].run_id;
    assert!(!run_id.is_empty());
    assert!(chunks.iter().all(|chunk| &chunk.run_id == run_id), "every chunk carries the run id");
    let Some(pb::chunk::Payload::Finish(finish)) = &chunks.last().unwrap().payload else {
        panic!("finish payload")
    };
    assert_eq!(finish.finish_reason, "stop");
    assert_eq!(finish.text, "echo: hello brave world");
}

/// The unary call returns the text, finish reason, usage, steps and the run's messages.
#[tokio::test]
async fn generate_returns_the_whole_result() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(request("echo", "hi")).await;
    assert_eq!(result.text, "echo: hi");
    assert_eq!(result.finish_reason, "stop");
    assert!(!result.run_id.is_empty());
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.steps[0].model, "mock/echo");
    let usage = result.usage.unwrap();
    assert_eq!(usage.output_tokens, 2);
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    let roles: Vec<&str> = result.messages.iter().map(|message| message.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert!(result.tripwire.is_none() && result.error.is_none());
}

/// A tool call runs the tool and the loop calls the model again with its result.
#[tokio::test]
async fn tool_calls_loop_until_the_model_answers() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("calc", "what is 2 + 2?")).await;
    let chunk_types = types(&chunks);
    let tool_result = chunks.iter().find_map(|chunk| match &chunk.payload {
        Some(pb::chunk::Payload::ToolResult(result)) => Some(result.clone()),
        _ => None,
    });
    let tool_result = tool_result.expect("a tool-result chunk");
    assert_eq!(common::json(&tool_result.result)["value"], 4.0);
    assert!(!tool_result.is_error);
    assert_eq!(chunk_types.iter().filter(|kind| *kind == "step-start").count(), 2);
    assert_eq!(text(&chunks), "The answer is 4");

    let result = server.generate(request("calc", "what is 2 + 2?")).await;
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.steps[0].finish_reason, "tool-calls");
    assert_eq!(result.steps[0].tool_calls[0].tool_name, "calculator");
    assert_eq!(result.steps[1].finish_reason, "stop");
    let roles: Vec<&str> = result.messages.iter().map(|message| message.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
}

/// `max_steps` bounds the loop: with one step the run ends after the first tool round.
#[tokio::test]
async fn max_steps_override_bounds_the_loop() {
    let server = TestServer::start(CONFIG).await;
    let mut limited = request("calc", "2 + 2?");
    limited.max_steps = Some(1);
    let result = server.generate(limited).await;
    assert_eq!(result.steps.len(), 1);
    assert_eq!(result.finish_reason, "tool-calls");
    assert_eq!(result.steps[0].tool_results.len(), 1, "the step's tools still ran");
}

/// ListAgents and GetAgent describe the configured agents.
#[tokio::test]
async fn agents_are_listed_and_described() {
    let server = TestServer::start(CONFIG).await;
    let mut client = server.client().await;
    let agents = client.list_agents(pb::ListAgentsRequest {}).await.unwrap().into_inner().agents;
    let ids: Vec<&str> = agents.iter().map(|agent| agent.id.as_str()).collect();
    assert_eq!(ids, ["calc", "clumsy", "echo"]);
    let echo = client.get_agent(pb::GetAgentRequest { agent_id: "echo".into() }).await.unwrap().into_inner();
    assert_eq!(echo.name, "Echo");
    assert_eq!(echo.model, "mock/echo");
    assert_eq!(echo.input_processors, ["no-secrets"]);
    assert_eq!(echo.output_processors, ["word-counter"]);
    assert_eq!(echo.max_steps, 5);
    let missing = client.get_agent(pb::GetAgentRequest { agent_id: "nope".into() }).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert!(missing.message().contains("nope"));
}

/// Bad requests are refused with the right code and a message naming the field.
#[tokio::test]
async fn bad_requests_name_the_field() {
    let server = TestServer::start(CONFIG).await;
    let mut client = server.client().await;
    let mut cases: Vec<(pb::RunRequest, Code, &str)> = vec![
        (request("ghost", "hi"), Code::NotFound, "agent `ghost` not found"),
        (request("", "hi"), Code::InvalidArgument, "agent_id"),
        (request("echo", ""), Code::InvalidArgument, "text"),
    ];
    let mut unknown_processor = request("echo", "hi");
    unknown_processor.output_processors = names(&["word-counter", "nonexistent"]);
    cases.push((unknown_processor, Code::InvalidArgument, "output_processors.names[1]"));
    let mut needs_options = request("echo", "hi");
    needs_options.input_processors = names(&["content-filter"]);
    cases.push((needs_options, Code::InvalidArgument, "input_processors.names[0]"));
    let mut bad_role = request("echo", "");
    bad_role.messages = vec![pb::Message {
        role: "wizard".into(),
        parts: vec![pb::Part { part: Some(pb::part::Part::Text(pb::TextPart { text: "hi".into() })) }],
        ..Default::default()
    }];
    cases.push((bad_role, Code::InvalidArgument, "messages[0].role"));
    let mut empty_parts = request("echo", "");
    empty_parts.messages = vec![pb::Message { role: "user".into(), ..Default::default() }];
    cases.push((empty_parts, Code::InvalidArgument, "messages[0].parts"));
    let mut both = request("echo", "hi");
    both.messages = vec![pb::Message { role: "user".into(), ..Default::default() }];
    cases.push((both, Code::InvalidArgument, "not both"));
    let mut too_many_steps = request("echo", "hi");
    too_many_steps.max_steps = Some(0);
    cases.push((too_many_steps, Code::InvalidArgument, "max_steps"));

    for (bad, code, needle) in cases {
        for status in [
            client.generate(bad.clone()).await.unwrap_err(),
            client.stream(bad.clone()).await.expect_err("stream refused"),
        ] {
            assert_eq!(status.code(), code, "{needle}: {status:?}");
            assert!(status.message().contains(needle), "`{}` should name `{needle}`", status.message());
        }
    }
}

/// Messages in the request are used as given, with their roles and parts.
#[tokio::test]
async fn messages_input_is_accepted() {
    let server = TestServer::start(CONFIG).await;
    let mut run = request("echo", "");
    run.messages =
        vec![message("user", "first"), message("assistant", "echo: first"), message("user", "second")];
    let result = server.generate(run).await;
    assert_eq!(result.text, "echo: second");
}

/// A failing tool call becomes an error result the model sees on the next step; the run goes on.
#[tokio::test]
async fn failing_tools_become_error_results() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(request("clumsy", "break things")).await;
    assert_eq!(result.text, "sorry");
    assert_eq!(result.finish_reason, "stop");
    let errors: Vec<(bool, serde_json::Value)> = result.steps[0]
        .tool_results
        .iter()
        .map(|tool_result| (tool_result.is_error, common::json(&tool_result.result)))
        .collect();
    assert_eq!(
        errors,
        [
            (true, "invalid arguments for tool `calculator`: `expression` must be a string".into()),
            (true, "tool `calculator` failed: unexpected end of expression".into()),
            (true, "unknown tool `hammer`".into()),
        ]
    );
}
