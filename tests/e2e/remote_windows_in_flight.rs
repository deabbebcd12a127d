//! Windows in flight: a remote stream guard's full window is sent at once and the run reads on
//! while it is answered; answers are applied in the order the windows were sent, each window
//! still sees the state every earlier answer left, an instance that goes away with windows in
//! flight hands them to another, and an unanswered one still meets the failure policy.

use crate::common;
use crate::remote_stream_windows::{TWELVE_WORDS, upper_case_windows, window_texts};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire::server::pb;
use common::remote::{Answer, Behaviour, outcome, serve_with, windowed_hello};
use common::{TestServer, request, text, tripwire};

const CONFIG: &str = r#"
[processors.guard]
kind = "remote"
timeout_ms = 2000

[processors.quick]
kind = "remote"
timeout_ms = 150

[[agents]]
id = "guarded"
model = "mock/echo"
output_processors = ["guard"]

[[agents]]
id = "quickly-guarded"
model = "mock/echo"
output_processors = ["quick"]
"#;

/// The runtime's bound on one processor's windows in flight.
const WINDOWS_IN_FLIGHT: usize = 4;

/// True for the window holding the echo's first delta.
fn is_first_window(call: &pb::HookCall) -> bool {
    window_texts(call).first().is_some_and(|text| text.starts_with("echo:"))
}

/// Answers each call `delay_of` it after it arrived.
fn delayed(delay_of: impl Fn(&pb::HookCall) -> Duration + Send + Sync + 'static) -> Behaviour {
    Behaviour { delay_of: Some(Arc::new(delay_of)), ..Behaviour::default() }
}

/// Later windows go out while the first is unanswered, and their earlier answers wait for it:
/// the client still reads the text in order.
#[tokio::test]
async fn windows_go_out_before_earlier_ones_are_answered_and_keep_their_order() {
    let server = TestServer::start(CONFIG).await;
    let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let slow_first =
        delayed(|call| if is_first_window(call) { Duration::from_millis(200) } else { Duration::ZERO });
    let guard = serve_with(
        server.channel().await,
        windowed_hello("guard", 2, 0),
        upper_case_windows(sizes),
        slow_first,
    )
    .await;
    let chunks = server.stream(request("guarded", TWELVE_WORDS)).await;
    assert_eq!(text(&chunks), "ECHO: A B C D E F G H I J K L");
    assert!(guard.most_in_flight() >= 2, "the second window went out before the first was answered");
}

/// At most four windows of a processor are in flight at once.
#[tokio::test]
async fn a_processor_has_at_most_four_windows_in_flight() {
    let server = TestServer::start(CONFIG).await;
    let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let slow = delayed(|_| Duration::from_millis(100));
    let guard = serve_with(
        server.channel().await,
        windowed_hello("guard", 2, 0),
        upper_case_windows(Arc::clone(&sizes)),
        slow,
    )
    .await;
    let chunks = server.stream(request("guarded", TWELVE_WORDS)).await;
    assert_eq!(text(&chunks), "ECHO: A B C D E F G H I J K L");
    assert_eq!(sizes.lock().unwrap().len(), 7, "thirteen deltas in windows of two");
    assert_eq!(guard.most_in_flight(), WINDOWS_IN_FLIGHT);
}

/// The window number a counting guard's state holds (`n`), if any.
fn count_in(call: &pb::HookCall) -> Option<f64> {
    match call.state.as_ref()?.fields.get("n")?.kind {
        Some(prost_types::value::Kind::NumberValue(count)) => Some(count),
        _ => None,
    }
}

/// Once an answer changes the state a window in flight was sent with, that window's call is
/// cancelled and it is sent again with the new state: every window sees what the earlier ones
/// left, as if they had gone one by one.
#[tokio::test]
async fn a_window_sent_with_a_state_since_changed_is_sent_again() {
    let server = TestServer::start(CONFIG).await;
    // Numbers each window in its state, marking its first delta with the number.
    let answer: Answer = Arc::new(|call| {
        let count = count_in(call).unwrap_or(0.0);
        let mut chunks = call.chunks.clone();
        if let Some(pb::chunk::Payload::TextDelta(delta)) =
            chunks.first_mut().and_then(|c| c.payload.as_mut())
        {
            delta.text = format!("[{count}]{}", delta.text);
        }
        let mut result = outcome(pb::hook_result::Outcome::Replace(pb::Replacement {
            parts: Some(pb::ChunkList { chunks }),
            ..Default::default()
        }))
        .unwrap();
        let next = prost_types::Value { kind: Some(prost_types::value::Kind::NumberValue(count + 1.0)) };
        result.state = Some(prost_types::Struct { fields: [("n".to_owned(), next)].into_iter().collect() });
        Some(result)
    });
    // The first window is answered late enough for the next ones to go out with the state it
    // has not set yet; those stale calls would take a second, the fresh ones none.
    let behaviour = delayed(|call| match (is_first_window(call), count_in(call)) {
        (true, _) => Duration::from_millis(100),
        (false, None) => Duration::from_secs(1),
        (false, Some(_)) => Duration::ZERO,
    });
    let guard = serve_with(server.channel().await, windowed_hello("guard", 4, 0), answer, behaviour).await;
    let chunks = server.stream(request("guarded", TWELVE_WORDS)).await;
    let seen = text(&chunks);
    let numbers: Vec<&str> = seen.match_indices('[').map(|(at, _)| &seen[at + 1..at + 2]).collect();
    assert_eq!(numbers, ["0", "1", "2", "3"], "{seen}");
    let unmarked: String =
        seen.split(['[', ']']).enumerate().filter(|(at, _)| at % 2 == 0).map(|(_, part)| part).collect();
    assert_eq!(unmarked, "echo: a b c d e f g h i j k l");
    assert!(!guard.cancelled().is_empty(), "the stale calls were cancelled: {:?}", guard.events());
}

/// An instance that goes away with windows in flight: they move to another instance, whose
/// answers the client reads.
#[tokio::test]
async fn windows_in_flight_move_to_another_instance_when_theirs_goes_away() {
    let server = TestServer::start(CONFIG).await;
    let mut hello = windowed_hello("guard", 4, 0);
    hello.instance_id = "stalling".into();
    let never: Answer = Arc::new(|_| None);
    let stalling = serve_with(server.channel().await, hello, never, Behaviour::default()).await;
    let (chunks, _answering) = tokio::join!(server.stream(request("guarded", TWELVE_WORDS)), async {
        common::eventually("two windows in flight on the first instance", || {
            stalling.events().iter().filter(|event| event.starts_with("call")).count() >= 2
        })
        .await;
        let mut hello = windowed_hello("guard", 4, 0);
        hello.instance_id = "answering".into();
        let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
        let answering =
            serve_with(server.channel().await, hello, upper_case_windows(sizes), Behaviour::default()).await;
        stalling.kill();
        answering
    });
    assert_eq!(text(&chunks), "ECHO: A B C D E F G H I J K L");
}

/// A window in flight that is not answered in time ends the run as the closed policy says,
/// none of its chunks reaching the client.
#[tokio::test]
async fn a_window_in_flight_unanswered_in_time_trips_the_run() {
    let server = TestServer::start(CONFIG).await;
    let never: Answer = Arc::new(|_| None);
    let _quick =
        serve_with(server.channel().await, windowed_hello("quick", 4, 0), never, Behaviour::default()).await;
    let chunks = server.stream(request("quickly-guarded", TWELVE_WORDS)).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert_eq!(tripwire.processor_id, "quick");
    assert!(tripwire.reason.contains("timed out after 150 ms"), "{}", tripwire.reason);
    assert_eq!(text(&chunks), "");
}
