//! The `structured-output` processor through the server: answers off the schema are retried with
//! the errors as feedback, then blocked, reported or replaced by a fallback; the object is kept
//! with the answer; the schema goes to the model with each step.

use crate::common;

use agentwire::server::pb;
use common::{TestServer, in_thread, inspected, request, tripwire};
use serde_json::json;

const CONFIG: &str = r#"
[processors.city]
kind = "structured-output"
schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }

[processors.city-or-default]
kind = "structured-output"
schema = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }
max_retries = 1
on_error = "fallback"
fallback = { city = "unknown" }

[processors.any-object]
kind = "structured-output"
schema = { type = "object" }

[[agents]]
id = "second-try"
model = "mock/script"
memory = { last_messages = 10 }
max_processor_retries = 3
output_processors = ["city"]
script = [{ text = "It is Paris." }, { text = "```json\n{\"city\": \"Paris\"}\n```" }]

[[agents]]
id = "never"
model = "mock/script"
max_processor_retries = 3
output_processors = ["city"]
script = [{ text = "It is Paris." }]

[[agents]]
id = "defaulted"
model = "mock/script"
max_processor_retries = 3
output_processors = ["city-or-default"]
script = [{ text = "It is Paris." }]

[[agents]]
id = "told"
model = "mock/inspect"
input_processors = ["any-object"]
output_processors = ["any-object"]
"#;

fn objects(result: &pb::GenerateResponse) -> Vec<serde_json::Value> {
    result
        .data
        .iter()
        .filter(|chunk| chunk.r#type == "data-structured-output")
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::Data(data)) => Some(common::json(&data.data)),
            _ => None,
        })
        .collect()
}

/// An answer that does not follow the schema is retried with the validation errors as feedback.
#[tokio::test]
async fn an_answer_off_the_schema_is_retried_with_feedback() {
    let server = TestServer::start(CONFIG).await;
    let result = server.generate(in_thread("second-try", "where?", "t")).await;
    assert_eq!(objects(&result), [json!({ "object": { "city": "Paris" } })]);
    let rejected = result.steps[0].tripwire.as_ref().expect("the first step was rejected");
    assert!(
        rejected.reason.contains("not JSON") && rejected.reason.contains("\"required\""),
        "{}",
        rejected.reason
    );
    assert_eq!(result.finish_reason, "stop");
    let stored = server.stored_texts("t").await;
    assert_eq!(stored.len(), 2, "the rejected step is not kept: {stored:?}");
}

/// When retries run out, the run trips (`block`) or answers with the fallback (`fallback`).
#[tokio::test]
async fn retries_run_out_into_a_tripwire_or_a_fallback() {
    let server = TestServer::start(CONFIG).await;
    let chunks = server.stream(request("never", "where?")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert!(
        tripwire.reason.starts_with("No answer followed the schema after 3 attempts"),
        "{}",
        tripwire.reason
    );
    let result = server.generate(request("defaulted", "where?")).await;
    let objects = objects(&result);
    assert_eq!(objects.len(), 1);
    assert_eq!(
        (&objects[0]["object"], &objects[0]["fallback"]),
        (&json!({ "city": "unknown" }), &json!(true))
    );
}

/// The output schema is sent to the model with every step.
#[tokio::test]
async fn the_schema_goes_to_the_model() {
    let server = TestServer::start(CONFIG).await;
    let seen = inspected(&server.generate(request("told", "hi")).await.text);
    assert_eq!(seen["structured_output"], json!({ "type": "object" }));
}
