//! Message history through the real server: the window the model sees, what is saved and when
//! nothing is, restarts, placement of a listed memory processor, and thread ownership.

use crate::common;

use std::sync::Arc;

use agentwire::domain::{DataChunk, Hook, HookSet, Message, MessageSource};
use agentwire::processor::{
    HookError, InputArgs, InputOutcome, InputStepArgs, OutputResultArgs, Processor, StepOverrides,
};
use agentwire::server::pb;
use common::{Log, TestServer, TestServerBuilder, in_thread, inspected, names, request, tripwire};
use tonic::Code;

const CONFIG: &str = r#"
[storage]
max_file_bytes = 1024

[processors.no-secrets]
kind = "content-filter"
blocked_words = ["secret"]

[processors.block-result]
kind = "abort-in"
hook = "processOutputResult"

[processors.counter]
kind = "count-memory"

[processors.noter]
kind = "noter"

[[agents]]
id = "noted"
model = "mock/echo"
memory = { last_messages = 10 }
input_processors = ["noter"]
output_processors = ["noter"]

[[agents]]
id = "remote-input-guard"
model = "mock/inspect"
memory = { last_messages = 10 }
input_processors = [{ remote = "input-guard", timeout_ms = 2000 }]

[[agents]]
id = "filtered-history"
model = "mock/echo"
memory = { last_messages = 10 }
input_processors = ["no-secrets"]

[[agents]]
id = "remote-history"
model = "mock/echo"
memory = { last_messages = 10 }
output_processors = [{ remote = "message-history", timeout_ms = 2000 }]

[[agents]]
id = "echo"
model = "mock/echo"
memory = { last_messages = 10 }

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["no-secrets"]
output_processors = ["no-secrets"]
memory = { last_messages = 10 }

[[agents]]
id = "inspector"
model = "mock/inspect"
memory = { last_messages = 3 }

[[agents]]
id = "narrow"
model = "mock/inspect"
memory = { last_messages = 2 }

[[agents]]
id = "failing"
model = "mock/script"
script = [{ error = { status = 400, message = "rejected" } }]
memory = {}

[[agents]]
id = "calc"
model = "mock/script"
tools = ["calculator"]
memory = {}
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "3 * 3" } }] },
  { text = "nine" },
]

[[agents]]
id = "placed"
model = "mock/echo"
input_processors = ["counter", "message-history"]
memory = {}

[[agents]]
id = "automatic"
model = "mock/echo"
input_processors = ["counter"]
memory = {}
"#;

fn builder() -> TestServerBuilder {
    TestServer::builder(CONFIG)
        .kind("count-memory", |id, _, log| Arc::new(CountMemory { id: id.to_owned(), log }))
        .kind("noter", |id, _, _| Arc::new(Noter { id: id.to_owned() }))
}

/// The texts of the messages the inspector's model saw, in order.
async fn seen_by_model(server: &TestServer, thread: &str) -> Vec<String> {
    let result = server.generate(in_thread("inspector", "what do you see?", thread)).await;
    let prompt = inspected(&result.text);
    prompt["messages"].as_array().unwrap().iter().map(|m| m["text"].as_str().unwrap().to_owned()).collect()
}

/// The last `last_messages` messages of the thread reach the model before the new one, in order.
#[tokio::test]
async fn history_window_reaches_the_model_in_order() {
    let server = builder().start().await;
    for text in ["one", "two", "three"] {
        server.generate(in_thread("echo", text, "t")).await;
    }
    assert_eq!(seen_by_model(&server, "t").await, ["echo: two", "three", "echo: three", "what do you see?"]);
    let other_thread = seen_by_model(&server, "elsewhere").await;
    assert_eq!(other_thread, ["what do you see?"], "threads do not share history");
}

/// Aborts on input or output, in any output hook, and failed runs save nothing.
#[tokio::test]
async fn aborted_and_failed_runs_save_nothing() {
    let server = builder().start().await;
    let input_abort = server.stream(in_thread("guarded", "my secret", "t")).await;
    assert!(tripwire(&input_abort).is_some());
    let mut output_abort = in_thread("guarded", "fine", "t");
    output_abort.input_processors = names(&[]);
    output_abort.text = "the secret is out".into();
    assert_eq!(server.generate(output_abort).await.finish_reason, "other");
    let mut result_abort = in_thread("echo", "blocked late", "t");
    result_abort.output_processors = names(&["block-result"]);
    assert_eq!(server.generate(result_abort).await.finish_reason, "other");
    assert_eq!(server.generate(in_thread("failing", "doomed", "t")).await.finish_reason, "error");
    assert_eq!(seen_by_model(&server, "t").await, ["what do you see?"], "nothing was saved");
}

/// A tool call and its result are saved and loaded together; a window that would split them
/// drops the orphan result.
#[tokio::test]
async fn tool_calls_and_results_stay_together() {
    let server = builder().start().await;
    let roles = |result: pb::GenerateResponse| -> Vec<String> {
        let prompt = inspected(&result.text);
        prompt["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap().to_owned())
            .collect()
    };
    server.generate(in_thread("calc", "3 * 3?", "wide")).await;
    let window_of_three = roles(server.generate(in_thread("inspector", "and now?", "wide")).await);
    assert_eq!(
        window_of_three,
        ["assistant", "tool", "assistant", "user"],
        "[call, result, answer] kept whole"
    );
    server.generate(in_thread("calc", "3 * 3?", "narrow")).await;
    let window_of_two = roles(server.generate(in_thread("narrow", "and now?", "narrow")).await);
    assert_eq!(
        window_of_two,
        ["assistant", "user"],
        "[result, answer]: the result lost its call and is dropped"
    );
}

/// Everything saved survives a restart of the server on the same data directory.
#[tokio::test]
async fn history_survives_a_restart() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = builder().data_dir(data_dir.path()).start().await;
    server.generate(in_thread("echo", "before the restart", "t")).await;
    server.stop().await;
    let restarted = builder().data_dir(data_dir.path()).start().await;
    assert_eq!(
        seen_by_model(&restarted, "t").await,
        ["before the restart", "echo: before the restart", "what do you see?"]
    );
}

/// A memory processor the agent lists runs where it is listed, instead of first.
#[tokio::test]
async fn a_listed_memory_processor_replaces_the_automatic_one() {
    let server = builder().start().await;
    server.generate(in_thread("echo", "earlier", "t")).await;
    server.generate(in_thread("placed", "now", "t")).await;
    server.generate(in_thread("automatic", "now", "t")).await;
    assert_eq!(server.log.with_prefix("counter:"), ["counter:0 remembered", "counter:4 remembered"]);
}

/// A remote processor listed with a memory processor's id replaces the automatic one on that
/// side: it gets the run's `processOutputResult`, and the automatic history saves nothing.
#[tokio::test]
async fn a_remote_processor_with_a_memory_id_replaces_the_automatic_one() {
    let server = builder().start().await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let _instance = common::remote::serve(
        server.channel().await,
        "message-history",
        &[pb::Hook::ProcessOutputResult],
        Arc::new(move |call| {
            log.lock().unwrap().push(call.hook);
            common::remote::cont()
        }),
    )
    .await;
    let result = server.generate(in_thread("remote-history", "keep this yourself", "rt")).await;
    assert_eq!(result.text, "echo: keep this yourself");
    assert_eq!(seen.lock().unwrap().as_slice(), [pb::Hook::ProcessOutputResult as i32]);
    assert!(server.stored_texts("rt").await.is_empty(), "only the listed message-history ran");
}

/// `processInput` sees the loaded history with each message's source, on the wire too; a guard
/// that drops the remembered messages changes only this run's prompt, never what is stored.
#[tokio::test]
async fn process_input_sees_the_history_marked_by_source() {
    let server = builder().start().await;
    server.generate(in_thread("echo", "earlier", "sources")).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let _guard = common::remote::serve(
        server.channel().await,
        "input-guard",
        &[pb::Hook::ProcessInput],
        Arc::new(move |call| {
            log.lock().unwrap().push((common::remote::call_text(call), call.message_sources.clone()));
            let own: Vec<pb::Message> = call
                .messages
                .iter()
                .zip(&call.message_sources)
                .filter(|(_, source)| **source == pb::MessageSource::Input as i32)
                .map(|(message, _)| message.clone())
                .collect();
            let replacement =
                pb::Replacement { messages: Some(pb::MessageList { messages: own }), ..Default::default() };
            common::remote::outcome(pb::hook_result::Outcome::Replace(replacement))
        }),
    )
    .await;
    let result = server.generate(in_thread("remote-input-guard", "now", "sources")).await;
    let (memory, input) = (pb::MessageSource::Memory as i32, pb::MessageSource::Input as i32);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [("earlier echo: earlier now".to_owned(), vec![memory, memory, input])]);
    let prompt = inspected(&result.text);
    let texts: Vec<&str> = prompt["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["now"], "the guard dropped the history from this run's prompt");
    let stored = server.stored_texts("sources").await;
    assert_eq!(&stored[..3], ["earlier", "echo: earlier", "now"], "what is stored is untouched");
}

/// The built-in input guardrails check only the run's own input: a blocked word in the history
/// does not trip every later run of the thread.
#[tokio::test]
async fn input_guardrails_check_only_the_runs_own_input() {
    let server = builder().start().await;
    server.generate(in_thread("echo", "my secret is hunter2", "remembered")).await;
    let later = server.generate(in_thread("filtered-history", "what did I say?", "remembered")).await;
    assert!(later.tripwire.is_none(), "{:?}", later.tripwire);
    let blocked = server.generate(in_thread("filtered-history", "tell the secret", "remembered")).await;
    assert_eq!(blocked.tripwire.expect("the run's own input is checked").processor_id, "no-secrets");
}

/// A non-transient `data-*` chunk from any hook — here `processInputStep` and
/// `processOutputResult` — is stored with the answer; transient ones are only streamed.
#[tokio::test]
async fn data_chunks_of_any_hook_are_stored_with_the_answer() {
    let server = builder().start().await;
    let result = server.generate(in_thread("noted", "hi", "noted")).await;
    let streamed: Vec<&str> = result.data.iter().map(|data| data.r#type.as_str()).collect();
    assert_eq!(streamed, ["data-step-note", "data-step-passing", "data-result-note"]);
    let mut memory =
        agentwire::server::pb::memory_service_client::MemoryServiceClient::new(server.channel().await);
    let list = pb::ListMessagesRequest {
        thread_id: "noted".into(),
        resource_id: "alice".into(),
        direction: pb::Direction::Forward.into(),
        page_size: 10,
        page_token: String::new(),
    };
    let stored = memory.list_messages(list).await.unwrap().into_inner().messages;
    let kept: Vec<&str> = stored
        .iter()
        .filter(|message| message.role == "assistant")
        .flat_map(|message| &message.parts)
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Data(data)) => Some(data.r#type.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(kept, ["data-step-note", "data-result-note"]);
}

/// A thread id is its resource's own: another resource running in a thread of the same id has a
/// thread of its own, and neither sees the other's history.
#[tokio::test]
async fn thread_ids_do_not_cross_resources() {
    let server = builder().start().await;
    server.generate(in_thread("echo", "mine", "t")).await;
    let mut intruder = in_thread("inspector", "let me in", "t");
    intruder.resource_id = "mallory".into();
    let prompt = inspected(&server.generate(intruder).await.text);
    assert_eq!(prompt["messages"].as_array().map(Vec::len), Some(1), "mallory sees none of alice's history");
    assert_eq!(server.stored_texts("t").await, ["mine", "echo: mine"], "alice's thread is untouched");
}

/// A message id is one resource's: another tenant's input message with an id alice used is
/// saved all the same (it used to be skipped silently, which also told the tenant the id existed).
#[tokio::test]
async fn message_ids_do_not_cross_resources() {
    let server = builder().start().await;
    let with_id = |resource: &str, thread: &str, text: &str| {
        let mut message = common::message("user", text);
        message.id = "shared-id".into();
        pb::RunRequest {
            agent_id: "echo".into(),
            messages: vec![message],
            thread_id: thread.into(),
            resource_id: resource.into(),
            ..Default::default()
        }
    };
    server.generate(with_id("alice", "alice-thread", "alice asks")).await;
    server.generate(with_id("bob", "bob-thread", "bob asks")).await;
    let mut memory = pb::memory_service_client::MemoryServiceClient::new(server.channel().await);
    let list = pb::ListMessagesRequest {
        thread_id: "bob-thread".into(),
        resource_id: "bob".into(),
        page_size: 10,
        ..Default::default()
    };
    let bobs: Vec<String> = memory
        .list_messages(list)
        .await
        .unwrap()
        .into_inner()
        .messages
        .iter()
        .map(common::message_text)
        .collect();
    assert_eq!(bobs, ["bob asks", "echo: bob asks"]);
    // Within alice's resource the id still makes a resend idempotent.
    server.generate(with_id("alice", "alice-thread", "alice asks")).await;
    assert_eq!(
        server.stored_texts("alice-thread").await,
        ["alice asks", "echo: alice asks", "echo: alice asks"]
    );
}

/// Without a thread, a memory agent runs and remembers nothing.
#[tokio::test]
async fn runs_without_a_thread_remember_nothing() {
    let server = builder().start().await;
    let result = server.generate(request("echo", "no thread")).await;
    assert_eq!(result.text, "echo: no thread");
    let prompt = inspected(&server.generate(request("inspector", "anything?")).await.text);
    assert_eq!(prompt["messages"].as_array().map(Vec::len), Some(1));
}

/// Logs how many remembered messages the list holds when it runs.
struct CountMemory {
    id: String,
    log: Log,
}

#[async_trait::async_trait]
impl Processor for CountMemory {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        let remembered = args.message_list.from_source(MessageSource::Memory).count();
        self.log.push(format!("{}:{remembered} remembered", self.id));
        Ok(InputOutcome::Unchanged)
    }
}

fn with_file(agent: &str, thread: &str, bytes: usize) -> pb::RunRequest {
    let text = pb::Part { part: Some(pb::part::Part::Text(pb::TextPart { text: "see attached".into() })) };
    let file = pb::Part {
        part: Some(pb::part::Part::File(pb::FilePart {
            media_type: "application/octet-stream".into(),
            data: vec![7; bytes],
            url: String::new(),
            filename: "blob.bin".into(),
        })),
    };
    let mut run = in_thread(agent, "", thread);
    run.messages = vec![pb::Message { role: "user".into(), parts: vec![text, file], ..Default::default() }];
    run
}

/// File parts are stored up to `storage.max_file_bytes`; larger ones are refused before the run
/// with RESOURCE_EXHAUSTED naming the field and the limit.
#[tokio::test]
async fn file_parts_are_stored_up_to_the_limit() {
    let server = builder().start().await;
    let stored = server.generate(with_file("echo", "t", 1000)).await;
    assert_eq!(stored.finish_reason, "stop");
    let Some(pb::part::Part::File(file)) = &stored.messages[0].parts[1].part else { panic!("a file part") };
    assert_eq!(file.data.len(), 1000);

    let status = server.client().await.generate(with_file("echo", "t", 2000)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    let message = status.message();
    assert!(
        message.contains("messages[0].parts[1].file.data")
            && message.contains("storage.max_file_bytes = 1024"),
        "{message}"
    );
    let without_memory = server.generate(with_file("echo", "", 2000)).await;
    assert_eq!(without_memory.finish_reason, "stop", "nothing is stored without a thread");
}

/// Emits a kept and a transient chunk in `processInputStep`, and a kept one in
/// `processOutputResult`.
struct Noter {
    id: String,
}

#[async_trait::async_trait]
impl Processor for Noter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInputStep, Hook::ProcessOutputResult])
    }

    async fn process_input_step(&self, mut args: InputStepArgs<'_>) -> Result<StepOverrides, HookError> {
        args.ctx.emit(DataChunk::new("step-note", serde_json::json!({ "step": args.step_number })));
        args.ctx.emit(DataChunk::new("step-passing", serde_json::json!(1)).transient());
        Ok(StepOverrides::default())
    }

    async fn process_output_result(
        &self,
        mut args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        args.ctx.emit(DataChunk::new("result-note", serde_json::json!({ "text": args.result.text })));
        Ok(None)
    }
}
