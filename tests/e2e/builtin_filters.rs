//! `unicode-normalizer`, `tool-call-filter`, `batch-parts` and `language-detector` through the
//! server.

use crate::common;

use agentwire::server::pb;
use common::{TestServer, in_thread, inspected, request, text, tripwire};

const CONFIG: &str = r#"
[processors.no-secrets]
kind = "content-filter"
blocked_words = ["secret"]

[processors.batch]
kind = "batch-parts"
max_chunks = 4
max_delay_ms = 0

[[agents]]
id = "normalised"
model = "mock/echo"
input_processors = ["unicode-normalizer", "no-secrets"]

[[agents]]
id = "normalise-only"
model = "mock/echo"
input_processors = ["unicode-normalizer"]

[[agents]]
id = "calc"
model = "mock/script"
tools = ["calculator"]
memory = { last_messages = 10 }
script = [{ tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] }, { text = "two" }]

[[agents]]
id = "look-filtered"
model = "mock/inspect"
memory = { last_messages = 10 }
input_processors = ["tool-call-filter"]

[[agents]]
id = "look-all"
model = "mock/inspect"
memory = { last_messages = 10 }

[[agents]]
id = "batched"
model = "mock/echo"
output_processors = ["batch"]

[processors.english-only]
kind = "language-detector"
allowed = ["eng"]

[[agents]]
id = "english"
model = "mock/echo"
input_processors = ["english-only"]
"#;

/// unicode-normalizer before content-filter: zero-width and look-alike characters cannot hide a blocked word.
#[tokio::test]
async fn normalised_input_cannot_hide_words_from_filters() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("normalised", "the ｓｅ\u{200B}ｃｒｅｔ plan")).await;
    assert!(tripwire(&chunks).is_some(), "full-width and zero-width characters were folded");
    let result = server.generate(request("normalise-only", "  ｈｅｌｌｏ \u{0007}  world\u{FEFF} ")).await;
    assert_eq!(result.text, "echo: hello world");
}

fn has_tool_parts(seen: &serde_json::Value) -> bool {
    seen["messages"].as_array().unwrap().iter().any(|message| {
        message["parts"].as_array().unwrap().iter().any(|part| {
            let kind = part["type"].as_str().unwrap_or_default();
            kind.contains("tool")
        })
    })
}

/// tool-call-filter hides remembered tool calls from the prompt while the thread keeps them.
#[tokio::test]
async fn tool_calls_are_hidden_from_the_model_but_kept() {
    let server = TestServer::start(CONFIG).await;
    assert_eq!(server.generate(in_thread("calc", "1 + 1?", "t")).await.text, "two");
    let all = inspected(&server.generate(in_thread("look-all", "and now?", "t")).await.text);
    assert!(has_tool_parts(&all), "history holds the tool call: {all}");
    let filtered = inspected(&server.generate(in_thread("look-filtered", "and now?", "t")).await.text);
    assert!(!has_tool_parts(&filtered), "{filtered}");
    let texts: Vec<&str> = filtered["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["text"].as_str())
        .collect();
    assert!(texts.contains(&"1 + 1?") && texts.contains(&"two"), "the rest of the history stays: {texts:?}");
}

/// batch-parts coalesces text deltas into fewer chunks with the same text, in order.
#[tokio::test]
async fn batch_parts_coalesces_deltas_in_order() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("batched", "a b c d e f g h i j k l")).await;
    assert_eq!(text(&chunks), "echo: a b c d e f g h i j k l");
    let deltas: Vec<&pb::Chunk> = chunks.iter().filter(|chunk| chunk.r#type == "text-delta").collect();
    assert_eq!(deltas.len(), 4, "13 deltas in batches of 4");
}

/// language-detector trips on input outside its allow list and lets allowed languages through.
#[tokio::test]
async fn languages_outside_the_allow_list_are_blocked() {
    let server = TestServer::start(CONFIG).await;
    let passed =
        server.generate(request("english", "Could you tell me how the weather will be tomorrow?")).await;
    assert_eq!(passed.finish_reason, "stop");
    let chunks =
        server.stream(request("english", "Könnten Sie mir bitte sagen, wie das Wetter morgen wird?")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert!(tripwire.reason.contains("German"), "{}", tripwire.reason);
    assert_eq!(common::json(&tripwire.metadata)["language"], "deu");
    // Too short to tell: let through.
    assert_eq!(server.generate(request("english", "ok")).await.finish_reason, "stop");
}
