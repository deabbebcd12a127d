//! The seed's example processors, built in: `tool-result-redactor` (`RedactToolResult`),
//! `dynamic-model` (`DynamicModelProcessor`) and `reasoning-transformer` (`ReasoningTransformer`),
//! through the real server — what the client streams, what the next model call sees, and what
//! memory keeps.

use crate::common;

use std::sync::Arc;

use agentwire::server::pb;
use agentwire::server::value::to_proto;
use common::remote::{Behaviour, hello_of, serve_with};
use common::{TestServer, in_thread, inspected, request};
use serde_json::{Value, json};

const CONFIG: &str = r#"
[tools.lookup-customer]
kind = "remote"
server = "crm"

[processors.redact-customer]
kind = "tool-result-redactor"
tools = ["lookup-customer"]
fields = ["ssn", "email"]

[processors.inspect-after-tools]
kind = "dynamic-model"
after_tool_calls = "mock/inspect"

[processors.router]
kind = "dynamic-model"
by_context = [{ key = "tier", value = "premium", model = "mock/inspect" }]

[processors.finisher]
kind = "dynamic-model"
after_tool_calls = "mock/inspect"
no_tools_after_step = 1

[processors.carry-reasoning]
kind = "reasoning-transformer"

[processors.drop-reasoning]
kind = "reasoning-transformer"
mode = "drop"

[[agents]]
id = "crm"
model = "mock/script"
tools = ["lookup-customer"]
input_processors = ["inspect-after-tools"]
output_processors = ["redact-customer"]
memory = { last_messages = 10 }
script = [{ tool_calls = [{ name = "lookup-customer", args = { id = "c-7" } }] }]

[[agents]]
id = "tiered"
model = "mock/echo"
input_processors = ["router"]

[[agents]]
id = "thinker"
model = "mock/script"
tools = ["calculator"]
input_processors = ["finisher", "carry-reasoning"]
script = [{ reasoning = "Two and two make four.", tool_calls = [{ name = "calculator", args = { expression = "2 + 2" } }] }]
"#;

/// A CRM instance serving `lookup-customer` with personal data, nested and serialized.
async fn serve_crm(server: &TestServer) -> common::remote::Instance {
    let mut hello = hello_of("crm", &[]);
    hello.tools.push(pb::ToolSpec {
        name: "lookup-customer".into(),
        description: "A customer".into(),
        parameters: None,
    });
    let customer = json!({
        "name": "Ada", "ssn": "078-05-1120", "email": "ada@example.com",
        "contacts": [{ "EMAIL": "ada@work.example" }],
        "raw": "{\"ssn\":\"078-05-1120\"}",
    });
    let tools = Arc::new(move |_: &pb::ToolInvocation| {
        Some(pb::ToolOutput { result: Some(to_proto(&customer)), ..Default::default() })
    });
    serve_with(
        server.channel().await,
        hello,
        Arc::new(|_| None),
        Behaviour { tools: Some(tools), ..Behaviour::default() },
    )
    .await
}

/// The tool-result chunks' results.
fn tool_results(chunks: &[pb::Chunk]) -> Vec<Value> {
    chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::ToolResult(result)) => Some(common::json(&result.result)),
            _ => None,
        })
        .collect()
}

/// `tool-result-redactor` replaces the named fields at any depth (case ignored, inside serialized
/// JSON too) before the client, the next model call and memory see the result.
#[tokio::test]
async fn tool_results_are_redacted_for_the_client_the_model_and_memory() {
    let server = TestServer::start(CONFIG).await;
    let _crm = serve_crm(&server).await;
    let chunks = server.stream(in_thread("crm", "Who is c-7?", "support")).await;
    let redacted = json!({
        "name": "Ada", "ssn": "[REDACTED]", "email": "[REDACTED]",
        "contacts": [{ "EMAIL": "[REDACTED]" }],
        "raw": "{\"ssn\":\"[REDACTED]\"}",
    });
    assert_eq!(tool_results(&chunks), std::slice::from_ref(&redacted));
    let seen = inspected(&common::text(&chunks));
    let tool_message =
        seen["messages"].as_array().unwrap().iter().find(|message| message["role"] == "tool").unwrap();
    assert_eq!(tool_message["parts"][0]["result"], redacted, "the model sees the redacted result");
    let stored = server.stored_texts("support").await.join(" ");
    assert!(!stored.contains("078-05-1120") && !stored.contains("ada@"), "{stored}");
}

/// `dynamic-model` picks the model of every step from the run's `request_context`, and leaves
/// runs without a matching value on the agent's model.
#[tokio::test]
async fn the_model_follows_the_request_context() {
    let server = TestServer::start(CONFIG).await;
    let mut premium = request("tiered", "hello");
    premium.request_context = [("tier".to_owned(), "premium".to_owned())].into();
    let answer = server.generate(premium).await;
    assert!(inspected(&answer.text)["messages"].is_array(), "mock/inspect answered: {}", answer.text);
    let mut basic = request("tiered", "hello");
    basic.request_context = [("tier".to_owned(), "basic".to_owned())].into();
    assert_eq!(server.generate(basic).await.text, "echo: hello");
}

/// `dynamic-model` switches the model after a step with tool calls and takes the tools away from
/// `no_tools_after_step` on; `reasoning-transformer` carries the first model's reasoning over to
/// the next as `<thinking>` text, while the stored answer keeps it as reasoning.
#[tokio::test]
async fn a_switched_model_gets_the_reasoning_as_text_and_no_tools() {
    let server = TestServer::start(CONFIG).await;
    let answer = server.generate(request("thinker", "2 + 2?")).await;
    let seen = inspected(&answer.text);
    assert_eq!(seen["tool_choice"], "none", "{seen}");
    let assistant =
        seen["messages"].as_array().unwrap().iter().find(|message| message["role"] == "assistant").unwrap();
    assert_eq!(
        assistant["parts"][0],
        json!({ "type": "text", "text": "<thinking>Two and two make four.</thinking>" })
    );
    let kept =
        answer.messages.iter().find(|message| message.role == "assistant").expect("an assistant message");
    assert!(
        matches!(&kept.parts[0].part, Some(pb::part::Part::Reasoning(reasoning)) if reasoning.text == "Two and two make four."),
        "{kept:?}"
    );
}

/// `reasoning-transformer` with `mode = "drop"` leaves reasoning out of the prompt.
#[tokio::test]
async fn dropped_reasoning_never_reaches_the_next_model() {
    let server = TestServer::start(CONFIG).await;
    let mut run = request("thinker", "2 + 2?");
    run.input_processors = common::names(&["finisher", "drop-reasoning"]);
    let seen = inspected(&server.generate(run).await.text);
    let assistant =
        seen["messages"].as_array().unwrap().iter().find(|message| message["role"] == "assistant").unwrap();
    assert!(
        assistant["parts"].as_array().unwrap().iter().all(|part| part["type"] == "tool-call"),
        "{assistant}"
    );
}
