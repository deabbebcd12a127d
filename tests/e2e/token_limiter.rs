//! `token-limiter` through the server: remembered history trimmed to the prompt budget (never the
//! run's own messages), answers truncated or aborted at the output budget.

use crate::common;

use agentwire::server::pb;
use common::{TestServer, in_thread, inspected, request, text, tripwire};

const CONFIG: &str = r#"
[processors.budget]
kind = "token-limiter"
input_limit = 150

[processors.short]
kind = "token-limiter"
output_limit = 3

[processors.short-or-stop]
kind = "token-limiter"
output_limit = 3
strategy = "abort"

[processors.short-parts]
kind = "token-limiter"
output_limit = 2
count = "part"

[[agents]]
id = "chat"
model = "mock/echo"
memory = { last_messages = 40 }

[[agents]]
id = "look"
model = "mock/inspect"
memory = { last_messages = 40 }
input_processors = ["budget"]

[[agents]]
id = "terse"
model = "mock/echo"
memory = { last_messages = 40 }
output_processors = ["short"]

[[agents]]
id = "terse-or-stop"
model = "mock/echo"
output_processors = ["short-or-stop"]

[[agents]]
id = "two-steps"
model = "mock/script"
tools = ["calculator"]
output_processors = ["short-parts"]
script = [
  { text = "one two three four", tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "five six seven eight" },
]
"#;

const WORDS: &str = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor \
                     incididunt ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud";

fn report(result: &pb::GenerateResponse) -> serde_json::Value {
    common::report(result, "data-token-limit")
}

/// The oldest remembered messages are dropped until the prompt fits input_limit.
#[tokio::test]
async fn oldest_history_is_trimmed_to_the_budget() {
    let server = TestServer::start(CONFIG).await;
    for turn in 1..=3 {
        server.generate(in_thread("chat", &format!("turn {turn} {WORDS}"), "t")).await;
    }
    let result = server.generate(in_thread("look", "and now?", "t")).await;
    let seen = inspected(&result.text);
    let texts: Vec<&str> =
        seen["messages"].as_array().unwrap().iter().filter_map(|message| message["text"].as_str()).collect();
    assert_eq!(texts.last(), Some(&"and now?"), "the run's own input stays: {texts:?}");
    assert!(texts.iter().any(|text| text.starts_with("turn 3")), "the newest history stays: {texts:?}");
    assert!(!texts.iter().any(|text| text.contains("turn 1")), "the oldest history goes: {texts:?}");
    let report = report(&result);
    assert_eq!(report["limit"], 150);
    assert!(report["kept_tokens"].as_u64().unwrap() <= 150, "{report}");
    assert!(report["removed_messages"].as_u64().unwrap() >= 2, "{report}");
}

/// The run's own input is never trimmed: when it alone exceeds the budget, the run trips.
#[tokio::test]
async fn the_runs_own_input_is_never_trimmed() {
    let server = TestServer::start(CONFIG).await;
    let long = [WORDS; 8].join(" ");
    let chunks = server.stream(in_thread("look", &long, "t")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire instead of a prompt over budget");
    assert!(tripwire.reason.contains("input_limit is 150"), "{}", tripwire.reason);
    assert!(server.stored_texts("t").await.is_empty(), "a tripped run saves nothing");
}

/// A long answer is truncated at output_limit, streamed and stored so.
#[tokio::test]
async fn long_answers_are_truncated_at_a_token_and_stored_so() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(in_thread("terse", "hello world again", "t")).await;
    assert_eq!(text(&chunks), "echo: hello");
    let result = server.generate(in_thread("terse", "hello world again", "t2")).await;
    assert_eq!(result.text, "echo: hello");
    assert_eq!(result.finish_reason, "stop");
    assert_eq!(report(&result)["strategy"], "truncate");
    assert_eq!(
        server.stored_texts("t").await,
        ["hello world again", "echo: hello"],
        "memory keeps what was sent"
    );
}

/// With `abort`, the answer trips when it reaches output_limit.
#[tokio::test]
async fn abort_trips_at_the_limit() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("terse-or-stop", "hello world again")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert!(tripwire.reason.contains("output_limit of 3"), "{}", tripwire.reason);
    assert_eq!(text(&chunks), "echo: hello", "what was within the limit went out");
    assert!(server.generate(request("terse-or-stop", "hi")).await.finish_reason == "stop");
}

/// With `count = part`, each text part gets its own output budget.
#[tokio::test]
async fn part_counting_gives_each_text_part_its_own_budget() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(request("two-steps", "go")).await;
    let steps: Vec<&str> = result.steps.iter().map(|step| step.text.as_str()).collect();
    assert_eq!(steps, ["one two", "five six"]);
}
