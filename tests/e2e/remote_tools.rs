//! Remote tools through the real server: an instance registers a tool (name, description,
//! schema) on the processor stream and executes calls; arguments are checked first; a failing,
//! missing or slow tool is a tool error the model sees, never a failed run.

use crate::common;

use std::sync::Arc;

use agentwire::server::pb;
use common::remote::{Behaviour, ToolAnswer, hello_message, open, serve_with};
use common::{TestServer, inspected, request, text};
use serde_json::json;
use tonic::Code;

const CONFIG: &str = r#"
[tools.weather]
kind = "remote"
server = "tool-server"
timeout_ms = 300

[[agents]]
id = "forecaster"
model = "mock/script"
tools = ["weather"]
script = [
  { tool_calls = [{ name = "weather", args = { city = "Paris" } }] },
  { text = "done" },
]

[[agents]]
id = "sloppy"
model = "mock/script"
tools = ["weather"]
script = [
  { tool_calls = [{ name = "weather", args = { city = 5 } }] },
  { text = "done" },
]

[[agents]]
id = "looker"
model = "mock/inspect"
tools = ["weather", "calculator"]
"#;

fn hello(parameters: serde_json::Value) -> pb::Hello {
    let mut hello = common::remote::hello_of("tool-server", &[]);
    let parameters = match agentwire::server::value::to_proto(&parameters).kind {
        Some(prost_types::value::Kind::StructValue(fields)) => Some(fields),
        _ => None,
    };
    hello.tools.push(pb::ToolSpec {
        name: "weather".into(),
        description: "Weather by city".into(),
        parameters,
    });
    hello
}

fn city_schema() -> serde_json::Value {
    json!({ "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] })
}

async fn serve_tool(server: &TestServer, tools: ToolAnswer) -> common::remote::Instance {
    let behaviour = Behaviour { tools: Some(tools), ..Behaviour::default() };
    serve_with(server.channel().await, hello(city_schema()), Arc::new(|_| None), behaviour).await
}

fn tool_results(chunks: &[pb::Chunk]) -> Vec<(serde_json::Value, bool)> {
    chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::ToolResult(result)) => {
                Some((common::json(&result.result), result.is_error))
            }
            _ => None,
        })
        .collect()
}

/// A tool served by a connected instance is offered, called and its result used in the loop.
#[tokio::test]
async fn a_remote_tool_runs_in_the_tool_loop() {
    let server = TestServer::start(CONFIG).await;
    let instance = serve_tool(
        &server,
        Arc::new(|call| {
            let city = common::json(&call.args)["city"].as_str().unwrap_or_default().to_owned();
            Some(pb::ToolOutput {
                result: Some(agentwire::server::value::to_proto(&json!({ "city": city, "temp": 21 }))),
                ..Default::default()
            })
        }),
    )
    .await;
    let chunks = server.stream(request("forecaster", "weather?")).await;
    assert_eq!(text(&chunks), "done");
    assert_eq!(tool_results(&chunks), [(json!({ "city": "Paris", "temp": 21 }), false)]);
    assert!(
        instance.events().iter().any(|event| event.starts_with("tool weather ")),
        "{:?}",
        instance.events()
    );
}

/// Arguments that do not match the tool's schema are a tool error, and the instance is never called.
#[tokio::test]
async fn arguments_are_checked_before_the_call() {
    let server = TestServer::start(CONFIG).await;
    let instance = serve_tool(&server, Arc::new(|_| Some(pb::ToolOutput::default()))).await;
    let chunks = server.stream(request("sloppy", "weather?")).await;
    assert_eq!(text(&chunks), "done", "the run goes on");
    let results = tool_results(&chunks);
    assert!(results[0].1, "{results:?}");
    let message = results[0].0.as_str().unwrap();
    assert!(message.contains("invalid arguments") && message.contains("/city"), "{message}");
    assert!(!instance.events().iter().any(|event| event.starts_with("tool ")), "never called");
}

/// A failing or slow remote tool is a tool error the model sees, never a failed run.
#[tokio::test]
async fn failing_and_slow_tools_are_tool_errors() {
    let server = TestServer::start(CONFIG).await;
    let failing = serve_tool(
        &server,
        Arc::new(|_| {
            Some(pb::ToolOutput { error: "the weather service is down".into(), ..Default::default() })
        }),
    )
    .await;
    let chunks = server.stream(request("forecaster", "weather?")).await;
    let results = tool_results(&chunks);
    assert!(
        results[0].1 && results[0].0.as_str().unwrap().contains("the weather service is down"),
        "{results:?}"
    );
    assert_eq!(text(&chunks), "done");
    failing.kill();

    let _silent = serve_tool(&server, Arc::new(|_| None)).await;
    let chunks = server.stream(request("forecaster", "weather?")).await;
    let results = tool_results(&chunks);
    assert!(results[0].1 && results[0].0.as_str().unwrap().contains("timed out after 300 ms"), "{results:?}");
    assert_eq!(text(&chunks), "done");
}

/// A step offers a remote tool only while an instance serves it, with the instance's schema.
#[tokio::test]
async fn steps_offer_remote_tools_while_served() {
    let server = TestServer::start(CONFIG).await;
    let offered = inspected(&server.generate(request("looker", "tools?")).await.text);
    assert_eq!(offered["tools"], json!(["calculator"]));
    let _instance = serve_tool(&server, Arc::new(|_| None)).await;
    let offered = inspected(&server.generate(request("looker", "tools?")).await.text);
    assert_eq!(offered["tools"], json!(["weather", "calculator"]));
}

/// A Hello offering malformed or duplicate tools is refused, naming the field.
#[tokio::test]
async fn bad_tool_registrations_are_refused() {
    let server = TestServer::start(CONFIG).await;
    let (refused, _sender) = open(server.channel().await, hello_message(hello(json!({ "type": 7 })))).await;
    let status = refused.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("hello.tools[0].parameters"), "{}", status.message());
}
