//! Real model providers against a fake provider on loopback (a real HTTP server): OpenAI-style
//! and Anthropic streams, tool-call loops with streamed arguments, retries on 429 with
//! Retry-After, rejections through processAPIError, a stalled stream, a cancelled run closing the
//! HTTP request, and a model switched per step.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentwire::domain::{CONTINUE_TURN, EARLIER_CONVERSATION_TURN, Hook, HookSet};
use agentwire::model::ModelError;
use agentwire::processor::{
    ApiErrorArgs, ApiErrorOutcome, HookError, InputStepArgs, Processor, StepOverrides,
};
use agentwire::server::pb;
use common::fake_provider::{FakeProvider, Reply, json_events, openai_text};
use common::{Log, TestServer, error, in_thread, message, request, text};
use serde_json::json;

fn config(base_url: &str) -> String {
    format!(
        r#"
[providers.fake]
base_url = "{base_url}"
headers = {{ authorization = "Bearer test-key", "x-team" = "platform" }}
read_timeout_ms = 400
answer_timeout_ms = 700
max_retries = 2

[providers.claude]
api = "anthropic"
base_url = "{base_url}"

[providers.kept]
base_url = "{base_url}"
max_idle_connections = 2

[processors.recover]
kind = "recover"

[processors.switch]
kind = "switch"

[processors.watch-stream]
kind = "pass-through"
hooks = ["processOutputStream"]

[[agents]]
id = "watched"
model = "fake/gpt-test"
output_processors = ["watch-stream"]

[[agents]]
id = "kept"
model = "kept/gpt-test"

[[agents]]
id = "chat"
model = "fake/gpt-test"
instructions = "Be brief."
settings = {{ temperature = 0.2, max_tokens = 64 }}

[[agents]]
id = "tools"
model = "fake/gpt-test"
tools = ["calculator"]

[[agents]]
id = "recovering"
model = "fake/gpt-test"
error_processors = ["recover"]

[[agents]]
id = "switching"
model = "fake/small"
input_processors = ["switch"]

[[agents]]
id = "claude"
model = "claude/claude-test"
tools = ["calculator"]

[[agents]]
id = "structured"
model = "fake/gpt-test"
output_schema = {{ type = "object", properties = {{ answer = {{ type = "integer" }} }}, required = ["answer"] }}

[[agents]]
id = "prefilled"
model = "fake/gpt-test"
error_processors = ["prefill-error-handler"]
memory = {{ last_messages = 10 }}

[providers.keyed]
base_url = "{base_url}"
api_key_env = "AGENTWIRE_TEST_SURELY_UNSET_KEY"

[[agents]]
id = "keyless"
model = "keyed/gpt-test"
"#
    )
}

/// An error processor that asks for a retry after a rejection.
struct Recover {
    log: Log,
}

#[async_trait::async_trait]
impl Processor for Recover {
    fn id(&self) -> &str {
        "recover"
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessApiError])
    }

    async fn process_api_error(&self, args: ApiErrorArgs<'_>) -> Result<ApiErrorOutcome, HookError> {
        if let ModelError::Rejected { status, message, .. } = args.error {
            self.log.push(format!("rejected {status}: {message}"));
        }
        Ok(ApiErrorOutcome { retry: args.ctx.retry_count == 0 })
    }
}

/// Switches the first step to `fake/large`.
struct Switch;

#[async_trait::async_trait]
impl Processor for Switch {
    fn id(&self) -> &str {
        "switch"
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep])
    }

    async fn process_input_step(&self, args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        let model = (args.step_number == 0).then(|| "fake/large".to_owned());
        Ok(StepOverrides { model, ..StepOverrides::default() })
    }
}

async fn server(fake: &FakeProvider) -> TestServer {
    TestServer::builder(&config(&fake.base_url))
        .kind("recover", |_, _, log| Arc::new(Recover { log }))
        .kind("switch", |_, _, _| Arc::new(Switch))
        .start()
        .await
}

/// An OpenAI-compatible SSE stream, served over real HTTP, becomes the run's chunks and usage.
#[tokio::test]
async fn an_openai_compatible_stream_becomes_chunks() {
    let fake = FakeProvider::start([Reply::events(openai_text("Hello from the fake model."))]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("chat", "hi")).await;
    assert_eq!(text(&chunks), "Hello from the fake model.");
    let deltas = chunks.iter().filter(|chunk| chunk.r#type == "text-delta").count();
    assert_eq!(deltas, 5, "streamed word by word");
    let Some(pb::chunk::Payload::Finish(finish)) = &chunks.last().unwrap().payload else { panic!("finish") };
    let usage = finish.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens, finish.finish_reason.as_str()), (11, 7, "stop"));

    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].header("authorization"), Some("Bearer test-key"));
    assert_eq!(seen[0].header("x-team"), Some("platform"));
    let body = &seen[0].body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["max_tokens"], 64);
    assert_eq!(
        body["messages"],
        json!([{ "role": "system", "content": "Be brief." }, { "role": "user", "content": "hi" }])
    );
}

/// A `Generate` that no processor of the stream watches asks the provider for the whole answer
/// in one piece, and reads the same text, usage and finish reason from it; a `Stream`, or a
/// `Generate` with a stream processor, asks for a stream.
#[tokio::test]
async fn a_generate_nobody_watches_is_answered_in_one_piece() {
    let fake = FakeProvider::start([Reply::events(openai_text("Hello in one piece."))]).await;
    let server = server(&fake).await;
    let result = server.generate(request("chat", "hi")).await;
    assert_eq!((result.text.as_str(), result.finish_reason.as_str()), ("Hello in one piece.", "stop"));
    let usage = result.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (11, 7));
    assert_eq!(server.generate(request("watched", "hi")).await.text, "Hello in one piece.");
    assert_eq!(text(&server.stream(request("chat", "hi")).await), "Hello in one piece.");
    let asked: Vec<(bool, bool)> = fake
        .seen()
        .iter()
        .map(|seen| (seen.body["stream"] == true, seen.body.get("stream_options").is_some()))
        .collect();
    assert_eq!(asked, [(false, false), (true, true), (true, true)], "generate, watched generate, stream");
}

/// Once its calls have ended, a provider keeps `max_idle_connections` of their connections
/// open for the next calls and closes the others.
#[tokio::test]
async fn idle_connections_beyond_the_limit_are_closed() {
    let slow = Reply::Events { data: openai_text("Kept."), gap: Duration::from_millis(40), stall: None };
    let fake = FakeProvider::keeping_alive([slow]).await;
    let server = server(&fake).await;
    let results = futures::future::join_all((0..6).map(|_| server.generate(request("kept", "hi")))).await;
    assert!(results.iter().all(|result| result.text == "Kept."), "{results:?}");
    assert_eq!(fake.seen().len(), 6);
    common::eventually("all but two idle connections to close", || fake.open_connections() == 2).await;
    // The two kept serve the next call.
    assert_eq!(server.generate(request("kept", "hi")).await.text, "Kept.");
    assert_eq!(fake.open_connections(), 2);
}

/// Tool-call arguments streamed in pieces are assembled, the tool runs, and the loop continues.
#[tokio::test]
async fn a_tool_loop_with_streamed_arguments() {
    let call = json_events([
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "id": "call_1", "type": "function", "function": { "name": "calculator", "arguments": "{\"expr" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [{ "index": 0, "function": { "arguments": "ession\": \"2 + 3\"}" } }] } }] }),
        json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }] }),
    ]);
    let fake = FakeProvider::start([Reply::events(call), Reply::events(openai_text("It is 5."))]).await;
    let server = server(&fake).await;
    let result = server.generate(request("tools", "what is 2 + 3?")).await;
    assert_eq!(result.text, "It is 5.");
    assert_eq!(result.steps.len(), 2);
    let seen = fake.seen();
    assert_eq!(seen[0].body["tools"][0]["function"]["name"], "calculator");
    let messages = seen[1].body["messages"].as_array().unwrap().clone();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], r#"{"expression":"2 + 3"}"#);
    let tool = &messages[messages.len() - 1];
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert!(tool["content"].as_str().unwrap().contains('5'), "{tool}");
}

/// A 429 is retried after the provider's Retry-After.
#[tokio::test]
async fn rate_limits_are_retried_after_what_the_provider_says() {
    let limited = Reply::Status { status: 429, retry_after: Some("0.2".into()), message: "slow down".into() };
    let fake = FakeProvider::start([limited, Reply::events(openai_text("Done."))]).await;
    let server = server(&fake).await;
    let started = std::time::Instant::now();
    let result = server.generate(request("chat", "hi")).await;
    assert_eq!(result.text, "Done.");
    assert_eq!(fake.seen().len(), 2);
    assert!(started.elapsed() >= Duration::from_millis(200), "waited for Retry-After");
}

/// `Retry-After` as an HTTP date counts too: one an hour away is past the 30 s cap, so the call
/// fails at once instead of being retried.
#[tokio::test]
async fn a_retry_after_date_beyond_the_cap_fails_at_once() {
    let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3600));
    let limited = Reply::Status { status: 429, retry_after: Some(later), message: "slow down".into() };
    let fake = FakeProvider::start([limited, Reply::events(openai_text("Done."))]).await;
    let server = server(&fake).await;
    let result = server.generate(request("chat", "hi")).await;
    assert_eq!(result.finish_reason, "error");
    assert_eq!(fake.seen().len(), 1, "not retried");
}

/// 5xx answers are retried max_retries times, then the run fails with a clear error.
#[tokio::test]
async fn server_errors_are_retried_then_fail_clearly() {
    let fake = FakeProvider::start([Reply::status(503, "overloaded")]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("chat", "hi")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("fake") && failure.message.contains("503"), "{}", failure.message);
    assert!(failure.message.contains("overloaded"), "{}", failure.message);
    assert_eq!(fake.seen().len(), 3, "the call and max_retries = 2 retries");
}

/// A provider's redirect is not followed: the run fails naming where it pointed, and the
/// request — its headers, a key among them — never reaches that host.
#[tokio::test]
async fn a_redirect_is_not_followed() {
    let elsewhere = FakeProvider::start([Reply::events(openai_text("elsewhere"))]).await;
    let fake =
        FakeProvider::start([Reply::Redirect(format!("{}/chat/completions", elsewhere.base_url))]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("chat", "hi")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("307"), "{}", failure.message);
    assert!(failure.message.contains(&elsewhere.base_url), "{}", failure.message);
    assert_eq!(fake.seen().len(), 1, "a redirect is not retried");
    assert!(elsewhere.seen().is_empty(), "the redirect was followed: {:?}", elsewhere.seen());
}

/// A provider's 4xx rejection goes to processAPIError, which may repair the request and retry.
#[tokio::test]
async fn a_rejection_goes_to_the_error_processors() {
    let fake = FakeProvider::start([
        Reply::status(400, "maximum context length exceeded"),
        Reply::events(openai_text("Shorter now.")),
    ])
    .await;
    let server = server(&fake).await;
    let result = server.generate(request("recovering", "a very long prompt")).await;
    assert_eq!(result.text, "Shorter now.");
    let logged = server.log.entries();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].starts_with("rejected 400: provider `fake`"), "{logged:?}");
    assert!(logged[0].contains("maximum context length exceeded"), "{logged:?}");
    assert_eq!(fake.seen().len(), 2, "400 is not retried by the provider itself");
}

/// A provider's refusal of a trailing assistant turn is repaired by `prefill-error-handler`: the
/// retry ends with a hidden `continue` user turn, which the model sees and memory never stores.
#[tokio::test]
async fn a_refused_prefill_is_retried_with_a_user_turn_that_is_never_stored() {
    let refusal = "This model does not support assistant message prefill. The conversation must end with a user message.";
    let fake =
        FakeProvider::start([Reply::status(400, refusal), Reply::events(openai_text(" falls the leaf."))])
            .await;
    let server = server(&fake).await;
    let mut run = in_thread("prefilled", "", "haiku");
    run.messages = vec![message("user", "A haiku, please."), message("assistant", "Autumn")];
    let result = server.generate(run).await;
    assert_eq!(result.text, " falls the leaf.");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "one retry");
    let first = seen[0].body["messages"].as_array().unwrap();
    assert_eq!(first.last().unwrap()["role"], "assistant", "the first call is sent as asked");
    let retried = seen[1].body["messages"].as_array().unwrap();
    assert_eq!(retried.last().unwrap(), &json!({ "role": "user", "content": CONTINUE_TURN }));
    assert_eq!(server.stored_texts("haiku").await, ["A haiku, please.", "Autumn", " falls the leaf."]);
}

/// `prefill-error-handler` leaves other rejections, and prompts that already end with a user
/// turn, to fail as they are.
#[tokio::test]
async fn prefill_error_handler_retries_only_a_trailing_assistant_turn() {
    let refusal = "assistant response prefill is incompatible with enable_thinking";
    let fake = FakeProvider::start([Reply::status(400, refusal), Reply::status(400, "bad request")]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("prefilled", "hi")).await;
    assert!(error(&chunks).expect("an error").message.contains("prefill"));
    let mut run = request("prefilled", "");
    run.messages = vec![message("user", "hi"), message("assistant", "Hel")];
    let chunks = server.stream(run).await;
    assert!(error(&chunks).expect("an error").message.contains("bad request"));
    assert_eq!(fake.seen().len(), 2, "no retry for either");
}

/// The Anthropic adapter gives the Messages API a user turn first and last: a prompt that would
/// open with an assistant turn (a history window starting mid-conversation) or close with one
/// (prefill, which current models refuse) gets a short user turn there.
#[tokio::test]
async fn anthropic_prompts_open_and_close_with_a_user_turn() {
    let answer = json_events([
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "Fine." } }),
        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn" }, "usage": { "output_tokens": 1 } }),
    ]);
    let fake = FakeProvider::start([Reply::events(answer)]).await;
    let server = server(&fake).await;
    let mut run = request("claude", "");
    run.messages =
        vec![message("assistant", "Welcome back."), message("user", "Go on."), message("assistant", "So")];
    assert_eq!(server.generate(run).await.text, "Fine.");
    let messages = fake.seen()[0].body["messages"].as_array().unwrap().clone();
    let turn =
        |role: &str, text: &str| json!({ "role": role, "content": [{ "type": "text", "text": text }] });
    assert_eq!(
        messages,
        [
            turn("user", EARLIER_CONVERSATION_TURN),
            turn("assistant", "Welcome back."),
            turn("user", "Go on."),
            turn("assistant", "So"),
            turn("user", CONTINUE_TURN),
        ]
    );
}

/// A provider that goes silent past read_timeout_ms ends the run with a stall error.
#[tokio::test]
async fn a_stalled_stream_ends_the_run() {
    let stalling = Reply::Events {
        data: json_events([json!({ "choices": [{ "index": 0, "delta": { "content": "Hel" } }] })]),
        gap: Duration::ZERO,
        stall: Some(Duration::from_secs(5)),
    };
    let fake = FakeProvider::start([stalling]).await;
    let server = server(&fake).await;
    let started = std::time::Instant::now();
    let chunks = server.stream(request("chat", "hi")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("stalled") && failure.message.contains("400 ms"), "{}", failure.message);
    assert!(started.elapsed() < Duration::from_secs(4), "the run did not wait for the stall to end");
    assert_eq!(text(&chunks), "Hel");

    // Answered in one piece, the provider is silent until the answer is done: the call waits
    // `answer_timeout_ms`, not `read_timeout_ms`, then ends the run the same way.
    let result = server.generate(request("chat", "hi")).await;
    let failure = result.error.expect("an error");
    assert!(failure.message.contains("stalled") && failure.message.contains("700 ms"), "{}", failure.message);
}

/// Cancelling a run closes its HTTP request to the provider.
#[tokio::test]
async fn a_cancelled_run_closes_the_http_request() {
    let endless = Reply::Events {
        data: (0..400)
            .map(|index| {
                json!({ "choices": [{ "index": 0, "delta": { "content": format!("w{index} ") } }] })
                    .to_string()
            })
            .collect(),
        gap: Duration::from_millis(10),
        stall: None,
    };
    let fake = FakeProvider::start([endless]).await;
    let server = server(&fake).await;
    let mut stream = server.client().await.stream(request("chat", "talk")).await.unwrap().into_inner();
    loop {
        let chunk = stream.message().await.unwrap().expect("chunks");
        if chunk.r#type == "text-delta" {
            break;
        }
    }
    drop(stream);
    common::eventually("the provider to see the client hang up", || fake.hung_up()).await;
}

/// processInputStep can switch the model of one step to another provider.
#[tokio::test]
async fn process_input_step_switches_the_model_per_step() {
    let fake = FakeProvider::start([Reply::events(openai_text("From the large one."))]).await;
    let server = server(&fake).await;
    let result = server.generate(request("switching", "hi")).await;
    assert_eq!(result.text, "From the large one.");
    assert_eq!(fake.seen()[0].body["model"], "large");
}

/// Anthropic's Messages stream becomes text and tool-call chunks.
#[tokio::test]
async fn anthropic_streams_text_and_tool_calls() {
    let tool_use = json_events([
        json!({ "type": "message_start", "message": { "usage": { "input_tokens": 20, "output_tokens": 1 } } }),
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "Let me add." } }),
        json!({ "type": "content_block_stop", "index": 0 }),
        json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {} } }),
        json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "{\"expression\": " } }),
        json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": "\"4 * 5\"}" } }),
        json!({ "type": "content_block_stop", "index": 1 }),
        json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use" }, "usage": { "output_tokens": 15 } }),
        json!({ "type": "message_stop" }),
    ]);
    let answer = json_events([
        json!({ "type": "message_start", "message": { "usage": { "input_tokens": 40, "output_tokens": 1 } } }),
        json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "thinking_delta", "thinking": "easy" } }),
        json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "text_delta", "text": "It is 20." } }),
        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn" }, "usage": { "output_tokens": 5 } }),
        json!({ "type": "message_stop" }),
    ]);
    let fake = FakeProvider::start([Reply::events(tool_use), Reply::events(answer)]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("claude", "4 times 5?")).await;
    assert_eq!(text(&chunks), "Let me add.It is 20.");
    assert!(chunks.iter().any(|chunk| chunk.r#type == "reasoning-delta"));
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(seen[0].body["tools"][0]["input_schema"]["type"], "object");
    let messages = seen[1].body["messages"].as_array().unwrap().clone();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(
        assistant["content"][1],
        json!({ "type": "tool_use", "id": "toolu_1", "name": "calculator", "input": { "expression": "4 * 5" } })
    );
    let result = &messages[messages.len() - 1];
    assert_eq!(result["role"], "user");
    assert_eq!(result["content"][0]["type"], "tool_result");
    assert_eq!(result["content"][0]["tool_use_id"], "toolu_1");
}

/// A provider whose key variable is not set fails the run with a message naming the variable;
/// nothing is sent.
#[tokio::test]
async fn a_missing_key_is_named() {
    let fake = FakeProvider::start([Reply::events(openai_text("unreachable"))]).await;
    let server = server(&fake).await;
    let chunks = server.stream(request("keyless", "hi")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(failure.message.contains("AGENTWIRE_TEST_SURELY_UNSET_KEY"), "{}", failure.message);
    assert!(fake.seen().is_empty());
}

/// A schema strict mode accepts (closed objects, every property required, all the way down)
/// goes with `strict: true`.
#[tokio::test]
async fn a_strict_ready_schema_is_sent_strict() {
    let fake = FakeProvider::start([Reply::events(openai_text("{\"answer\": 42}"))]).await;
    let server = server(&fake).await;
    let mut run = request("structured", "the answer?");
    let schema = json!({
        "type": "object",
        "properties": { "answer": { "type": "integer" } },
        "required": ["answer"],
        "additionalProperties": false,
    });
    run.output_schema = Some(agentwire::server::value::to_struct(&schema.as_object().unwrap().clone()));
    server.generate(run).await;
    assert_eq!(fake.seen()[0].body["response_format"]["json_schema"]["strict"], true);
}

/// An output schema goes to the provider as its JSON mode; the final object is validated and
/// returned; an answer that does not follow it fails the run, saying why.
#[tokio::test]
async fn structured_output_is_requested_validated_and_returned() {
    let fake = FakeProvider::start([
        Reply::events(openai_text("{\"answer\": 42}")),
        Reply::events(openai_text("{\"answer\": \"many\"}")),
    ])
    .await;
    let server = server(&fake).await;
    let result = server.generate(request("structured", "the answer?")).await;
    assert_eq!(common::json(&result.object), json!({ "answer": 42 }));
    let format = &fake.seen()[0].body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["schema"]["required"], json!(["answer"]));
    assert_eq!(format["json_schema"]["strict"], false, "strict mode would refuse an open object");

    let chunks = server.stream(request("structured", "again?")).await;
    let failure = error(&chunks).expect("an error chunk");
    assert!(
        failure.message.contains("output schema") && failure.message.contains("/answer"),
        "{}",
        failure.message
    );
}
