//! The processors that ask an LLM judge — `moderation` and `prompt-injection-detector` — through
//! the server, with scripted judges: verdicts on the input, windowed verdicts on the stream (a
//! flagged window never reaches the client), and judges that fail closed or open.

mod common;

use agentwire::server::pb;
use common::{TestServer, error, in_thread, request, text, tripwire};

const CLEAN: &str = r#"{ text = '{"scores": {"hate": 0, "harassment": 0, "self-harm": 0, "sexual": 0, "violence": 0.1, "illicit": 0}, "reason": "fine"}' }"#;
const VIOLENT: &str = r#"{ text = '{"scores": {"hate": 0, "harassment": 0.2, "self-harm": 0, "sexual": 0, "violence": 0.9, "illicit": 0}, "reason": "threat"}' }"#;

fn config() -> String {
    format!(
        r#"
[processors.moderate-input]
kind = "moderation"
judge = {{ model = "mock/script", script = [{CLEAN}, {VIOLENT}] }}

[processors.moderate-output]
kind = "moderation"
window_chunks = 4
judge = {{ model = "mock/script", script = [{CLEAN}, {VIOLENT}] }}

[processors.moderate-or-fail]
kind = "moderation"
judge = {{ model = "mock/script", script = [{{ text = "I would rather not say." }}] }}

[processors.moderate-or-pass]
kind = "moderation"
judge = {{ model = "mock/script", on_failure = "allow", script = [{{ text = "I would rather not say." }}] }}

[[agents]]
id = "moderated"
model = "mock/echo"
memory = {{ last_messages = 10 }}
input_processors = ["moderate-input"]

[[agents]]
id = "moderated-answers"
model = "mock/echo"
output_processors = ["moderate-output"]

[[agents]]
id = "fails-closed"
model = "mock/echo"
input_processors = ["moderate-or-fail"]

[[agents]]
id = "fails-open"
model = "mock/echo"
input_processors = ["moderate-or-pass"]
"#
    )
}

fn report(result: &pb::GenerateResponse, name: &str) -> serde_json::Value {
    let chunk = result.data.iter().find(|chunk| chunk.r#type == name).expect("a report");
    let Some(pb::chunk::Payload::Data(data)) = &chunk.payload else { panic!("a data chunk") };
    common::json(&data.data)
}

#[tokio::test]
async fn moderation_judges_the_input_and_blocks_what_it_flags() {
    let server = TestServer::start(&config()).await;
    let passed = server.generate(in_thread("moderated", "hello there", "t")).await;
    assert_eq!(passed.text, "echo: hello there");
    let verdict = report(&passed, "data-moderation");
    assert_eq!(verdict["flagged"], serde_json::json!([]));
    assert_eq!(verdict["scores"]["violence"], 0.1);
    let chunks = server.stream(in_thread("moderated", "something menacing", "t")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert_eq!(tripwire.reason, "Moderation flagged violence in processInput");
    assert_eq!(common::json(&tripwire.metadata)["reason"], "threat");
    assert_eq!(server.stored_texts("t").await, ["hello there", "echo: hello there"], "nothing of it saved");
}

#[tokio::test]
async fn moderation_judges_the_stream_in_windows() {
    let server = TestServer::start(&config()).await;
    let chunks = server.stream(request("moderated-answers", "one two three four five six seven")).await;
    // One judge call per window of four: `echo:` and three words pass, the next four are flagged.
    assert_eq!(text(&chunks), "echo: one two three");
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert_eq!(tripwire.reason, "Moderation flagged violence in processOutputStream");
}

#[tokio::test]
async fn a_failing_judge_fails_closed_unless_told_otherwise() {
    let server = TestServer::start(&config()).await;
    let chunks = server.stream(request("fails-closed", "hello")).await;
    let failure = error(&chunks).expect("the run fails");
    assert!(
        failure.message.contains("moderate-or-fail") && failure.message.contains("not JSON"),
        "{}",
        failure.message
    );
    assert!(text(&chunks).is_empty());
    let passed = server.generate(request("fails-open", "hello")).await;
    assert_eq!(passed.text, "echo: hello");
    assert!(report(&passed, "data-moderation")["judge_error"].as_str().unwrap().contains("not JSON"));
}
