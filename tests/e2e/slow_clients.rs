//! Clients that stop reading, and connections that never speak: a streaming client that leaves
//! no room for the next chunk past `slow_client_ms` is cut off with RESOURCE_EXHAUSTED, its run
//! stops and frees its slot (nothing saved), so a handful of them cannot lock everyone out; what
//! unread chunks take is bounded per stream and in total; and SIGTERM ends the real binary
//! whatever its idle connections and unread streams do.

use crate::common;

use std::time::Duration;

use common::binary::Served;
use common::{TestServer, in_thread, request};
use tonic::Code;

/// A server with two run slots, a short slow-client limit, and an agent whose answer is far
/// larger than any buffer between it and a client that does not read.
fn config() -> String {
    let words = "word ".repeat(200_000);
    format!(
        r#"
[limits]
max_concurrent_runs = 2
queue_timeout_ms = 200
slow_client_ms = 300

[[agents]]
id = "talker"
model = "mock/script"
memory = {{ last_messages = 10 }}
script = [{{ text = "{words}" }}]

[[agents]]
id = "echo"
model = "mock/echo"
"#
    )
}

/// Two clients that start a stream and stop reading take both slots only until they are cut
/// off: a third run then gets a slot; each stalled stream ends with RESOURCE_EXHAUSTED naming
/// `slow_client_ms`, and nothing of their runs is saved.
#[tokio::test]
async fn clients_that_stop_reading_are_cut_off_and_free_their_slots() {
    let server = TestServer::start(&config()).await;
    let mut stalled = Vec::new();
    for index in 0..2 {
        let mut client = server.client().await;
        let stream = client.stream(in_thread("talker", "talk", &format!("stalled-{index}"))).await.unwrap();
        stalled.push((client, stream.into_inner()));
    }
    // Both slots are taken until the cut-off frees them; then the echo run gets one.
    let mut answer = None;
    for _ in 0..50 {
        match server.client().await.generate(request("echo", "am I in?")).await {
            Ok(response) => {
                answer = Some(response.into_inner().text);
                break;
            }
            Err(status) => assert_eq!(status.code(), Code::ResourceExhausted, "{status}"),
        }
    }
    assert_eq!(answer.as_deref(), Some("echo: am I in?"), "a slot was freed by the cut-off");
    for (index, (_client, mut stream)) in stalled.into_iter().enumerate() {
        let status = loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("stream {index} ended without the cut-off status"),
                Err(status) => break status,
            }
        };
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status.message().contains("slow_client_ms (300 ms)"), "{}", status.message());
        assert!(server.stored_texts(&format!("stalled-{index}")).await.is_empty(), "nothing is saved");
    }
}

/// A run that `max_run_ms` ends gives its slot back at once, though its client does not read
/// and its last chunk waits (up to `slow_client_ms`, here a minute) for room: the next run gets
/// the only slot well within its queue timeout.
#[tokio::test]
async fn a_run_max_run_ms_ends_frees_its_slot_though_its_last_chunk_is_unsent() {
    let words = "word ".repeat(200_000);
    let config = format!(
        r#"
[limits]
max_concurrent_runs = 1
queue_timeout_ms = 5000
slow_client_ms = 60000
max_run_ms = 300

[[agents]]
id = "talker"
model = "mock/script"
script = [{{ text = "{words}" }}]

[[agents]]
id = "echo"
model = "mock/echo"
"#
    );
    let server = TestServer::start(&config).await;
    let mut stalled_client = server.client().await;
    let _stalled = stalled_client.stream(request("talker", "talk")).await.unwrap();
    // With the slot held until the last chunk went, this run would wait out its queue timeout.
    let answer = server.client().await.generate(request("echo", "my turn")).await;
    assert_eq!(answer.expect("the slot came back").into_inner().text, "echo: my turn");
}

/// SIGTERM ends the real binary although idle TCP connections never spoke HTTP/2 and a stream
/// is never read: after the drain, connections are closed.
#[tokio::test]
async fn sigterm_ends_the_server_whatever_its_clients_do() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("agentwire.toml");
    std::fs::write(
        &config_path,
        config().replace("slow_client_ms = 300", "slow_client_ms = 60000\nshutdown_grace_ms = 1000"),
    )
    .unwrap();
    let mut served = Served::start(&["--config", config_path.to_str().unwrap()]);
    let idle: Vec<std::net::TcpStream> =
        (0..4).map(|_| std::net::TcpStream::connect(&served.addr).expect("connects")).collect();
    let mut client =
        agentwire::server::pb::agent_service_client::AgentServiceClient::new(served.channel().await);
    let _unread = client.stream(in_thread("talker", "talk", "unread")).await.unwrap().into_inner();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let exit = tokio::task::spawn_blocking(move || served.terminate());
    let status = tokio::time::timeout(Duration::from_secs(30), exit)
        .await
        .expect("the server exits after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
    drop(idle);
}

/// A client that reads nothing and lets the server buffer as little as HTTP/2 allows.
async fn stalled_stream(server: &TestServer, thread: &str) -> tonic::Streaming<agentwire::server::pb::Chunk> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.addr))
        .unwrap()
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(65_535)
        .connect()
        .await
        .unwrap();
    let mut client = agentwire::server::pb::agent_service_client::AgentServiceClient::new(channel);
    client.stream(in_thread("talker", "talk", thread)).await.unwrap().into_inner()
}

/// The bytes of unread chunks the server holds, from `/metrics`.
async fn buffered_bytes(server: &TestServer) -> f64 {
    let page = common::scrape_metrics(server).await;
    let line =
        page.lines().find(|line| line.starts_with("agentwire_stream_buffered_bytes")).expect("the gauge");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Unread chunks are bounded per stream (`max_stream_buffer_kb`) and in total
/// (`max_buffered_mb`): when a third client that stops reading would pass the total, a stream
/// holding the most is cut off at once — RESOURCE_EXHAUSTED naming `max_buffered_mb`, its
/// unread chunks dropped — the total never passes its limit, and a client that reads gets its
/// whole answer while the others hold theirs.
#[tokio::test]
async fn unread_chunks_are_bounded_per_stream_and_in_total() {
    let words = format!("{} ", "x".repeat(20_000)).repeat(60);
    let config = format!(
        r#"
[limits]
slow_client_ms = 60000
max_stream_buffer_kb = 400
max_buffered_mb = 1

[[agents]]
id = "talker"
model = "mock/script"
memory = {{ last_messages = 10 }}
script = [{{ text = "{words}" }}]
"#
    );
    let total = 1024.0 * 1024.0;
    let share = 400.0 * 1024.0;
    let server = TestServer::start(&config).await;
    let first = stalled_stream(&server, "first").await;
    common::eventually_some("the first stream's share to fill", || async {
        (buffered_bytes(&server).await > share - 25_000.0).then_some(())
    })
    .await;
    let second = stalled_stream(&server, "second").await;
    common::eventually_some("the second stream's share to fill", || async {
        (buffered_bytes(&server).await > 2.0 * share - 50_000.0).then_some(())
    })
    .await;
    let _third = stalled_stream(&server, "third").await;
    // One of the first two is cut off to make room for the third.
    let mut cut = Vec::new();
    for mut stream in [first, second] {
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match stream.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => return None,
                    Err(status) => return Some(status),
                }
            }
        })
        .await;
        if let Ok(Some(status)) = ended {
            cut.push(status);
        }
    }
    assert_eq!(cut.len(), 1, "exactly one stalled stream was cut off: {cut:?}");
    assert_eq!(cut[0].code(), Code::ResourceExhausted);
    assert!(cut[0].message().contains("max_buffered_mb"), "{}", cut[0].message());
    assert!(buffered_bytes(&server).await <= total);

    // A client that reads gets everything, the stalled streams' chunks notwithstanding.
    let chunks = server.stream(in_thread("talker", "talk", "reader")).await;
    let text: usize = chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(agentwire::server::pb::chunk::Payload::TextDelta(delta)) => Some(delta.text.len()),
            _ => None,
        })
        .sum();
    assert_eq!(text, words.len(), "the whole answer");
    assert!(buffered_bytes(&server).await <= total);
    let page = common::scrape_metrics(&server).await;
    assert!(page.contains("agentwire_slow_clients_total{limit=\"max_buffered_mb\""), "{page}");
}
