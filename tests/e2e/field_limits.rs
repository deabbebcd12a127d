//! How large one stored value may be: a thread's title and metadata and a working-memory
//! document are refused over their `[storage]` limits with RESOURCE_EXHAUSTED naming the limit —
//! through the memory API, and through the model's `update_working_memory` tool (a tool error it
//! sees; the stored document is unchanged).

use crate::common;

use agentwire::server::pb;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::{TestServer, in_thread};
use tonic::Code;

fn config() -> String {
    let huge = "x".repeat(200);
    format!(
        r##"
[storage]
max_title_bytes = 16
max_metadata_bytes = 64
max_working_memory_bytes = 128

[[agents]]
id = "notes"
model = "mock/script"
memory = {{ working_memory = {{ template = "# User\n- Name:\n" }} }}
script = [
  {{ tool_calls = [{{ name = "update_working_memory", args = {{ memory = "# User\n- Name: {huge}\n" }} }}] }},
  {{ text = "noted" }},
]
"##
    )
}

fn refused(status: tonic::Status, setting: &str) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains(&format!("storage.{setting}")), "{}", status.message());
}

/// The memory API refuses a title, metadata or working memory over its limit.
#[tokio::test]
async fn the_api_refuses_values_over_their_limits() {
    let server = TestServer::start(&config()).await;
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let long_title = pb::CreateThreadRequest {
        thread_id: "t".into(),
        resource_id: "alice".into(),
        title: "a title far longer than sixteen bytes".into(),
        metadata: None,
    };
    refused(memory.create_thread(long_title).await.unwrap_err(), "max_title_bytes");
    let big = agentwire::server::value::to_struct(
        serde_json::json!({ "notes": "y".repeat(100) }).as_object().unwrap(),
    );
    let big_metadata = pb::CreateThreadRequest {
        thread_id: "t".into(),
        resource_id: "alice".into(),
        title: "ok".into(),
        metadata: Some(big),
    };
    refused(memory.create_thread(big_metadata).await.unwrap_err(), "max_metadata_bytes");
    let fits = pb::CreateThreadRequest {
        thread_id: "t".into(),
        resource_id: "alice".into(),
        title: "ok".into(),
        metadata: None,
    };
    memory.create_thread(fits).await.expect("a thread within the limits");
    let update = pb::UpdateThreadRequest {
        thread_id: "t".into(),
        resource_id: "alice".into(),
        title: Some("another title far too long".into()),
        ..Default::default()
    };
    refused(memory.update_thread(update).await.unwrap_err(), "max_title_bytes");
    let scope =
        pb::WorkingMemoryScope { scope: Some(pb::working_memory_scope::Scope::ResourceId("alice".into())) };
    let document = pb::UpdateWorkingMemoryRequest {
        scope: Some(scope),
        content: "z".repeat(129),
        expected_version: None,
        ..Default::default()
    };
    refused(memory.update_working_memory(document).await.unwrap_err(), "max_working_memory_bytes");
}

/// The model's `update_working_memory` over the limit is a tool error it sees; the run goes on
/// and the stored document stays as it was.
#[tokio::test]
async fn the_model_cannot_write_working_memory_over_its_limit() {
    let server = TestServer::start(&config()).await;
    let chunks = server.stream(in_thread("notes", "remember me", "t")).await;
    let result = chunks
        .iter()
        .find_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::ToolResult(result)) => Some(result.clone()),
            _ => None,
        })
        .expect("a tool result");
    assert!(result.is_error);
    assert!(common::json(&result.result).as_str().unwrap().contains("storage.max_working_memory_bytes"));
    assert_eq!(common::text(&chunks), "noted");
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let scope =
        pb::WorkingMemoryScope { scope: Some(pb::working_memory_scope::Scope::ResourceId("alice".into())) };
    let stored = memory
        .get_working_memory(pb::GetWorkingMemoryRequest { scope: Some(scope), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(!stored.content.contains("xxxx"), "{}", stored.content);
}
