//! A client that goes away cancels its run: no more model chunks, tools or hooks for it.

use crate::common;

use std::time::Duration;

use agentwire::server::pb;
use common::{TestServer, eventually, request};

const CONFIG: &str = r#"
[processors.watcher]
kind = "probe"

[[agents]]
id = "slow"
model = "mock/script"
tools = ["calculator"]
output_processors = ["watcher"]
script = [
  { text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five twenty-six twenty-seven twenty-eight twenty-nine thirty", chunk_delay_ms = 30, tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "never reached" },
]
"#;

/// Long enough for an uncancelled run to stream many more chunks (30 ms each).
const QUIET_PERIOD: Duration = Duration::from_millis(600);

fn deltas_seen(server: &TestServer) -> usize {
    server.log.with_prefix("watcher:processOutputStream:text-delta").len()
}

/// Dropping a stream stops the run where it is.
#[tokio::test]
async fn dropping_the_stream_cancels_the_run() {
    let server = TestServer::start(CONFIG).await;
    let mut stream = server.client().await.stream(request("slow", "count")).await.unwrap().into_inner();
    let mut deltas = 0;
    while deltas < 3 {
        let chunk = stream.message().await.unwrap().expect("chunks keep coming");
        if matches!(chunk.payload, Some(pb::chunk::Payload::TextDelta(_))) {
            deltas += 1;
        }
    }
    drop(stream);
    tokio::time::sleep(QUIET_PERIOD).await;
    let seen = deltas_seen(&server);
    assert!(seen < 10, "the run kept streaming after the client left: {seen} deltas");
    assert!(server.log.with_prefix("watcher:processToolResult").is_empty(), "no tool ran");
    assert!(server.log.with_prefix("watcher:processOutputResult").is_empty(), "the run never completed");
}

/// A unary call abandoned by its client (here by a deadline) stops its run too.
#[tokio::test]
async fn abandoning_a_unary_call_cancels_the_run() {
    let server = TestServer::start(CONFIG).await;
    let mut call = tonic::Request::new(request("slow", "count"));
    call.set_timeout(Duration::from_millis(150));
    let status = server.client().await.generate(call).await.unwrap_err();
    assert!(matches!(status.code(), tonic::Code::DeadlineExceeded | tonic::Code::Cancelled), "{status:?}");
    eventually("the run to start streaming", || deltas_seen(&server) > 0).await;
    tokio::time::sleep(QUIET_PERIOD).await;
    let seen = deltas_seen(&server);
    assert!(seen < 15, "the run went on after its client left: {seen} deltas");
    assert!(server.log.with_prefix("watcher:processOutputResult").is_empty());
}
