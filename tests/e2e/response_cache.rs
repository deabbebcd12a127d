//! `response-cache` through the server, against a fake provider that counts the calls it gets:
//! a repeated call is answered from the store without reaching the model (stream processors still
//! see it, usage is zero), scopes keep users apart, entries expire, and deleting a resource
//! deletes its entries.

use crate::common;

use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::fake_provider::{FakeProvider, Reply, openai_text};
use common::{TestServer, in_thread, report, request};

fn config(base_url: &str) -> String {
    format!(
        r#"
[providers.fake]
base_url = "{base_url}"

[processors.cache]
kind = "response-cache"

[processors.short-cache]
kind = "response-cache"
ttl_seconds = 1

[[agents]]
id = "cached"
model = "fake/gpt-test"
input_processors = ["cache"]
output_processors = ["word-counter"]

[[agents]]
id = "briefly-cached"
model = "fake/gpt-test"
input_processors = ["short-cache"]
"#
    )
}

async fn start() -> (FakeProvider, TestServer) {
    let replies = ["First answer here.", "Second answer.", "Third answer.", "Fourth answer."];
    let fake = FakeProvider::start(replies.map(|text| Reply::events(openai_text(text)))).await;
    let server = TestServer::start(&config(&fake.base_url)).await;
    (fake, server)
}

fn for_resource(agent: &str, text: &str, resource: &str) -> pb::RunRequest {
    let mut run = request(agent, text);
    run.resource_id = resource.into();
    run
}

/// A repeated identical model call is answered from the store, with zero usage.
#[tokio::test]
async fn a_repeated_call_is_answered_from_the_store() {
    let (fake, server) = start().await;
    let first = server.generate(for_resource("cached", "hi", "alice")).await;
    assert_eq!(first.text, "First answer here.");
    assert_eq!(report(&first, "data-response-cache")["stored"], true);
    let again = server.generate(for_resource("cached", "hi", "alice")).await;
    assert_eq!(again.text, "First answer here.");
    assert_eq!(fake.seen().len(), 1, "the model was called once");
    assert_eq!(report(&again, "data-response-cache")["hit"], true);
    assert_eq!(report(&again, "data-word-count")["words"], 3, "stream processors see the replay");
    assert_eq!(again.usage.unwrap().output_tokens, 0, "a replay spends nothing");
    let other = server.generate(for_resource("cached", "hello", "alice")).await;
    assert_eq!(other.text, "Second answer.");
    assert_eq!(fake.seen().len(), 2);
}

/// With `resource` scope, one user's cached answer is never served to another, and runs
/// without a resource are not cached.
#[tokio::test]
async fn users_never_share_entries() {
    let (fake, server) = start().await;
    server.generate(for_resource("cached", "hi", "alice")).await;
    let bob = server.generate(for_resource("cached", "hi", "bob")).await;
    assert_eq!(bob.text, "Second answer.");
    server.generate(request("cached", "hi")).await;
    server.generate(request("cached", "hi")).await;
    assert_eq!(fake.seen().len(), 4, "runs without a resource are not cached");
}

/// Entries expire after their TTL and are deleted with their resource.
#[tokio::test]
async fn entries_expire_and_go_with_their_resource() {
    let (fake, server) = start().await;
    server.generate(for_resource("briefly-cached", "hi", "alice")).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(server.generate(for_resource("briefly-cached", "hi", "alice")).await.text, "Second answer.");

    // Another agent making the same call in the same scope is answered from the cache.
    assert_eq!(server.generate(for_resource("cached", "hi", "alice")).await.text, "Second answer.");
    server.generate(in_thread("cached", "hello", "t")).await;
    assert_eq!(fake.seen().len(), 3);
    let mut memory = MemoryServiceClient::new(server.channel().await);
    memory.delete_resource(pb::DeleteResourceRequest { resource_id: "alice".into() }).await.unwrap();
    assert_eq!(server.generate(in_thread("cached", "hello", "t")).await.text, "Fourth answer.");
    assert_eq!(fake.seen().len(), 4, "deleting the resource deleted its cached answers");
}
