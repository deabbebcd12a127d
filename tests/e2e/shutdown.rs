//! Graceful shutdown through the server: on the signal new runs are refused (UNAVAILABLE), runs
//! in flight finish and are saved within the grace period; past it they end with an error chunk
//! and save nothing; then the server stops and its store reopens cleanly.

use crate::common;

use std::time::Duration;

use agentwire::storage::{Direction, SledStore, Store};
use common::{TestServer, error, in_thread, request, text};
use tonic::Code;

fn config(grace_ms: u64) -> String {
    format!(
        r#"
[limits]
shutdown_grace_ms = {grace_ms}

[[agents]]
id = "slow"
model = "mock/script"
memory = {{ last_messages = 10 }}
script = [{{ text = "one two three four five six seven eight", chunk_delay_ms = 60 }}]
"#
    )
}

/// A server whose store outlives it, in `dir`.
async fn start(grace_ms: u64, dir: &tempfile::TempDir) -> TestServer {
    TestServer::builder(&config(grace_ms)).data_dir(dir.path()).start().await
}

/// A slow run in thread `t`, streamed in the background; its chunks once it ends.
async fn stream_in_background(
    server: &TestServer,
) -> tokio::task::JoinHandle<Vec<agentwire::server::pb::Chunk>> {
    let mut client = server.client().await;
    tokio::spawn(async move {
        let mut stream = client.stream(in_thread("slow", "go", "t")).await.unwrap().into_inner();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.message().await.unwrap() {
            chunks.push(chunk);
        }
        chunks
    })
}

/// Stops the server and counts the messages its store kept in `thread`.
async fn stored(server: TestServer, thread: &str) -> usize {
    let data_dir = server.data_dir.clone();
    server.stop().await;
    let store = SledStore::open(&data_dir).expect("the store reopens");
    store
        .list_messages("alice", thread, Direction::Forward, "", 100)
        .await
        .map_or(0, |page| page.messages.len())
}

/// On shutdown, runs in flight finish and new runs get UNAVAILABLE.
#[tokio::test]
async fn runs_in_flight_finish_and_new_runs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(5_000, &dir).await;
    let mut client = server.client().await;
    let in_flight = stream_in_background(&server).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.signal_stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = client.generate(request("slow", "too late")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(refused.message().contains("shutting down"), "{}", refused.message());
    let chunks = in_flight.await.unwrap();
    assert_eq!(text(&chunks), "one two three four five six seven eight");
    assert_eq!(chunks.last().unwrap().r#type, "finish");
    assert_eq!(stored(server, "t").await, 2, "the finished run was saved");
}

/// Runs still going after the grace period stop with an error chunk and save nothing.
#[tokio::test]
async fn runs_past_the_grace_period_stop_and_save_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(100, &dir).await;
    let in_flight = stream_in_background(&server).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.signal_stop();
    let chunks = in_flight.await.unwrap();
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("shut down before the run finished"), "{}", failure.message);
    assert_eq!(stored(server, "t").await, 0, "nothing of the stopped run was saved");
}
