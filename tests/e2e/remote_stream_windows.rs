//! A remote `processOutputStream` guard that takes chunks in windows: windows close when full,
//! after their delay, and when the step's stream ends; their answer replaces them; order is kept;
//! an abort keeps the window's chunks from the client; observers never hold chunks back.

use crate::common;

use std::sync::{Arc, Mutex};

use agentwire::server::pb;
use common::remote::{Answer, abort, cont, hello_message, open, outcome, serve_hello, windowed_hello};
use common::{TestServer, request, text, tripwire};
use tonic::Code;

const CONFIG: &str = r#"
[processors.guard]
kind = "remote"
timeout_ms = 2000

[processors.watcher]
kind = "remote"
mode = "observe"

[[agents]]
id = "guarded"
model = "mock/echo"
output_processors = ["guard"]

[[agents]]
id = "slow-words"
model = "mock/script"
output_processors = ["guard"]
script = [{ text = "one two three four five six", chunk_delay_ms = 60 }]

[[agents]]
id = "watched"
model = "mock/echo"
output_processors = ["watcher"]
"#;

pub(crate) const TWELVE_WORDS: &str = "a b c d e f g h i j k l";

/// The text deltas of a window call.
pub(crate) fn window_texts(call: &pb::HookCall) -> Vec<String> {
    call.chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::TextDelta(delta)) => Some(delta.text.clone()),
            _ => None,
        })
        .collect()
}

/// Upper-cases every text delta of the window, and records each window's size.
pub(crate) fn upper_case_windows(sizes: Arc<Mutex<Vec<usize>>>) -> Answer {
    Arc::new(move |call| {
        assert!(call.part.is_none(), "a windowed call carries `chunks`, not `part`");
        sizes.lock().unwrap().push(call.chunks.len());
        let chunks = call
            .chunks
            .iter()
            .cloned()
            .map(|mut chunk| {
                if let Some(pb::chunk::Payload::TextDelta(delta)) = &mut chunk.payload {
                    delta.text = delta.text.to_uppercase();
                }
                chunk
            })
            .collect();
        outcome(pb::hook_result::Outcome::Replace(pb::Replacement {
            parts: Some(pb::ChunkList { chunks }),
            ..Default::default()
        }))
    })
}

/// A full window is sent in one call, and its answer replaces its chunks in order.
#[tokio::test]
async fn windows_close_when_full_and_their_answer_replaces_them_in_order() {
    let server = TestServer::start(CONFIG).await;
    let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let _guard = serve_hello(
        server.channel().await,
        windowed_hello("guard", 4, 0),
        upper_case_windows(Arc::clone(&sizes)),
    )
    .await;
    let chunks = server.stream(request("guarded", TWELVE_WORDS)).await;
    assert_eq!(text(&chunks), "ECHO: A B C D E F G H I J K L");
    let sizes = sizes.lock().unwrap().clone();
    // The 13 text deltas in windows of four (lifecycle chunks pass unsent): four calls, not 13.
    assert_eq!(sizes, [4, 4, 4, 1]);
    let types = common::types(&chunks);
    assert_eq!(types.first().map(String::as_str), Some("start"));
    assert_eq!(types.last().map(String::as_str), Some("finish"));
}

/// A window closes after max_delay when the model is slow, without waiting to be full.
#[tokio::test]
async fn a_window_closes_after_its_delay_when_the_model_is_slow() {
    let server = TestServer::start(CONFIG).await;
    let sizes: Arc<Mutex<Vec<usize>>> = Arc::default();
    let seen = Arc::clone(&sizes);
    let texts: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let log = Arc::clone(&texts);
    let upper = upper_case_windows(seen);
    let answer: Answer = Arc::new(move |call| {
        log.lock().unwrap().push(window_texts(call));
        upper(call)
    });
    // Room for 100 chunks, but held at most 20 ms: with 60 ms between words, each word goes out
    // in a window of its own instead of waiting for the end of the step.
    let _guard = serve_hello(server.channel().await, windowed_hello("guard", 100, 20), answer).await;
    let chunks = server.stream(request("slow-words", "go")).await;
    assert_eq!(text(&chunks), "ONE TWO THREE FOUR FIVE SIX");
    let with_text: Vec<Vec<String>> =
        texts.lock().unwrap().iter().filter(|texts| !texts.is_empty()).cloned().collect();
    assert!(with_text.len() >= 4, "the delay closed windows before the step ended: {with_text:?}");
}

/// An abort on a window keeps every chunk of it from the client.
#[tokio::test]
async fn an_abort_keeps_the_window_from_the_client() {
    let server = TestServer::start(CONFIG).await;
    let answer: Answer = Arc::new(|call| {
        if window_texts(call).iter().any(|text| text.contains("secret")) {
            abort("no secrets")
        } else {
            cont()
        }
    });
    let _guard = serve_hello(server.channel().await, windowed_hello("guard", 3, 0), answer).await;
    let chunks = server.stream(request("guarded", "here is the secret plan for all")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert_eq!(tripwire.reason, "no secrets");
    assert_eq!(tripwire.processor_id, "guard");
    let seen = text(&chunks);
    assert!(!seen.contains("secret"), "{seen}");
    // The windows before the one with the secret went out, in order.
    assert!("echo: here is the secret plan for all".starts_with(&seen), "{seen}");
}

/// Answering a window with no chunks drops them all.
#[tokio::test]
async fn dropping_a_window_drops_its_chunks() {
    let server = TestServer::start(CONFIG).await;
    let answer: Answer = Arc::new(|call| {
        if window_texts(call).is_empty() {
            cont()
        } else {
            outcome(pb::hook_result::Outcome::Drop(pb::Drop {}))
        }
    });
    let _guard = serve_hello(server.channel().await, windowed_hello("guard", 2, 0), answer).await;
    let result = server.generate(request("guarded", "nothing of this shows")).await;
    assert_eq!(result.text, "");
    assert_eq!(result.finish_reason, "stop");
}

/// An observed window never holds chunks back: the observer sees copies, its answers ignored.
#[tokio::test]
async fn observers_see_windows_without_holding_chunks() {
    let server = TestServer::start(CONFIG).await;
    let windows: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let log = Arc::clone(&windows);
    let answer: Answer = Arc::new(move |call| {
        log.lock().unwrap().push(window_texts(call));
        None // never answers
    });
    let _watcher = serve_hello(server.channel().await, windowed_hello("watcher", 64, 0), answer).await;
    let chunks = server.stream(request("watched", "watch this")).await;
    assert_eq!(text(&chunks), "echo: watch this");
    common::eventually("the observer to see the text in one window", || {
        windows.lock().unwrap().iter().any(|texts| texts.concat() == "echo: watch this")
    })
    .await;
}

/// A Hello asking for a malformed window is refused with INVALID_ARGUMENT naming the field.
#[tokio::test]
async fn bad_window_requests_are_refused() {
    let server = TestServer::start(CONFIG).await;
    let refusal = |hello: pb::Hello| {
        let channel = server.channel();
        async move {
            let (stream, _sender) = open(channel.await, hello_message(hello)).await;
            stream.expect_err("refused")
        }
    };
    let empty = refusal(windowed_hello("guard", 0, 10)).await;
    assert_eq!(empty.code(), Code::InvalidArgument);
    assert!(empty.message().contains("hello.hook_options[0].window.max_chunks"), "{}", empty.message());

    let mut wrong_hook = windowed_hello("guard", 8, 0);
    wrong_hook.hooks.push(pb::Hook::ProcessInput as i32);
    wrong_hook.hook_options[0].hook = pb::Hook::ProcessInput as i32;
    let wrong_hook = refusal(wrong_hook).await;
    assert_eq!(wrong_hook.code(), Code::InvalidArgument);
    assert!(
        wrong_hook.message().contains("only processOutputStream takes windows"),
        "{}",
        wrong_hook.message()
    );

    let mut unlisted = windowed_hello("guard", 8, 0);
    unlisted.hook_options[0].hook = pb::Hook::ProcessOutputResult as i32;
    let unlisted = refusal(unlisted).await;
    assert_eq!(unlisted.code(), Code::InvalidArgument);
    assert!(unlisted.message().contains("hello.hook_options[0].hook"), "{}", unlisted.message());
}
