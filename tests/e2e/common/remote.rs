//! An in-test remote processor: connects over `ProcessorService.Connect`, says Hello, and
//! answers every call with a function of it.

use std::sync::Arc;
use std::time::Duration;

use agentwire::server::pb;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// The nine hooks, in the contract's order.
pub const ALL_HOOKS: [pb::Hook; 9] = [
    pb::Hook::ProcessInput,
    pb::Hook::ProcessInputStep,
    pb::Hook::ProcessLlmRequest,
    pb::Hook::ProcessApiError,
    pb::Hook::ProcessOutputStream,
    pb::Hook::ProcessLlmResponse,
    pb::Hook::ProcessOutputStep,
    pb::Hook::ProcessToolResult,
    pb::Hook::ProcessOutputResult,
];

/// How a test processor answers: `None` leaves the call unanswered (to test timeouts).
pub type Answer = Arc<dyn Fn(&pb::HookCall) -> Option<pb::HookResult> + Send + Sync>;

/// How long a test instance waits before answering a call.
pub type DelayOf = Arc<dyn Fn(&pb::HookCall) -> Duration + Send + Sync>;

/// How a test instance executes tools: `None` leaves the call unanswered.
pub type ToolAnswer = Arc<dyn Fn(&pb::ToolInvocation) -> Option<pb::ToolOutput> + Send + Sync>;

pub fn hello(processor_id: &str, hooks: &[pb::Hook]) -> pb::ProcessorMessage {
    hello_message(hello_of(processor_id, hooks))
}

/// A Hello for `hooks`, one by one, blocking, with no concurrency limit, speaking protocol
/// versions 1 and 2.
pub fn hello_of(processor_id: &str, hooks: &[pb::Hook]) -> pb::Hello {
    pb::Hello {
        processor_id: processor_id.into(),
        instance_id: format!("{processor_id}-test"),
        min_protocol_version: 1,
        max_protocol_version: 2,
        hooks: hooks.iter().map(|hook| *hook as i32).collect(),
        max_concurrency: 0,
        hook_options: Vec::new(),
        tools: Vec::new(),
    }
}

pub fn hello_message(hello: pb::Hello) -> pb::ProcessorMessage {
    pb::ProcessorMessage { message: Some(pb::processor_message::Message::Hello(hello)) }
}

/// A Hello asking for processOutputStream in windows.
pub fn windowed_hello(processor_id: &str, max_chunks: u32, max_delay_ms: u32) -> pb::Hello {
    let mut hello = hello_of(processor_id, &[pb::Hook::ProcessOutputStream]);
    hello.hook_options.push(pb::HookOptions {
        hook: pb::Hook::ProcessOutputStream as i32,
        mode: pb::HookMode::Blocking as i32,
        window: Some(pb::StreamWindow { max_chunks, max_delay_ms }),
        data_parts: false,
    });
    hello
}

/// Opens a session with `first` as the first message; returns the server's stream (or status)
/// and the sender for more messages.
pub async fn open(
    channel: Channel,
    first: pb::ProcessorMessage,
) -> (Result<tonic::Streaming<pb::ServerMessage>, tonic::Status>, mpsc::Sender<pb::ProcessorMessage>) {
    open_with_token(channel, first, None).await
}

/// [`open`], presenting `token` as `authorization: Bearer <token>`.
pub async fn open_with_token(
    channel: Channel,
    first: pb::ProcessorMessage,
    token: Option<&str>,
) -> (Result<tonic::Streaming<pb::ServerMessage>, tonic::Status>, mpsc::Sender<pb::ProcessorMessage>) {
    let (sender, receiver) = mpsc::channel(64);
    sender.send(first).await.unwrap();
    let mut request = tonic::Request::new(ReceiverStream::new(receiver));
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let mut client = ProcessorServiceClient::new(channel);
    let response = client.connect(request).await.map(tonic::Response::into_inner);
    (response, sender)
}

/// A connected test processor; the session ends when it is killed or dropped.
pub struct Instance {
    task: tokio::task::JoinHandle<()>,
    events: Arc<std::sync::Mutex<Vec<String>>>,
    most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

impl Instance {
    /// The call ids the server cancelled.
    pub fn cancelled(&self) -> Vec<u64> {
        self.events().iter().filter_map(|event| event.strip_prefix("cancel ")?.parse().ok()).collect()
    }

    /// What the server sent, in order: `call <hook>`, `cancel <id>`, `ping`, `drain`, and `end`
    /// when the server closed the stream.
    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    /// The most calls it held unanswered at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Ends the session abruptly, as a crashing process would.
    pub fn kill(self) {
        self.task.abort();
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a test instance behaves beyond its answers.
#[derive(Clone)]
pub struct Behaviour {
    /// Answers this long after the call arrives (each call on its own task).
    pub delay: Duration,
    /// When set, answers each call as long after it arrived as this says (on its own task).
    pub delay_of: Option<DelayOf>,
    /// Answers pings.
    pub pong: bool,
    /// Executes tool calls.
    pub tools: Option<ToolAnswer>,
}

impl Default for Behaviour {
    fn default() -> Behaviour {
        Behaviour { delay: Duration::ZERO, delay_of: None, pong: true, tools: None }
    }
}

/// Connects a processor answering with `answer`; returns once the server welcomed it.
pub async fn serve(channel: Channel, processor_id: &str, hooks: &[pb::Hook], answer: Answer) -> Instance {
    serve_hello(channel, hello_of(processor_id, hooks), answer).await
}

/// [`serve`] with a Hello of the test's making.
pub async fn serve_hello(channel: Channel, hello: pb::Hello, answer: Answer) -> Instance {
    serve_with(channel, hello, answer, Behaviour::default()).await
}

/// [`serve_hello`] with a [`Behaviour`].
pub async fn serve_with(
    channel: Channel,
    hello: pb::Hello,
    answer: Answer,
    behaviour: Behaviour,
) -> Instance {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (stream, sender) = open(channel, hello_message(hello)).await;
    let mut stream = stream.expect("the session is accepted");
    let welcome = stream.message().await.unwrap().expect("a welcome");
    assert!(matches!(welcome.message, Some(pb::server_message::Message::Welcome(_))));
    let events: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&events);
    let most_in_flight: Arc<AtomicUsize> = Arc::default();
    let most = Arc::clone(&most_in_flight);
    let in_flight: Arc<AtomicUsize> = Arc::default();
    let task = tokio::spawn(async move {
        let replies = sender;
        while let Ok(Some(message)) = stream.message().await {
            use pb::server_message::Message;
            match message.message {
                Some(Message::Cancel(cancel)) => {
                    log.lock().unwrap().push(format!("cancel {}", cancel.call_id))
                }
                Some(Message::Drain(_)) => log.lock().unwrap().push("drain".into()),
                Some(Message::Ping(ping)) => {
                    log.lock().unwrap().push("ping".into());
                    if behaviour.pong {
                        let pong = pb::Pong { nonce: ping.nonce };
                        let message = pb::ProcessorMessage {
                            message: Some(pb::processor_message::Message::Pong(pong)),
                        };
                        let _ = replies.send(message).await;
                    }
                }
                Some(Message::ToolCall(call)) => {
                    log.lock().unwrap().push(format!("tool {} {}", call.tool_name, call.tool_call_id));
                    if let Some(mut output) = behaviour.tools.as_ref().and_then(|tools| tools(&call)) {
                        output.call_id = call.call_id;
                        let message = pb::ProcessorMessage {
                            message: Some(pb::processor_message::Message::ToolResult(output)),
                        };
                        let _ = replies.send(message).await;
                    }
                }
                Some(Message::Call(call)) => {
                    log.lock().unwrap().push(format!("call {}", call.hook().as_str_name()));
                    let held = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(held, Ordering::SeqCst);
                    let answer = Arc::clone(&answer);
                    let replies = replies.clone();
                    let in_flight = Arc::clone(&in_flight);
                    let delay =
                        behaviour.delay_of.as_ref().map_or(behaviour.delay, |delay_of| delay_of(&call));
                    let reply = async move {
                        tokio::time::sleep(delay).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        if let Some(mut result) = answer(&call) {
                            result.call_id = call.call_id;
                            let message = pb::ProcessorMessage {
                                message: Some(pb::processor_message::Message::Result(result)),
                            };
                            let _ = replies.send(message).await;
                        }
                    };
                    if delay.is_zero() {
                        reply.await;
                    } else {
                        tokio::spawn(reply);
                    }
                }
                _ => {}
            }
        }
        log.lock().unwrap().push("end".into());
    });
    Instance { task, events, most_in_flight }
}

/// An answer that replaces what `replacement` sets.
pub fn replace(replacement: pb::Replacement) -> Option<pb::HookResult> {
    outcome(pb::hook_result::Outcome::Replace(replacement))
}

pub fn outcome(outcome: pb::hook_result::Outcome) -> Option<pb::HookResult> {
    Some(pb::HookResult { outcome: Some(outcome), ..Default::default() })
}

pub fn cont() -> Option<pb::HookResult> {
    outcome(pb::hook_result::Outcome::Continue(pb::Continue {}))
}

pub fn abort(reason: &str) -> Option<pb::HookResult> {
    outcome(pb::hook_result::Outcome::Abort(pb::Abort {
        reason: reason.into(),
        retry: false,
        metadata: None,
    }))
}

/// The text of a call's messages.
pub fn call_text(call: &pb::HookCall) -> String {
    call.messages
        .iter()
        .flat_map(|message| &message.parts)
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Text(text)) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}
