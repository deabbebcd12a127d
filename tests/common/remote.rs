//! An in-test remote processor: connects over `ProcessorService.Connect`, says Hello, and
//! answers every call with a function of it.

use std::sync::Arc;

use agentwire::server::pb;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// How a test processor answers: `None` leaves the call unanswered (to test timeouts).
pub type Answer = Arc<dyn Fn(&pb::HookCall) -> Option<pb::HookResult> + Send + Sync>;

pub fn hello(processor_id: &str, hooks: &[pb::Hook]) -> pb::ProcessorMessage {
    pb::ProcessorMessage {
        message: Some(pb::processor_message::Message::Hello(pb::Hello {
            processor_id: processor_id.into(),
            instance_id: format!("{processor_id}-test"),
            min_protocol_version: 1,
            max_protocol_version: 1,
            hooks: hooks.iter().map(|hook| *hook as i32).collect(),
            max_concurrency: 0,
        })),
    }
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
    cancelled: Arc<std::sync::Mutex<Vec<u64>>>,
}

impl Instance {
    /// The call ids the server cancelled.
    pub fn cancelled(&self) -> Vec<u64> {
        self.cancelled.lock().unwrap().clone()
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

/// Connects a processor answering with `answer`; returns once the server welcomed it.
pub async fn serve(channel: Channel, processor_id: &str, hooks: &[pb::Hook], answer: Answer) -> Instance {
    let (stream, sender) = open(channel, hello(processor_id, hooks)).await;
    let mut stream = stream.expect("the session is accepted");
    let welcome = stream.message().await.unwrap().expect("a welcome");
    assert!(matches!(welcome.message, Some(pb::server_message::Message::Welcome(_))));
    let cancelled: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
    let cancels = Arc::clone(&cancelled);
    let task = tokio::spawn(async move {
        let replies = sender;
        while let Ok(Some(message)) = stream.message().await {
            if let Some(pb::server_message::Message::Cancel(cancel)) = &message.message {
                cancels.lock().unwrap().push(cancel.call_id);
            }
            if let Some(pb::server_message::Message::Call(call)) = message.message
                && let Some(mut result) = answer(&call)
            {
                result.call_id = call.call_id;
                let message =
                    pb::ProcessorMessage { message: Some(pb::processor_message::Message::Result(result)) };
                if replies.send(message).await.is_err() {
                    return;
                }
            }
        }
    });
    Instance { task, cancelled }
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
