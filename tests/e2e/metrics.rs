//! `GET /metrics` through a real server: runs by outcome, tripwires by processor, hook and model
//! latency, tokens, remote instances and store size, in the Prometheus text format.

use crate::common;

use std::sync::Arc;

use agentwire::server::pb;
use common::remote::{hello_of, serve_hello};
use common::{TestServer, in_thread, request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CONFIG: &str = r#"
[processors.m-guard]
kind = "content-filter"
blocked_words = ["forbidden"]

[processors.m-remote]
kind = "remote"
timeout_ms = 2000

[[agents]]
id = "m-echo"
model = "mock/echo"
memory = { last_messages = 10 }
input_processors = ["m-guard"]
"#;

async fn get(server: &TestServer, path: &str) -> String {
    let mut connection = tokio::net::TcpStream::connect(server.metrics_addr).await.unwrap();
    connection.write_all(format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    connection.read_to_string(&mut response).await.unwrap();
    response
}

/// The value of the series `series` (name and labels, exactly as rendered).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

/// /metrics counts runs by outcome, tripwires by processor, hook and model latency, tokens and
/// remote instances.
#[tokio::test]
async fn metrics_count_runs_tripwires_hooks_models_and_instances() {
    let server = TestServer::start(CONFIG).await;
    let _remote = serve_hello(
        server.channel().await,
        hello_of("m-remote", &[pb::Hook::ProcessInput]),
        Arc::new(|_| None),
    )
    .await;
    server.generate(in_thread("m-echo", "hello there", "m-thread")).await;
    server.generate(request("m-echo", "hi")).await;
    server.generate(request("m-echo", "a forbidden word")).await;

    let response = get(&server, "/metrics").await;
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.contains("# TYPE agentwire_hook_duration_seconds histogram"));
    assert_eq!(value(&response, "agentwire_runs_total{agent=\"m-echo\",outcome=\"finished\"}"), 2.0);
    assert_eq!(value(&response, "agentwire_runs_total{agent=\"m-echo\",outcome=\"tripwire\"}"), 1.0);
    assert_eq!(value(&response, "agentwire_tripwires_total{processor=\"m-guard\"}"), 1.0);
    assert_eq!(
        value(
            &response,
            "agentwire_hook_duration_seconds_count{processor=\"m-guard\",hook=\"processInput\"}"
        ),
        3.0
    );
    assert!(
        value(
            &response,
            "agentwire_hook_duration_seconds_bucket{processor=\"m-guard\",hook=\"processInput\",le=\"+Inf\"}"
        ) == 3.0
    );
    assert!(value(&response, "agentwire_model_duration_seconds_count{model=\"mock/echo\"}") >= 2.0);
    assert_eq!(value(&response, "agentwire_remote_instances{processor=\"m-remote\"}"), 1.0);
    assert!(value(&response, "agentwire_store_bytes") > 0.0);

    assert!(get(&server, "/other").await.starts_with("HTTP/1.1 404"));
}
