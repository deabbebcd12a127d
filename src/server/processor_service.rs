//! `agentwire.v1.ProcessorService`: the sessions of remote processors. The first message must be
//! `Hello`; a session is refused, with a status saying why, for an unknown processor id, a
//! protocol version range this server does not speak, or no valid hook.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::pb;
use super::remote_convert::hook_from_pb;
use crate::processor::HookSet;
use crate::processor::remote::{
    AuthError, PROTOCOL_VERSIONS, RemotePool, RemoteReply, Session, SessionEvent,
};
use crate::runtime::new_id;

/// Calls queued for one instance before callers wait.
const SESSION_BUFFER: usize = 1024;
/// The largest frame either side may send.
pub(super) const MAX_FRAME_BYTES: u32 = 4 * 1024 * 1024;

/// The processor service over the pool of sessions.
#[derive(Debug)]
pub(super) struct ProcessorServiceImpl {
    pool: Arc<RemotePool>,
}

impl ProcessorServiceImpl {
    pub(super) fn new(pool: Arc<RemotePool>) -> ProcessorServiceImpl {
        ProcessorServiceImpl { pool }
    }
}

type ServerStream = Pin<Box<dyn Stream<Item = Result<pb::ServerMessage, Status>> + Send>>;

fn server_message(message: pb::server_message::Message) -> Result<pb::ServerMessage, Status> {
    Ok(pb::ServerMessage { message: Some(message) })
}

/// Checks a `Hello`; the status says what is wrong.
fn accept(hello: &pb::Hello, pool: &RemotePool) -> Result<HookSet, Status> {
    if hello.processor_id.is_empty() {
        return Err(Status::invalid_argument("hello.processor_id is required"));
    }
    let (min, max) = PROTOCOL_VERSIONS;
    if hello.min_protocol_version > max || hello.max_protocol_version < min {
        return Err(Status::failed_precondition(format!(
            "unsupported protocol versions [{}:{}], this server speaks [{min}:{max}]",
            hello.min_protocol_version, hello.max_protocol_version
        )));
    }
    if !pool.is_expected(&hello.processor_id) {
        return Err(Status::not_found(format!(
            "no agent uses remote processor `{}` (declare it with kind = \"remote\")",
            hello.processor_id
        )));
    }
    let mut hooks = Vec::new();
    for (index, hook) in hello.hooks.iter().enumerate() {
        match pb::Hook::try_from(*hook).ok().and_then(hook_from_pb) {
            Some(hook) => hooks.push(hook),
            None => {
                return Err(Status::invalid_argument(format!("hello.hooks[{index}]: unknown hook {hook}")));
            }
        }
    }
    if hooks.is_empty() {
        return Err(Status::invalid_argument("hello.hooks: name at least one hook"));
    }
    Ok(HookSet::of(&hooks))
}

#[tonic::async_trait]
impl pb::processor_service_server::ProcessorService for ProcessorServiceImpl {
    type ConnectStream = ServerStream;

    async fn list_processors(
        &self,
        _request: Request<pb::ListProcessorsRequest>,
    ) -> Result<Response<pb::ListProcessorsResponse>, Status> {
        let instances = self
            .pool
            .all_sessions()
            .iter()
            .map(|session| {
                let stats = session.stats();
                pb::ProcessorInstance {
                    processor_id: session.processor_id.clone(),
                    instance_id: session.instance_id.clone(),
                    hooks: session.hooks.iter().map(|hook| pb::Hook::from(hook) as i32).collect(),
                    in_flight: u32::try_from(stats.in_flight).unwrap_or(u32::MAX),
                    calls: stats.answered,
                    errors: stats.errors,
                    mean_latency_ms: stats.mean_latency_ms,
                    connected_at: session.connected_at,
                    dropped: stats.dropped,
                }
            })
            .collect();
        Ok(Response::new(pb::ListProcessorsResponse { instances }))
    }

    async fn connect(
        &self,
        request: Request<Streaming<pb::ProcessorMessage>>,
    ) -> Result<Response<ServerStream>, Status> {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(|value| value.strip_prefix("Bearer ").unwrap_or(value).to_owned());
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
            Some(pb::ProcessorMessage { message: Some(pb::processor_message::Message::Hello(hello)) }) => {
                hello
            }
            _ => return Err(Status::invalid_argument("the first message of a session must be `hello`")),
        };
        self.pool.authorize(token.as_deref(), &hello.processor_id).map_err(|error| match error {
            AuthError::MissingToken | AuthError::InvalidToken => Status::unauthenticated(error.to_string()),
            AuthError::NotAllowed(_) => Status::permission_denied(error.to_string()),
        })?;
        let hooks = accept(&hello, &self.pool)?;
        // The highest version both sides speak.
        let protocol_version = hello.max_protocol_version.min(PROTOCOL_VERSIONS.1);
        let (outbox, events) = mpsc::channel(SESSION_BUFFER);
        let instance_id = if hello.instance_id.is_empty() { new_id() } else { hello.instance_id };
        let session = Arc::new(Session::new(hello.processor_id, instance_id, hooks, outbox));
        self.pool.register(Arc::clone(&session));
        tracing::info!(processor = %session.processor_id, instance = %session.instance_id, "remote processor connected");

        let pool = Arc::clone(&self.pool);
        let reader_session = Arc::clone(&session);
        tokio::spawn(async move {
            while let Ok(Some(message)) = inbound.message().await {
                if let Some(pb::processor_message::Message::Result(result)) = message.message {
                    let call_id = result.call_id;
                    if !reader_session.resolve(call_id, RemoteReply::from(result)) {
                        tracing::debug!(call_id, "result for an unknown or abandoned call");
                    }
                }
            }
            pool.unregister(&reader_session);
            tracing::info!(processor = %reader_session.processor_id, instance = %reader_session.instance_id, "remote processor disconnected");
        });

        let welcome =
            pb::Welcome { protocol_version, session_id: new_id(), max_frame_bytes: MAX_FRAME_BYTES };
        let calls = ReceiverStream::new(events).map(|event| match event {
            SessionEvent::Call(call) => server_message(pb::server_message::Message::Call((*call).into())),
            SessionEvent::Cancel(call_id) => {
                server_message(pb::server_message::Message::Cancel(pb::Cancel { call_id }))
            }
        });
        let stream =
            tokio_stream::once(server_message(pb::server_message::Message::Welcome(welcome))).chain(calls);
        Ok(Response::new(Box::pin(stream)))
    }
}
