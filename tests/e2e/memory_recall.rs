//! Semantic recall through the real server, seen through `mock/inspect`: hits and their
//! neighbours, thread and resource scope (never across resources), threshold, no duplicates with
//! history, and the Search RPC.

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::{TestServer, inspected, request};
use serde_json::Value;
use tonic::Code;

const CONFIG: &str = r#"
[[agents]]
id = "writer"
model = "mock/echo"
memory = { last_messages = 0, semantic_recall = {} }

[[agents]]
id = "thread-recall"
model = "mock/inspect"
memory = { last_messages = 0, semantic_recall = { top_k = 1, message_range = 0 } }

[[agents]]
id = "with-neighbours"
model = "mock/inspect"
memory = { last_messages = 0, semantic_recall = { top_k = 1, message_range = { before = 1, after = 1 } } }

[[agents]]
id = "resource-recall"
model = "mock/inspect"
memory = { last_messages = 0, semantic_recall = { top_k = 2, message_range = 0, scope = "resource" } }

[[agents]]
id = "picky"
model = "mock/inspect"
memory = { last_messages = 0, semantic_recall = { top_k = 4, message_range = 0, threshold = 0.99 } }

[[agents]]
id = "history-and-recall"
model = "mock/inspect"
memory = { last_messages = 10, semantic_recall = { top_k = 4, message_range = 1 } }
"#;

fn run(agent: &str, text: &str, thread: &str, resource: &str) -> pb::RunRequest {
    let mut run = request(agent, text);
    run.thread_id = thread.into();
    run.resource_id = resource.into();
    run
}

async fn write(server: &TestServer, thread: &str, resource: &str, texts: &[&str]) {
    for text in texts {
        server.generate(run("writer", text, thread, resource)).await;
    }
}

async fn prompt(server: &TestServer, agent: &str, text: &str, thread: &str, resource: &str) -> Value {
    inspected(&server.generate(run(agent, text, thread, resource)).await.text)
}

fn message_texts(prompt: &Value) -> Vec<String> {
    prompt["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap().to_owned()).collect()
}

fn system_text(prompt: &Value) -> String {
    prompt["system"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect::<Vec<_>>().join("\n")
}

const FACTS: &[&str] =
    &["my favourite colour is teal", "the train leaves at noon", "I play the cello on sundays"];

/// The most similar stored message of the thread comes back as a message before the new one.
#[tokio::test]
async fn recall_brings_the_most_similar_message() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "t", "alice", FACTS).await;
    let seen =
        message_texts(&prompt(&server, "thread-recall", "which colour is my favourite?", "t", "alice").await);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].contains("favourite colour is teal"), "{seen:?}");
    assert_eq!(seen[1], "which colour is my favourite?");
}

/// `message_range` adds the neighbours of each hit, in thread order.
#[tokio::test]
async fn neighbours_come_with_each_hit() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "t", "alice", FACTS).await;
    let seen =
        message_texts(&prompt(&server, "with-neighbours", "when does the train leave?", "t", "alice").await);
    assert_eq!(seen.len(), 4, "hit, one before, one after, and the new message: {seen:?}");
    assert!(seen.iter().any(|text| text.contains("train leaves at noon")));
    assert_eq!(seen.last().unwrap(), "when does the train leave?");
}

/// Resource scope recalls other threads of the same resource as a delimited system message, and
/// never another resource's messages.
#[tokio::test]
async fn resource_scope_spans_threads_but_never_resources() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "alice-1", "alice", FACTS).await;
    write(&server, "bob-1", "bob", &["my favourite colour is crimson"]).await;
    let seen = prompt(&server, "resource-recall", "which colour is my favourite?", "alice-2", "alice").await;
    let system = system_text(&seen);
    assert!(system.contains("<remembered_from_other_conversations>"), "{system}");
    assert!(system.contains("<conversation thread=\"alice-1\">"));
    assert!(system.contains("favourite colour is teal"));
    assert!(system.contains("never instructions"));
    assert!(!system.contains("crimson"), "bob's messages never reach alice's runs");
    assert_eq!(message_texts(&seen), ["which colour is my favourite?"], "other threads are not messages");

    let thread_only =
        prompt(&server, "thread-recall", "which colour is my favourite?", "alice-3", "alice").await;
    assert_eq!(message_texts(&thread_only).len(), 1, "thread scope sees nothing in a new thread");
}

/// Hits below the threshold are dropped.
#[tokio::test]
async fn threshold_drops_weak_hits() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "t", "alice", FACTS).await;
    let seen = message_texts(&prompt(&server, "picky", "which colour is my favourite?", "t", "alice").await);
    assert_eq!(seen, ["which colour is my favourite?"]);
}

/// What history already loaded is not added again by recall.
#[tokio::test]
async fn recall_skips_what_history_loaded() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "t", "alice", FACTS).await;
    let seen = message_texts(
        &prompt(&server, "history-and-recall", "which colour is my favourite?", "t", "alice").await,
    );
    assert_eq!(seen.len(), FACTS.len() * 2 + 1, "{seen:?}");
    let teal = seen.iter().filter(|text| text.as_str() == "my favourite colour is teal").count();
    assert_eq!(teal, 1);
}

/// SearchMessages finds similar messages within its scope, best first, and names bad fields.
#[tokio::test]
async fn search_rpc_finds_messages_within_scope() {
    let server = TestServer::start(CONFIG).await;
    write(&server, "a1", "alice", FACTS).await;
    write(&server, "b1", "bob", &["my favourite colour is crimson"]).await;
    let mut client = MemoryServiceClient::new(server.channel().await);
    let search = |scope: pb::search_messages_request::Scope| pb::SearchMessagesRequest {
        query: "favourite colour".into(),
        scope: Some(scope),
        top_k: 2,
        threshold: None,
        embedder: String::new(),
        ..Default::default()
    };
    let hits = client
        .search_messages(search(pb::search_messages_request::Scope::ResourceId("alice".into())))
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert_eq!(hits.len(), 2);
    assert!(hits[0].score >= hits[1].score);
    assert!(hits.iter().all(|hit| hit.message.as_ref().unwrap().resource_id == "alice"));
    let by_thread = client
        .search_messages(pb::SearchMessagesRequest {
            thread_resource_id: "bob".into(),
            ..search(pb::search_messages_request::Scope::ThreadId("b1".into()))
        })
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert_eq!(by_thread[0].message.as_ref().unwrap().thread_id, "b1");

    let no_scope = pb::SearchMessagesRequest { query: "x".into(), ..Default::default() };
    let status = client.search_messages(no_scope).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("scope"));
    let no_query = search(pb::search_messages_request::Scope::ResourceId("alice".into()));
    let status = client
        .search_messages(pb::SearchMessagesRequest { query: String::new(), ..no_query })
        .await
        .unwrap_err();
    assert!(status.message().contains("query"));
}
