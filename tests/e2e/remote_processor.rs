//! Remote processors through the real server: the handshake and its refusals, a remote input
//! guardrail (tripwire, nothing saved), a remote stream rewriter, and the failure policies when
//! no instance is connected, an instance is too slow, or it goes away.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use common::remote::{abort, call_text, cont, hello, open, open_with_token, outcome, serve};
use common::{TestServer, in_thread, request, text, tripwire};
use tonic::Code;

const CONFIG: &str = r#"
[processors.word-guard]
kind = "remote"
timeout_ms = 2000

[processors.shouter]
kind = "remote"

[processors.slow]
kind = "remote"
timeout_ms = 200

[processors.optional]
kind = "remote"
remote_id = "maybe"
timeout_ms = 200
on_failure = "open"

[[agents]]
id = "guarded"
model = "mock/echo"
input_processors = ["word-guard"]
memory = {}

[processors.auditor]
kind = "remote"
mode = "observe"

[[agents]]
id = "audited"
model = "mock/echo"
input_processors = ["auditor"]

[[agents]]
id = "two-steps"
model = "mock/script"
tools = ["calculator"]
input_processors = ["word-guard"]
script = [
  { tool_calls = [{ name = "calculator", args = { expression = "1 + 1" } }] },
  { text = "two" },
]

[[agents]]
id = "loud"
model = "mock/echo"
output_processors = ["shouter"]

[[agents]]
id = "slow"
model = "mock/echo"
input_processors = ["slow"]

[[agents]]
id = "optional"
model = "mock/echo"
input_processors = ["optional"]
"#;

/// Sessions are refused, with a status that says why, for an unknown processor id, a protocol
/// version this server does not speak, no hooks, or a first message that is not Hello.
#[tokio::test]
async fn the_handshake_refuses_clearly() {
    let server = TestServer::start(CONFIG).await;
    let refusal = |message: pb::ProcessorMessage| {
        let channel = server.channel();
        async move {
            let (stream, _sender) = open(channel.await, message).await;
            stream.expect_err("refused")
        }
    };
    let unknown = refusal(hello("intruder", &[pb::Hook::ProcessInput])).await;
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(unknown.message().contains("intruder"));
    let mut future = hello("word-guard", &[pb::Hook::ProcessInput]);
    if let Some(pb::processor_message::Message::Hello(hello)) = &mut future.message {
        hello.min_protocol_version = 7;
        hello.max_protocol_version = 9;
    }
    let version = refusal(future).await;
    assert_eq!(version.code(), Code::FailedPrecondition);
    assert!(
        version.message().contains("[7:9]") && version.message().contains("[1:2]"),
        "{}",
        version.message()
    );
    let no_hooks = refusal(hello("word-guard", &[])).await;
    assert_eq!(no_hooks.code(), Code::InvalidArgument);
    let not_hello = refusal(pb::ProcessorMessage {
        message: Some(pb::processor_message::Message::Pong(pb::Pong { nonce: 1 })),
    })
    .await;
    assert_eq!(not_hello.code(), Code::InvalidArgument);
}

/// A remote input guardrail blocks a word: the run ends in a tripwire naming it, and nothing is
/// saved to memory; clean input passes.
#[tokio::test]
async fn a_remote_input_guardrail_trips_and_nothing_is_saved() {
    let server = TestServer::start(CONFIG).await;
    let _session = serve(
        server.channel().await,
        "word-guard",
        &[pb::Hook::ProcessInput],
        Arc::new(
            |call| if call_text(call).contains("secret") { abort("no secrets, please") } else { cont() },
        ),
    )
    .await;
    let chunks = server.stream(in_thread("guarded", "tell me the secret", "t")).await;
    let tripwire = tripwire(&chunks).expect("a tripwire");
    assert_eq!(tripwire.reason, "no secrets, please");
    assert_eq!(tripwire.processor_id, "word-guard");
    let mut memory = MemoryServiceClient::new(server.channel().await);
    let thread =
        memory.get_thread(pb::GetThreadRequest { thread_id: "t".into(), resource_id: String::new() }).await;
    assert_eq!(thread.unwrap_err().code(), Code::NotFound, "nothing was saved");

    let passed = server.generate(in_thread("guarded", "hello", "t")).await;
    assert_eq!(passed.text, "echo: hello");
}

/// A remote output processor rewrites the streamed answer.
#[tokio::test]
async fn a_remote_stream_rewriter_changes_the_answer() {
    let server = TestServer::start(CONFIG).await;
    let _session = serve(
        server.channel().await,
        "shouter",
        &[pb::Hook::ProcessOutputStream],
        Arc::new(|call| match call.part.as_ref().and_then(|part| part.payload.clone()) {
            Some(pb::chunk::Payload::TextDelta(delta)) => {
                let mut part = call.part.clone().unwrap();
                part.payload = Some(pb::chunk::Payload::TextDelta(pb::DeltaPayload {
                    id: delta.id,
                    text: delta.text.to_uppercase(),
                }));
                outcome(pb::hook_result::Outcome::Replace(pb::Replacement {
                    part: Some(part),
                    ..Default::default()
                }))
            }
            _ => cont(),
        }),
    )
    .await;
    let chunks = server.stream(request("loud", "quiet please")).await;
    assert_eq!(text(&chunks), "ECHO: QUIET PLEASE");
}

/// With no instance connected: `closed` ends in a tripwire saying so; `open` skips and says so.
#[tokio::test]
async fn no_instance_follows_the_failure_policy() {
    let server = TestServer::start(CONFIG).await;
    let closed = server.generate(request("guarded", "hi")).await;
    let tripwire = closed.tripwire.expect("closed policy trips");
    assert!(
        tripwire.reason.contains("word-guard") && tripwire.reason.contains("unavailable"),
        "{}",
        tripwire.reason
    );
    let open = server.generate(request("optional", "hi")).await;
    assert_eq!(open.text, "echo: hi");
    let skipped = &open.skipped_processors;
    assert!(!skipped.is_empty(), "the result lists the skipped processor");
    assert_eq!(
        (skipped[0].processor_id.as_str(), skipped[0].hook.as_str(), skipped[0].cause.as_str()),
        ("optional", "processInput", "unavailable")
    );
    assert_eq!(open.data.first().map(|chunk| chunk.r#type.as_str()), Some("data-processor-skipped"));
}

/// A processor slower than its timeout is reported as a timeout, never as a pass.
#[tokio::test]
async fn a_timeout_is_a_timeout() {
    let server = TestServer::start(CONFIG).await;
    let _session = serve(server.channel().await, "slow", &[pb::Hook::ProcessInput], Arc::new(|_| None)).await;
    let result = server.generate(request("slow", "hi")).await;
    let tripwire = result.tripwire.expect("a tripwire");
    assert!(tripwire.reason.contains("timed out after 200 ms"), "{}", tripwire.reason);
    assert_eq!(common::json(&tripwire.metadata)["cause"], "timeout");
}

/// An instance that goes away mid-call fails the call by policy (no other instance to move to).
#[tokio::test]
async fn an_instance_that_dies_mid_call_fails_by_policy() {
    let server = TestServer::start(CONFIG).await;
    let session =
        serve(server.channel().await, "word-guard", &[pb::Hook::ProcessInput], Arc::new(|_| None)).await;
    let run = tokio::spawn({
        let channel = server.channel().await;
        async move {
            let mut client = pb::agent_service_client::AgentServiceClient::new(channel);
            client.generate(in_thread("guarded", "hello", "t")).await.unwrap().into_inner()
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    session.kill();
    let result = run.await.unwrap();
    let tripwire = result.tripwire.expect("closed policy trips");
    // "disconnected", not "timed out": the call failed when the instance went, not at the timeout.
    assert!(tripwire.reason.contains("disconnected"), "{}", tripwire.reason);
}

/// With processor tokens configured, a session needs a token, the right one, and one that may
/// register as its processor id.
#[tokio::test]
async fn tokens_decide_who_may_register() {
    let config = format!(
        "{CONFIG}\n[[processor_tokens]]\ntoken = \"guard-token\"\nprocessors = [\"word-guard\"]\n\n\
         [[processor_tokens]]\ntoken = \"shout-token\"\nprocessors = [\"shouter\"]\n"
    );
    let server = TestServer::start(&config).await;
    let attempt = |token: Option<&'static str>| {
        let channel = server.channel();
        async move {
            open_with_token(channel.await, hello("word-guard", &[pb::Hook::ProcessInput]), token).await.0
        }
    };
    let missing = attempt(None).await.expect_err("refused");
    assert_eq!(missing.code(), Code::Unauthenticated);
    assert!(missing.message().contains("authorization"));
    assert_eq!(attempt(Some("guess")).await.expect_err("refused").code(), Code::Unauthenticated);
    let other = attempt(Some("shout-token")).await.expect_err("refused");
    assert_eq!(other.code(), Code::PermissionDenied);
    assert!(other.message().contains("word-guard"));
    let mut accepted = attempt(Some("guard-token")).await.expect("accepted");
    let welcome = accepted.message().await.unwrap().unwrap();
    assert!(matches!(welcome.message, Some(pb::server_message::Message::Welcome(_))));
}

/// ListProcessors shows the connected instances with their hooks and what they did.
#[tokio::test]
async fn list_processors_shows_the_pool() {
    let server = TestServer::start(CONFIG).await;
    let _guard =
        serve(server.channel().await, "word-guard", &[pb::Hook::ProcessInput], Arc::new(|_| cont())).await;
    let _slow = serve(server.channel().await, "slow", &[pb::Hook::ProcessInput], Arc::new(|_| None)).await;
    server.generate(request("guarded", "hi")).await;
    server.generate(request("slow", "hi")).await;
    let mut client = pb::processor_service_client::ProcessorServiceClient::new(server.channel().await);
    let instances =
        client.list_processors(pb::ListProcessorsRequest {}).await.unwrap().into_inner().instances;
    let summary: Vec<(&str, u64, u64)> = instances
        .iter()
        .map(|instance| (instance.processor_id.as_str(), instance.calls, instance.errors))
        .collect();
    assert_eq!(summary, [("slow", 0, 1), ("word-guard", 1, 0)], "the slow one timed out once");
    assert_eq!(instances[1].hooks, [pb::Hook::ProcessInput as i32]);
    assert!(instances[1].mean_latency_ms > 0.0);
}

/// Instances of one processor share the runs, and every call of a run goes to the same instance.
#[tokio::test]
async fn instances_share_runs_and_each_run_sticks_to_one() {
    let server = TestServer::start(CONFIG).await;
    let calls: Arc<std::sync::Mutex<Vec<(String, String)>>> = Arc::default();
    let hooks = [pb::Hook::ProcessInput, pb::Hook::ProcessInputStep];
    let mut instances = Vec::new();
    for name in ["a", "b"] {
        let log = Arc::clone(&calls);
        let answer: common::remote::Answer = Arc::new(move |call: &pb::HookCall| {
            log.lock().unwrap().push((call.run_id.clone(), name.to_owned()));
            cont()
        });
        instances.push(serve(server.channel().await, "word-guard", &hooks, answer).await);
    }
    for _ in 0..6 {
        assert_eq!(server.generate(request("two-steps", "1 + 1?")).await.text, "two");
    }
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 6 * 3, "processInput and two processInputStep per run");
    let mut by_run: std::collections::HashMap<&str, std::collections::HashSet<&str>> = Default::default();
    for (run, instance) in &calls {
        by_run.entry(run).or_default().insert(instance);
    }
    assert!(by_run.values().all(|instances| instances.len() == 1), "a run stays on one instance: {by_run:?}");
    let used: std::collections::HashSet<&str> = calls.iter().map(|(_, instance)| instance.as_str()).collect();
    assert_eq!(used.len(), 2, "both instances served runs");
}

/// One session carries the calls of 100 concurrent runs; each answer reaches its own run.
#[tokio::test]
async fn one_session_multiplexes_many_runs() {
    let server = TestServer::start(CONFIG).await;
    let _guard = serve(
        server.channel().await,
        "word-guard",
        &[pb::Hook::ProcessInput],
        Arc::new(|call| {
            let text = call_text(call);
            if text.starts_with("block") { abort(&format!("blocked {text}")) } else { cont() }
        }),
    )
    .await;
    let runs = (0..100).map(|index| {
        let channel = server.channel();
        async move {
            let text = if index % 2 == 0 { format!("block {index}") } else { format!("pass {index}") };
            let mut client = pb::agent_service_client::AgentServiceClient::new(channel.await);
            let result = client.generate(request("guarded", &text)).await.unwrap().into_inner();
            (text, result)
        }
    });
    for (text, result) in futures::future::join_all(runs).await {
        if text.starts_with("block") {
            assert_eq!(result.tripwire.expect("blocked").reason, format!("blocked {text}"));
        } else {
            assert_eq!(result.text, format!("echo: {text}"));
        }
    }
}

/// An observer gets the calls but is never waited for: a run goes on although it never answers.
#[tokio::test]
async fn observers_are_never_waited_for() {
    let server = TestServer::start(CONFIG).await;
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&seen);
    let _auditor = serve(
        server.channel().await,
        "auditor",
        &[pb::Hook::ProcessInput],
        Arc::new(move |call| {
            log.lock().unwrap().push(call_text(call));
            None // never answers
        }),
    )
    .await;
    let result = server.generate(request("audited", "audit me")).await;
    assert_eq!(result.text, "echo: audit me");
    common::eventually("the observer to get the call", || seen.lock().unwrap().as_slice() == ["audit me"])
        .await;
}

/// A run cancelled by its client tells the instance to cancel the call it is working on.
#[tokio::test]
async fn a_cancelled_run_cancels_its_call() {
    let server = TestServer::start(CONFIG).await;
    let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::clone(&called);
    let handler = Arc::new(move |_: &pb::HookCall| {
        seen.store(true, std::sync::atomic::Ordering::SeqCst);
        None
    });
    let instance = serve(server.channel().await, "word-guard", &[pb::Hook::ProcessInput], handler).await;
    let stream = server.client().await.stream(request("guarded", "hi")).await.unwrap().into_inner();
    common::eventually("word-guard to hold the call", || called.load(std::sync::atomic::Ordering::SeqCst))
        .await;
    drop(stream); // the client goes away while word-guard holds the call
    common::eventually("a Cancel for the abandoned call", || !instance.cancelled().is_empty()).await;
}

/// An answer its hook does not allow (`drop` or `retry_api_call` from processInput, a
/// replacement of a field processInput does not take, an empty replacement) fails the run at once — fail closed — with
/// an error naming the processor, the hook and the answer; nothing is saved.
#[tokio::test]
async fn an_answer_the_hook_does_not_allow_fails_the_run() {
    let model = pb::Replacement { model: Some("mock/inspect".into()), ..Default::default() };
    let prompt = pb::Replacement { prompt: Some(pb::MessageList::default()), ..Default::default() };
    let answers = [
        (pb::hook_result::Outcome::Drop(pb::Drop {}), "`drop`, which only processOutputStream may"),
        (
            pb::hook_result::Outcome::RetryApiCall(pb::RetryApiCall::default()),
            "`retry_api_call`, which only processAPIError may",
        ),
        (pb::hook_result::Outcome::Replace(model), "`replace.model`, which processInput does not take"),
        (pb::hook_result::Outcome::Replace(prompt), "`replace.prompt`, which processInput does not take"),
        (
            pb::hook_result::Outcome::Replace(pb::Replacement::default()),
            "an empty `replace`, which changes nothing",
        ),
    ];
    for (index, (answer, says)) in answers.into_iter().enumerate() {
        let server = TestServer::start(CONFIG).await;
        let _guard = serve(
            server.channel().await,
            "word-guard",
            &[pb::Hook::ProcessInput],
            Arc::new(move |_| outcome(answer.clone())),
        )
        .await;
        let thread = format!("refused-{index}");
        let chunks = server.stream(in_thread("guarded", "hi", &thread)).await;
        let failure = common::error(&chunks).expect("an error chunk");
        assert_eq!(failure.origin, "word-guard");
        assert!(
            failure.message.contains(&format!("answered processInput with {says}")),
            "{}",
            failure.message
        );
        assert!(server.stored_texts(&thread).await.is_empty(), "nothing is saved");
    }
}

/// An instance that answers with a frame the server cannot decode is broken off: the run fails
/// closed with a reason naming the decode error (not a bare "disconnected"), and the instance's
/// stream ends with INVALID_ARGUMENT saying what it sent (not OK).
#[tokio::test]
async fn an_undecodable_answer_ends_the_session_naming_the_error() {
    use prost::Message;
    let server = TestServer::start(CONFIG).await;
    let (outbox, frames) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    outbox.send(hello("word-guard", &[pb::Hook::ProcessInput]).encode_to_vec()).await.unwrap();
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.unwrap();
    let path = "/agentwire.v1.ProcessorService/Connect".parse().unwrap();
    let frames = tokio_stream::wrappers::ReceiverStream::new(frames);
    let connected = grpc.streaming(tonic::Request::new(frames), path, common::raw_codec::RawCodec).await;
    let mut inbound = connected.expect("the session opens").into_inner();
    let mut next = async || {
        let frame = inbound.message().await?.expect("the server keeps the stream open");
        Ok::<_, tonic::Status>(pb::ServerMessage::decode(frame.as_slice()).unwrap().message)
    };
    assert!(matches!(next().await, Ok(Some(pb::server_message::Message::Welcome(_)))));
    let run = tokio::spawn({
        let mut client = server.client().await;
        async move {
            let mut stream = client.stream(request("guarded", "hello")).await.unwrap().into_inner();
            let mut chunks = Vec::new();
            while let Some(chunk) = stream.message().await.unwrap() {
                chunks.push(chunk);
            }
            chunks
        }
    });
    loop {
        if let Ok(Some(pb::server_message::Message::Call(_))) = next().await {
            break;
        }
    }
    outbox.send(vec![0xff, 0xff, 0xff]).await.unwrap();
    let ended = loop {
        match next().await {
            Ok(_) => continue,
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), Code::InvalidArgument, "{ended:?}");
    assert!(ended.message().contains("could not decode"), "{}", ended.message());
    let chunks = run.await.unwrap();
    let tripwire = tripwire(&chunks).expect("the run fails closed");
    assert!(
        tripwire.reason.contains("word-guard") && tripwire.reason.contains("could not decode"),
        "{}",
        tripwire.reason
    );
}

/// A processor may not put in a message larger than `[limits] max_message_bytes` (a client could
/// not send it): a processInput that inflates the input fails the run naming the processor, the
/// message and the limit, and nothing is stored — while a replacement within the limit passes.
#[tokio::test]
async fn a_replacement_over_max_message_bytes_fails_the_run() {
    let config = format!("[limits]\nmax_message_bytes = 1024\n{CONFIG}");
    let server = TestServer::start(&config).await;
    let _guard = serve(
        server.channel().await,
        "word-guard",
        &[pb::Hook::ProcessInput],
        Arc::new(|call| {
            let size = if call_text(call).contains("inflate") { 4000 } else { 100 };
            common::remote::replace(pb::Replacement {
                messages: Some(pb::MessageList {
                    messages: vec![common::message("user", &"x".repeat(size))],
                }),
                ..Default::default()
            })
        }),
    )
    .await;
    let chunks = server.stream(in_thread("guarded", "inflate me", "inflated")).await;
    let failure = common::error(&chunks).expect("the run fails");
    assert_eq!(failure.origin, "word-guard");
    assert!(
        failure.message.contains("4000 bytes, over limits.max_message_bytes = 1024"),
        "{}",
        failure.message
    );
    assert!(server.stored_texts("inflated").await.is_empty(), "nothing is stored");
    let kept = server.stream(in_thread("guarded", "small", "small")).await;
    assert!(common::error(&kept).is_none(), "a replacement within the limit passes");
    assert_eq!(server.stored_texts("small").await[0], "x".repeat(100));
}
