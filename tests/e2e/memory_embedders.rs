//! The `openai` embedder against a fake OpenAI-compatible `/v1/embeddings` server over real HTTP
//! on loopback: recall works through it, batches respect `batch_size`, a failing endpoint fails
//! the run clearly, and vectors of another embedder are refused, never compared.

use crate::common;

use std::sync::{Arc, Mutex};

use agentwire::memory::embedder::Lexical;
use common::fake_provider::read_request;
use common::{TestServer, error, in_thread, inspected};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// What the fake endpoint saw: one entry per request.
#[derive(Debug, Clone, Default)]
struct Seen(Arc<Mutex<Vec<Value>>>);

/// Serves `/v1/embeddings` on loopback, embedding with the lexical embedder (or failing with 500).
async fn fake_endpoint(failing: bool) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Seen::default();
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let recorded = recorded.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(socket);
                loop {
                    let Some(request) = read_request(&mut reader).await else { return };
                    let (path, body) = (request.path, request.body);
                    recorded.0.lock().unwrap().push(json!({ "path": path, "body": body }));
                    let (status, answer) = if failing {
                        ("500 Internal Server Error", json!({ "error": { "message": "model overloaded" } }))
                    } else {
                        let data: Vec<Value> = body["input"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .enumerate()
                            .map(|(index, text)| json!({ "index": index, "embedding": Lexical::embed_one(text.as_str().unwrap()) }))
                            .collect();
                        ("200 OK", json!({ "object": "list", "data": data, "model": body["model"] }))
                    };
                    let answer = answer.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    reader.get_mut().write_all(response.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (base_url, seen)
}

fn config(base_url: &str) -> String {
    format!(
        r#"
[embedders.fake]
kind = "openai"
base_url = "{base_url}"
model = "fake-embed"
batch_size = 2

[[agents]]
id = "writer"
model = "mock/echo"
memory = {{ last_messages = 0, semantic_recall = {{ embedder = "fake" }} }}

[[agents]]
id = "reader"
model = "mock/inspect"
memory = {{ last_messages = 0, semantic_recall = {{ embedder = "fake", top_k = 1, message_range = 0 }} }}

[[agents]]
id = "lexical-writer"
model = "mock/echo"
memory = {{ last_messages = 0, semantic_recall = {{}} }}
"#
    )
}

/// Recall works through an OpenAI-compatible endpoint, called in batches of `batch_size`.
#[tokio::test]
async fn recall_through_an_openai_compatible_endpoint() {
    let (base_url, seen) = fake_endpoint(false).await;
    let server = TestServer::start(&config(&base_url)).await;
    for fact in ["my favourite colour is teal", "the train leaves at noon"] {
        assert_eq!(server.generate(in_thread("writer", fact, "t")).await.finish_reason, "stop");
    }
    let prompt =
        inspected(&server.generate(in_thread("reader", "which colour is my favourite?", "t")).await.text);
    let texts: Vec<&str> =
        prompt["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["my favourite colour is teal", "which colour is my favourite?"]);
    let requests = seen.0.lock().unwrap().clone();
    assert!(requests.iter().all(|request| request["path"] == "/v1/embeddings"));
    assert!(requests.iter().all(|request| request["body"]["model"] == "fake-embed"));
    assert!(
        requests.iter().all(|request| request["body"]["input"].as_array().unwrap().len() <= 2),
        "{requests:?}"
    );
}

/// An endpoint that fails makes the run fail with an error naming the embedder and the status.
#[tokio::test]
async fn a_failing_endpoint_fails_the_run_clearly() {
    let (base_url, _seen) = fake_endpoint(true).await;
    let server = TestServer::start(&config(&base_url)).await;
    let chunks = server.stream(in_thread("writer", "remember this", "t")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("`fake`") && failure.message.contains("500"), "{}", failure.message);
    assert!(failure.message.contains("model overloaded"));
}

/// Vectors made by one embedder are never searched with another's query.
#[tokio::test]
async fn vectors_of_another_embedder_are_refused() {
    let (base_url, _seen) = fake_endpoint(false).await;
    let server = TestServer::start(&config(&base_url)).await;
    server.generate(in_thread("lexical-writer", "my favourite colour is teal", "t")).await;
    let chunks = server.stream(in_thread("reader", "which colour?", "t")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(
        failure.message.contains("lexical-v1") && failure.message.contains("openai:fake-embed"),
        "{}",
        failure.message
    );
}
