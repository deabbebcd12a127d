//! MemoryService through the real server: every RPC, paging both ways, and bad input.

use crate::common;

use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use agentwire::server::{pb, value};
use common::{TestServer, request};
use tonic::Code;
use tonic::transport::Channel;

const CONFIG: &str = r#"
[[agents]]
id = "echo"
model = "mock/echo"
memory = {}
"#;

async fn memory(server: &TestServer) -> MemoryServiceClient<Channel> {
    MemoryServiceClient::new(server.channel().await)
}

async fn run_in(server: &TestServer, thread: &str, resource: &str, text: &str) {
    let mut run = request("echo", text);
    run.thread_id = thread.into();
    run.resource_id = resource.into();
    assert_eq!(server.generate(run).await.finish_reason, "stop");
}

fn thread_request(thread: &str, resource: &str) -> pb::GetThreadRequest {
    pb::GetThreadRequest { thread_id: thread.into(), resource_id: resource.into() }
}

fn texts(messages: &[pb::Message]) -> Vec<String> {
    messages
        .iter()
        .map(|message| {
            message
                .parts
                .iter()
                .filter_map(|part| match &part.part {
                    Some(pb::part::Part::Text(text)) => Some(text.text.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Threads are created, read, listed newest first in pages, renamed and deleted.
#[tokio::test]
async fn threads_lifecycle_with_paging() {
    let server = TestServer::start(CONFIG).await;
    let mut client = memory(&server).await;
    for index in 0..3 {
        let metadata = serde_json::json!({ "n": index }).as_object().cloned().unwrap();
        let created = client
            .create_thread(pb::CreateThreadRequest {
                thread_id: format!("t{index}"),
                resource_id: "alice".into(),
                title: format!("Thread {index}"),
                metadata: Some(value::to_struct(&metadata)),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(created.id, format!("t{index}"));
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let generated = client
        .create_thread(pb::CreateThreadRequest { resource_id: "bob".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(!generated.id.is_empty(), "an id is generated");

    let first = client
        .list_threads(pb::ListThreadsRequest {
            resource_id: "alice".into(),
            page_size: 2,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.threads.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["t2", "t1"]);
    let second = client
        .list_threads(pb::ListThreadsRequest {
            resource_id: "alice".into(),
            page_size: 2,
            page_token: first.next_page_token,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.threads.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["t0"]);
    assert!(second.next_page_token.is_empty());

    let renamed = client
        .update_thread(pb::UpdateThreadRequest {
            thread_id: "t1".into(),
            resource_id: "alice".into(),
            title: Some("Renamed".into()),
            metadata: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.title, "Renamed");
    assert_eq!(value::from_struct(renamed.metadata.unwrap())["n"], 1, "metadata is kept");

    run_in(&server, "t1", "alice", "hello").await;
    let thread = client.get_thread(thread_request("t1", "alice")).await.unwrap().into_inner();
    assert_eq!(thread.message_count, 2);
    let report = client
        .delete_thread(pb::DeleteThreadRequest { thread_id: "t1".into(), resource_id: "alice".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((report.threads, report.messages), (1, 2));
    let gone = client.get_thread(thread_request("t1", "")).await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
}

/// A thread's messages page forward and backward.
#[tokio::test]
async fn messages_page_both_ways() {
    let server = TestServer::start(CONFIG).await;
    for text in ["a", "b", "c"] {
        run_in(&server, "t", "alice", text).await;
    }
    let mut client = memory(&server).await;
    let list = |direction: pb::Direction, page_token: String| pb::ListMessagesRequest {
        thread_id: "t".into(),
        resource_id: "alice".into(),
        direction: direction.into(),
        page_size: 4,
        page_token,
    };
    let forward =
        client.list_messages(list(pb::Direction::Forward, String::new())).await.unwrap().into_inner();
    assert_eq!(texts(&forward.messages), ["a", "echo: a", "b", "echo: b"]);
    assert!(
        forward.messages.iter().all(|message| message.thread_id == "t" && message.resource_id == "alice")
    );
    let rest = client
        .list_messages(list(pb::Direction::Forward, forward.next_page_token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(texts(&rest.messages), ["c", "echo: c"]);
    assert!(rest.next_page_token.is_empty());
    let backward =
        client.list_messages(list(pb::Direction::Backward, String::new())).await.unwrap().into_inner();
    assert_eq!(texts(&backward.messages), ["echo: c", "c", "echo: b", "b"]);
}

/// Working memory reads as empty at first, writes bump the version, and a stale write is
/// refused with ABORTED.
#[tokio::test]
async fn working_memory_is_read_and_written_with_versions() {
    let server = TestServer::start(CONFIG).await;
    let mut client = memory(&server).await;
    let scope = Some(pb::WorkingMemoryScope {
        scope: Some(pb::working_memory_scope::Scope::ResourceId("alice".into())),
    });
    let empty = client
        .get_working_memory(pb::GetWorkingMemoryRequest { scope: scope.clone(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((empty.content.as_str(), empty.version), ("", 0));
    let update = |content: &str, expected_version: Option<u64>| pb::UpdateWorkingMemoryRequest {
        scope: scope.clone(),
        content: content.into(),
        expected_version,
        ..Default::default()
    };
    let written = client.update_working_memory(update("# Alice", Some(0))).await.unwrap().into_inner();
    assert_eq!(written.version, 1);
    let unconditional = client.update_working_memory(update("# Alice v2", None)).await.unwrap().into_inner();
    assert_eq!(unconditional.version, 2);
    let stale = client.update_working_memory(update("# lost", Some(1))).await.unwrap_err();
    assert_eq!(stale.code(), Code::Aborted);
    let read = client
        .get_working_memory(pb::GetWorkingMemoryRequest { scope, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.content, "# Alice v2");
}

/// Deleting a resource removes all of it, reports the counts, and leaves others untouched.
#[tokio::test]
async fn delete_resource_removes_everything_of_it() {
    let server = TestServer::start(CONFIG).await;
    run_in(&server, "a1", "alice", "one").await;
    run_in(&server, "a2", "alice", "two").await;
    run_in(&server, "b1", "bob", "three").await;
    let mut client = memory(&server).await;
    let scope = Some(pb::WorkingMemoryScope {
        scope: Some(pb::working_memory_scope::Scope::ResourceId("alice".into())),
    });
    client
        .update_working_memory(pb::UpdateWorkingMemoryRequest {
            scope,
            content: "x".into(),
            expected_version: None,
            ..Default::default()
        })
        .await
        .unwrap();
    let report = client
        .delete_resource(pb::DeleteResourceRequest { resource_id: "alice".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((report.threads, report.messages, report.working_memories), (2, 4, 1));
    let listed = client
        .list_threads(pb::ListThreadsRequest { resource_id: "alice".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.threads.is_empty());
    assert_eq!(client.get_thread(thread_request("b1", "bob")).await.unwrap().into_inner().message_count, 2);
}

/// Bad requests name the field with the right code; another resource's thread is not found.
#[tokio::test]
async fn bad_requests_are_refused_clearly() {
    let server = TestServer::start(CONFIG).await;
    run_in(&server, "t", "alice", "hi").await;
    let mut client = memory(&server).await;
    // Mallory's resource has no thread `t`: alice's is another resource's, and stays unnamed.
    let foreign = client.get_thread(thread_request("t", "mallory")).await.unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
    assert!(!foreign.message().contains("alice"), "{}", foreign.message());
    let messages_of_foreign = client
        .list_messages(pb::ListMessagesRequest {
            thread_id: "t".into(),
            resource_id: "mallory".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(messages_of_foreign.code(), Code::NotFound);
    let missing_thread = client.get_thread(thread_request("", "")).await.unwrap_err();
    assert_eq!(missing_thread.code(), Code::InvalidArgument);
    assert!(missing_thread.message().contains("thread_id"));
    let huge_page = client
        .list_threads(pb::ListThreadsRequest {
            resource_id: "alice".into(),
            page_size: 5000,
            page_token: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(huge_page.code(), Code::InvalidArgument);
    assert!(huge_page.message().contains("page_size"));
    let no_resource = client.list_threads(pb::ListThreadsRequest::default()).await.unwrap_err();
    assert!(no_resource.message().contains("resource_id"));
    let no_scope = client
        .get_working_memory(pb::GetWorkingMemoryRequest { scope: None, ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(no_scope.code(), Code::InvalidArgument);
    assert!(no_scope.message().contains("scope"));
    let taken = client
        .create_thread(pb::CreateThreadRequest {
            thread_id: "t".into(),
            resource_id: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Code::AlreadyExists);
    let nothing = client
        .delete_thread(pb::DeleteThreadRequest { thread_id: "ghost".into(), resource_id: String::new() })
        .await
        .unwrap_err();
    assert_eq!(nothing.code(), Code::NotFound);
}
