//! The processor stream, from the server's side. A remote instance that says anything — any
//! `Hello`, then any message in answer to each call it gets — never panics the server (a panic
//! on any thread aborts the fuzzer), never hangs a run (each must end within `RUN_DEADLINE`),
//! and leaves the server serving.
//!
//! The input is a list of frames (`u16` little-endian length, then the bytes): frame 0 is the
//! `Hello`, each later frame the `ProcessorMessage` answering the next call (its `call_id` set
//! to the call's, or the answer would only be ignored). When the frames run out the instance
//! disconnects. The agents call the instance at every hook, for a tool, and keep memory.
#![no_main]

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agentwire::config::Config;
use agentwire::runtime::{Components, Runtime};
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use agentwire::server::pb::{self, processor_message, server_message};
use agentwire::server::{ServeOptions, serve};
use agentwire::storage::SledStore;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

const CONFIG: &str = r#"
[processors.fuzz]
kind = "remote"
timeout_ms = 50

[tools.probe]
kind = "remote"
server = "fuzz"
timeout_ms = 50

[[agents]]
id = "tools"
model = "mock/script"
tools = ["probe", "calculator"]
input_processors = ["fuzz"]
output_processors = ["fuzz"]
error_processors = ["fuzz"]
max_processor_retries = 2
max_steps = 3
memory = { last_messages = 10 }
script = [
  { tool_calls = [{ name = "probe", args = { q = "x" } }] },
  { text = "the answer is here" },
]

[[agents]]
id = "rejected"
model = "mock/script"
input_processors = ["fuzz"]
output_processors = ["fuzz"]
error_processors = ["fuzz"]
max_processor_retries = 1
memory = { last_messages = 10 }
script = [
  { error = { status = 429, message = "slow down" } },
  { text = "second try" },
]
"#;

/// Longer than any run can take with the instance's timeouts; past it the run hung.
const RUN_DEADLINE: Duration = Duration::from_secs(10);

struct Harness {
    runtime: tokio::runtime::Runtime,
    channel: Channel,
    _data_dir: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static HARNESS: OnceLock<Harness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let data_dir = tempfile::tempdir().unwrap();
        let config = Config::parse(CONFIG).expect("the fuzz config parses");
        let store = SledStore::open(data_dir.path()).expect("the store opens");
        let server = Runtime::new(&config, Components::builtin().with_store(Arc::new(store))).expect("valid");
        let options = ServeOptions::from_config(&config).expect("valid");
        let addr: SocketAddr = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(serve(listener, Arc::new(server), options, std::future::pending()));
            addr
        });
        let channel = runtime.block_on(async {
            Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.expect("connects")
        });
        Harness { runtime, channel, _data_dir: data_dir }
    })
}

/// The input's frames.
fn frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while data.len() >= 2 {
        let length = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
        frames.push(&data[2..2 + length]);
        data = &data[2 + length..];
    }
    frames
}

/// Frame 0 as a Hello for `fuzz` (the id and versions the fuzzer would rarely find are set
/// when left empty; anything else it says stands).
fn hello_of(frame: &[u8]) -> pb::Hello {
    let mut hello = pb::Hello::decode(frame).unwrap_or_default();
    if hello.processor_id.is_empty() {
        hello.processor_id = "fuzz".into();
    }
    if hello.min_protocol_version == 0 && hello.max_protocol_version == 0 {
        (hello.min_protocol_version, hello.max_protocol_version) = (1, 1);
    }
    if hello.hooks.is_empty() && hello.tools.is_empty() {
        hello.hooks = (1..=9).collect();
        hello.tools.push(pb::ToolSpec { name: "probe".into(), ..Default::default() });
    }
    hello
}

/// A frame as the answer to call `call_id`.
fn answer_of(frame: &[u8], call_id: u64) -> pb::ProcessorMessage {
    let mut message = pb::ProcessorMessage::decode(frame).unwrap_or_default();
    match &mut message.message {
        Some(processor_message::Message::Result(result)) => result.call_id = call_id,
        Some(processor_message::Message::ToolResult(output)) => output.call_id = call_id,
        _ => {}
    }
    message
}

async fn session(channel: Channel, frames: Vec<&[u8]>, agent_id: &str) {
    let Some((first, answers)) = frames.split_first() else { return };
    let (sender, outbox) = mpsc::channel(64);
    let hello = processor_message::Message::Hello(hello_of(first));
    sender.send(pb::ProcessorMessage { message: Some(hello) }).await.unwrap();
    let Ok(response) =
        ProcessorServiceClient::new(channel.clone()).connect(ReceiverStream::new(outbox)).await
    else {
        return; // A Hello the server refused, with a status.
    };
    let mut inbound = response.into_inner();
    let request = pb::RunRequest {
        agent_id: agent_id.into(),
        text: "hello there".into(),
        thread_id: "fuzz-thread".into(),
        resource_id: "fuzz".into(),
        ..Default::default()
    };
    let mut run =
        AgentServiceClient::new(channel).stream(request).await.expect("the run starts").into_inner();
    let mut answers = answers.iter();
    let mut session_open = true;
    loop {
        tokio::select! {
            chunk = run.message() => match chunk {
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            },
            message = inbound.message(), if session_open => {
                let call_id = match message {
                    Ok(Some(pb::ServerMessage { message: Some(server_message::Message::Call(call)) })) => call.call_id,
                    Ok(Some(pb::ServerMessage { message: Some(server_message::Message::ToolCall(call)) })) => call.call_id,
                    Ok(Some(_)) => continue,
                    Ok(None) | Err(_) => { session_open = false; continue }
                };
                match answers.next() {
                    Some(frame) => { let _ = sender.send(answer_of(frame, call_id)).await; }
                    // Out of answers: the instance goes away.
                    None => { session_open = false; }
                }
            }
        }
        if !session_open {
            drop(inbound);
            // The run goes on without the instance, to its end.
            while let Ok(Some(_)) = run.message().await {}
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let harness = harness();
    let Some((&selector, rest)) = data.split_first() else { return };
    let agent_id = if selector % 2 == 0 { "tools" } else { "rejected" };
    let frames = frames(rest);
    harness.runtime.block_on(async {
        if tokio::time::timeout(RUN_DEADLINE, session(harness.channel.clone(), frames, agent_id))
            .await
            .is_err()
        {
            eprintln!("a run did not end within {RUN_DEADLINE:?}");
            std::process::abort();
        }
        // Still serving.
        let agents =
            AgentServiceClient::new(harness.channel.clone()).list_agents(pb::ListAgentsRequest {}).await;
        assert!(agents.is_ok(), "the server stopped serving: {agents:?}");
    });
});
