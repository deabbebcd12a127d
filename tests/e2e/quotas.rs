//! Quotas through the real server: threads, messages and bytes of messages each resource may
//! keep, and the resources each API key may create, set in `[storage]` and overridden per key. A
//! run past a quota is refused before the model runs (RESOURCE_EXHAUSTED naming the setting); a
//! save that would cross it saves nothing; deleting makes room again.

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::TestServer;
use tonic::{Code, Request};

const CONFIG: &str = r#"
[storage]
max_resource_messages = 100
max_resource_threads = 100
max_resource_mb = 1

[[auth.keys]]
name = "small-app"
key = "small-secret"
resources = ["small-*"]
max_resource_messages = 4
max_resource_threads = 2

[[auth.keys]]
name = "big-app"
key = "big-secret"
resources = ["big-*"]

[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 10 }
"#;

fn keyed<T>(message: T, key: &str) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    request
}

fn run(text: &str, thread: &str, resource: &str) -> pb::RunRequest {
    pb::RunRequest {
        agent_id: "echo".into(),
        text: text.into(),
        thread_id: thread.into(),
        resource_id: resource.into(),
        ..Default::default()
    }
}

async fn stored(server: &TestServer, key: &str, thread: &str, resource: &str) -> usize {
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let list = pb::ListMessagesRequest {
        thread_id: thread.into(),
        resource_id: resource.into(),
        page_size: 1000,
        ..Default::default()
    };
    memory.list_messages(keyed(list, key)).await.unwrap().into_inner().messages.len()
}

/// A key's message quota: two runs fill it, the third is refused up front naming the setting and
/// the resource, nothing more is saved; deleting the thread makes room; another key's resources
/// keep `[storage]`'s larger quota.
#[tokio::test]
async fn a_resource_at_its_message_quota_is_refused_until_it_deletes() {
    let server = TestServer::start(CONFIG).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    for text in ["one", "two"] {
        let response = agents.generate(keyed(run(text, "t1", "small-a"), "small-secret")).await.unwrap();
        assert_eq!(response.into_inner().error, None);
    }
    let refused = agents.generate(keyed(run("three", "t1", "small-a"), "small-secret")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_resource_messages"), "{}", refused.message());
    assert!(refused.message().contains("small-a"), "{}", refused.message());
    assert_eq!(stored(&server, "small-secret", "t1", "small-a").await, 4);

    // Each resource has its own quota.
    let other = agents.generate(keyed(run("elsewhere", "t9", "small-b"), "small-secret")).await.unwrap();
    assert_eq!(other.into_inner().error, None);

    let mut memory = MemoryServiceClient::new(server.channel().await);
    let delete = pb::DeleteThreadRequest { thread_id: "t1".into(), resource_id: "small-a".into() };
    memory.delete_thread(keyed(delete, "small-secret")).await.unwrap();
    let again =
        agents.generate(keyed(run("after the delete", "t2", "small-a"), "small-secret")).await.unwrap();
    assert_eq!(again.into_inner().error, None, "deleting made room");

    for index in 0..3 {
        let response = agents.generate(keyed(run("big", "t1", "big-a"), "big-secret")).await.unwrap();
        assert_eq!(response.into_inner().error, None, "run {index} of the key with the larger quota");
    }
    assert_eq!(stored(&server, "big-secret", "t1", "big-a").await, 6);
}

/// A key's thread quota counts threads made by runs and by CreateThread alike.
#[tokio::test]
async fn threads_past_the_quota_are_refused() {
    let server = TestServer::start(CONFIG).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    agents.generate(keyed(run("first", "t1", "small-a"), "small-secret")).await.unwrap();
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let create = |thread: &str| pb::CreateThreadRequest {
        thread_id: thread.into(),
        resource_id: "small-a".into(),
        ..Default::default()
    };
    memory.create_thread(keyed(create("t2"), "small-secret")).await.unwrap();
    let refused = memory.create_thread(keyed(create("t3"), "small-secret")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(refused.message().contains("max_resource_threads"), "{}", refused.message());
    let by_run =
        agents.generate(keyed(run("new thread", "t4", "small-a"), "small-secret")).await.unwrap_err();
    assert_eq!(by_run.code(), Code::ResourceExhausted);
    // A run in a thread it already has still works (it adds no thread).
    let existing = agents.generate(keyed(run("same thread", "t2", "small-a"), "small-secret")).await.unwrap();
    assert_eq!(existing.into_inner().error, None);
}

/// The byte quota is checked exactly at the save: a run that would cross it ends with an error
/// naming the setting and saves nothing of itself.
#[tokio::test]
async fn a_save_past_the_byte_quota_saves_nothing() {
    let server = TestServer::start(CONFIG).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    let large = "x".repeat(200 * 1024);
    let first = agents.generate(keyed(run(&large, "t1", "big-a"), "big-secret")).await.unwrap().into_inner();
    assert_eq!(first.error, None, "400 KiB fit in 1 MiB");
    let second = agents.generate(keyed(run(&large, "t1", "big-a"), "big-secret")).await.unwrap().into_inner();
    assert_eq!(second.error, None, "800 KiB fit in 1 MiB");
    let third = agents.generate(keyed(run(&large, "t1", "big-a"), "big-secret")).await.unwrap().into_inner();
    let error = third.error.expect("1.2 MiB do not fit in 1 MiB");
    assert!(error.message.contains("max_resource_mb"), "{}", error.message);
    assert_eq!(stored(&server, "big-secret", "t1", "big-a").await, 4, "the third run saved nothing");
}

const ALLOWANCE: &str = r#"
[storage]
max_key_resources = 100

[[auth.keys]]
name = "few-app"
key = "few-secret"
resources = ["few-*"]
max_resources = 2

[[auth.keys]]
name = "other-app"
key = "other-secret"
resources = ["*"]

[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 10 }
"#;

/// A key's `max_resources`: runs, CreateThread and UpdateWorkingMemory create its resources; the
/// one past the allowance is refused with RESOURCE_EXHAUSTED naming the key and the setting and
/// saves nothing, while its existing resources and other keys go on; deleting a resource gives
/// its place back.
#[tokio::test]
async fn a_key_creates_no_more_resources_than_it_may() {
    let server = TestServer::start(ALLOWANCE).await;
    let mut agents = AgentServiceClient::new(server.channel().await);
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let ok = agents.generate(keyed(run("one", "t1", "few-a"), "few-secret")).await.unwrap();
    assert_eq!(ok.into_inner().error, None);
    let create =
        pb::CreateThreadRequest { thread_id: "t1".into(), resource_id: "few-b".into(), ..Default::default() };
    memory.create_thread(keyed(create, "few-secret")).await.unwrap();

    let refused = agents.generate(keyed(run("three", "t1", "few-c"), "few-secret")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    for named in ["few-app", "max_resources", "few-c"] {
        assert!(refused.message().contains(named), "{named} in {}", refused.message());
    }
    let create =
        pb::CreateThreadRequest { thread_id: "t1".into(), resource_id: "few-c".into(), ..Default::default() };
    let by_thread = memory.create_thread(keyed(create, "few-secret")).await.unwrap_err();
    assert_eq!(by_thread.code(), Code::ResourceExhausted, "{by_thread:?}");
    let scope = pb::working_memory_scope::Scope::ResourceId("few-c".into());
    let working = pb::UpdateWorkingMemoryRequest {
        scope: Some(pb::WorkingMemoryScope { scope: Some(scope) }),
        content: "notes".into(),
        ..Default::default()
    };
    let by_memory = memory.update_working_memory(keyed(working.clone(), "few-secret")).await.unwrap_err();
    assert_eq!(by_memory.code(), Code::ResourceExhausted, "{by_memory:?}");
    let list = pb::ListThreadsRequest { resource_id: "few-c".into(), ..Default::default() };
    assert!(memory.list_threads(keyed(list, "few-secret")).await.unwrap().into_inner().threads.is_empty());

    // Its resources go on, and another key's allowance is its own.
    let again = agents.generate(keyed(run("two", "t1", "few-a"), "few-secret")).await.unwrap();
    assert_eq!(again.into_inner().error, None);
    let other = agents.generate(keyed(run("other", "t1", "other-c"), "other-secret")).await.unwrap();
    assert_eq!(other.into_inner().error, None);

    let delete = pb::DeleteResourceRequest { resource_id: "few-a".into() };
    memory.delete_resource(keyed(delete, "few-secret")).await.unwrap();
    memory.update_working_memory(keyed(working, "few-secret")).await.unwrap();
    let refused = agents.generate(keyed(run("four", "t1", "few-d"), "few-secret")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "few-b and few-c are its two");
}
