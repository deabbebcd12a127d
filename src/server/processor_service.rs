//! `agentwire.v1.ProcessorService`: the sessions of remote processors. The first message must be
//! `Hello`; a session is refused, with a status saying why, for an unknown processor id, a
//! protocol version range this server does not speak, or no valid hook.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};

use super::auth::Auth;
use super::convert::id_fits;
use super::pb;
use super::remote_convert::hook_from_pb;
use super::status::status;
use super::value::from_struct;
use crate::domain::{Hook, HookSet, JsonSchema, StreamWindow, new_id};
use crate::remote::{
    Answer, HookResult, PROTOCOL_VERSIONS, RemotePool, Session, SessionEvent, SessionSpec, ToolOutput,
    ToolSpec,
};

/// Calls queued for one instance before callers wait.
const SESSION_BUFFER: usize = 1024;
/// The largest frame either side may send.
pub(super) const MAX_FRAME_BYTES: u32 = 4 * 1024 * 1024;

/// The processor service over the pool of sessions.
#[derive(Debug)]
pub(super) struct ProcessorServiceImpl {
    pool: Arc<RemotePool>,
    auth: Arc<Auth>,
    /// Sessions waiting to say `Hello` ([remote] max_pending_hellos).
    pending_hellos: Arc<Semaphore>,
}

impl ProcessorServiceImpl {
    pub(super) fn new(pool: Arc<RemotePool>, auth: Arc<Auth>) -> ProcessorServiceImpl {
        let pending_hellos = Arc::new(Semaphore::new(pool.timing().max_pending_hellos));
        ProcessorServiceImpl { pool, auth, pending_hellos }
    }

    /// The session's first message, which must be `Hello`: within `[remote] hello_timeout_ms`,
    /// and only while fewer than `max_pending_hellos` sessions are waiting to say theirs.
    async fn hello(&self, inbound: &mut Streaming<pb::ProcessorMessage>) -> Result<pb::Hello, Status> {
        let timing = self.pool.timing();
        let Ok(_waiting) = Arc::clone(&self.pending_hellos).try_acquire_owned() else {
            return Err(status(
                Code::ResourceExhausted,
                format!(
                    "{} sessions are already waiting to say hello ([remote] max_pending_hellos); try again",
                    timing.max_pending_hellos
                ),
            ));
        };
        let first = tokio::time::timeout(timing.hello_timeout, inbound.message()).await.map_err(|_| {
            status(
                Code::DeadlineExceeded,
                format!(
                    "no hello within [remote] hello_timeout_ms ({} ms) of connecting",
                    timing.hello_timeout.as_millis()
                ),
            )
        })??;
        match first {
            Some(pb::ProcessorMessage { message: Some(pb::processor_message::Message::Hello(hello)) }) => {
                Ok(hello)
            }
            _ => Err(Status::invalid_argument("the first message of a session must be `hello`")),
        }
    }
}

type ServerStream = Pin<Box<dyn Stream<Item = Result<pb::ServerMessage, Status>> + Send>>;

fn server_message(message: pb::server_message::Message) -> Result<pb::ServerMessage, Status> {
    Ok(pb::ServerMessage { message: Some(message) })
}

/// Checks a `Hello`; the status says what is wrong.
fn accept(hello: pb::Hello, protocol_version: u32, pool: &RemotePool) -> Result<SessionSpec, Status> {
    if hello.processor_id.is_empty() {
        return Err(Status::invalid_argument("hello.processor_id is required"));
    }
    for (field, id) in
        [("hello.processor_id", &hello.processor_id), ("hello.instance_id", &hello.instance_id)]
    {
        id_fits(field, id)?;
    }
    let (min, max) = PROTOCOL_VERSIONS;
    if hello.min_protocol_version > max || hello.max_protocol_version < min {
        return Err(status(
            Code::FailedPrecondition,
            format!(
                "unsupported protocol versions [{}:{}], this server speaks [{min}:{max}]",
                hello.min_protocol_version, hello.max_protocol_version
            ),
        ));
    }
    if !pool.is_expected(&hello.processor_id) {
        return Err(status(
            Code::NotFound,
            format!(
                "no agent uses remote processor `{}` (declare it with kind = \"remote\")",
                hello.processor_id
            ),
        ));
    }
    let mut hooks = Vec::new();
    for (index, hook) in hello.hooks.iter().enumerate() {
        match pb::Hook::try_from(*hook).ok().and_then(hook_from_pb) {
            Some(hook) => hooks.push(hook),
            None => {
                return Err(status(
                    Code::InvalidArgument,
                    format!("hello.hooks[{index}]: unknown hook {hook}"),
                ));
            }
        }
    }
    let tools = tools_of(&hello.tools)?;
    if hooks.is_empty() && tools.is_empty() {
        return Err(Status::invalid_argument("hello.hooks: name at least one hook (or serve hello.tools)"));
    }
    let hooks = HookSet::of(&hooks);
    let mut observed = Vec::new();
    let mut window = None;
    let mut data_parts = false;
    for (index, options) in hello.hook_options.iter().enumerate() {
        let field = format!("hello.hook_options[{index}]");
        let hook = pb::Hook::try_from(options.hook)
            .ok()
            .and_then(hook_from_pb)
            .filter(|hook| hooks.contains(*hook))
            .ok_or_else(|| {
                status(
                    Code::InvalidArgument,
                    format!("{field}.hook: {} is not one of hello.hooks", options.hook),
                )
            })?;
        match pb::HookMode::try_from(options.mode) {
            Ok(pb::HookMode::Unspecified | pb::HookMode::Blocking) => {}
            Ok(pb::HookMode::Observe) => observed.push(hook),
            Err(_) => {
                return Err(status(
                    Code::InvalidArgument,
                    format!("{field}.mode: unknown mode {}", options.mode),
                ));
            }
        }
        if let Some(asked) = &options.window {
            window = Some(window_of(hook, asked, &field)?);
        }
        if options.data_parts {
            if hook != Hook::ProcessOutputStream {
                return Err(status(
                    Code::InvalidArgument,
                    format!("{field}.data_parts: only processOutputStream takes data-* chunks, not {hook}"),
                ));
            }
            if protocol_version < 2 {
                return Err(status(
                    Code::InvalidArgument,
                    format!(
                        "{field}.data_parts needs protocol version 2 (this session agreed on {protocol_version})"
                    ),
                ));
            }
            data_parts = true;
        }
    }
    Ok(SessionSpec {
        processor_id: hello.processor_id,
        instance_id: if hello.instance_id.is_empty() { new_id() } else { hello.instance_id },
        hooks,
        observed: HookSet::of(&observed),
        window,
        data_parts,
        max_concurrency: usize::try_from(hello.max_concurrency).unwrap_or(usize::MAX),
        tools,
    })
}

/// A call as the session's protocol version has it: a version-1 session gets exactly the
/// version-1 frame.
fn hook_call_for(call: crate::remote::HookCall, protocol_version: u32) -> pb::HookCall {
    let mut call = pb::HookCall::from(call);
    if protocol_version < 2 {
        call.message_sources.clear();
        call.tagged_system_messages.clear();
        call.steps.clear();
        call.step_input = None;
    }
    call
}

/// The tools a Hello offers, checked: each named once, with a valid argument schema.
fn tools_of(specs: &[pb::ToolSpec]) -> Result<Vec<ToolSpec>, Status> {
    let mut tools: Vec<ToolSpec> = Vec::with_capacity(specs.len());
    for (index, spec) in specs.iter().enumerate() {
        let field = format!("hello.tools[{index}]");
        if spec.name.is_empty() {
            return Err(status(Code::InvalidArgument, format!("{field}.name is required")));
        }
        if tools.iter().any(|tool| tool.name == spec.name) {
            return Err(status(
                Code::InvalidArgument,
                format!("{field}.name: `{}` is offered twice", spec.name),
            ));
        }
        let schema = spec.parameters.clone().map_or_else(
            || serde_json::json!({ "type": "object" }),
            |fields| serde_json::Value::Object(from_struct(fields)),
        );
        let parameters = JsonSchema::new(schema)
            .map_err(|reason| status(Code::InvalidArgument, format!("{field}.parameters: {reason}")))?;
        tools.push(ToolSpec { name: spec.name.clone(), description: spec.description.clone(), parameters });
    }
    Ok(tools)
}

/// The window a Hello asks for, checked.
fn window_of(hook: Hook, asked: &pb::StreamWindow, field: &str) -> Result<StreamWindow, Status> {
    if hook != Hook::ProcessOutputStream {
        return Err(status(
            Code::InvalidArgument,
            format!("{field}.window: only processOutputStream takes windows, not {hook}"),
        ));
    }
    let max_chunks = usize::try_from(asked.max_chunks).unwrap_or(usize::MAX);
    if !(1..=StreamWindow::MAX_CHUNKS).contains(&max_chunks) {
        return Err(status(
            Code::InvalidArgument,
            format!(
                "{field}.window.max_chunks: {} is not in 1..={}",
                asked.max_chunks,
                StreamWindow::MAX_CHUNKS
            ),
        ));
    }
    let max_delay = (asked.max_delay_ms > 0).then(|| Duration::from_millis(u64::from(asked.max_delay_ms)));
    Ok(StreamWindow::new(max_chunks, max_delay))
}

#[tonic::async_trait]
impl pb::processor_service_server::ProcessorService for ProcessorServiceImpl {
    type ConnectStream = ServerStream;

    async fn list_processors(
        &self,
        request: Request<pb::ListProcessorsRequest>,
    ) -> Result<Response<pb::ListProcessorsResponse>, Status> {
        self.auth.access(&request)?.admin()?;
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
        self.pool.authenticate(token.as_deref())?;
        let mut inbound = request.into_inner();
        let hello = self.hello(&mut inbound).await?;
        self.pool.authorize(token.as_deref(), &hello.processor_id)?;
        if self.pool.is_draining() {
            return Err(Status::unavailable("the server is shutting down; reconnect later"));
        }
        // The highest version both sides speak.
        let protocol_version = hello.max_protocol_version.min(PROTOCOL_VERSIONS.1);
        let spec = accept(hello, protocol_version, &self.pool)?;
        let (outbox, events) = mpsc::channel(SESSION_BUFFER);
        let session = Arc::new(Session::new(spec, outbox));
        self.pool.register(Arc::clone(&session));
        tracing::info!(processor = %session.processor_id, instance = %session.instance_id, "remote processor connected");
        tokio::spawn(read_answers(inbound, Arc::clone(&self.pool), Arc::clone(&session)));
        tokio::spawn(keep_alive(Arc::clone(&self.pool), Arc::clone(&session)));

        let welcome =
            pb::Welcome { protocol_version, session_id: new_id(), max_frame_bytes: MAX_FRAME_BYTES };
        let calls = ReceiverStream::new(events).map(move |event| {
            use pb::server_message::Message;
            server_message(match event {
                SessionEvent::Call(call) => Message::Call(hook_call_for(*call, protocol_version)),
                SessionEvent::Tool(request) => Message::ToolCall((*request).into()),
                SessionEvent::Cancel(call_id) => Message::Cancel(pb::Cancel { call_id }),
                SessionEvent::Ping(nonce) => Message::Ping(pb::Ping { nonce }),
                SessionEvent::Drain(deadline_unix_ms) => Message::Drain(pb::Drain { deadline_unix_ms }),
            })
        });
        let stream =
            tokio_stream::once(server_message(pb::server_message::Message::Welcome(welcome))).chain(calls);
        // The stream ends with the session: when it is dropped as hung, or drained — or with
        // INVALID_ARGUMENT when the instance sent what the server could not decode.
        let broken = Arc::clone(&session);
        let broken_status = futures::stream::iter([()]).filter_map(move |()| {
            broken.broken().map(|reason| {
                Err(status(Code::InvalidArgument, format!("the session ended: you sent {reason}")))
            })
        });
        let stream = futures::StreamExt::take_until(stream, session.ended()).chain(broken_status);
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Hands each answer of an instance to its caller, until the instance goes away.
async fn read_answers(
    mut inbound: Streaming<pb::ProcessorMessage>,
    pool: Arc<RemotePool>,
    session: Arc<Session>,
) {
    loop {
        let message = tokio::select! {
            message = inbound.message() => message,
            () = session.ended() => break,
        };
        let message = match message {
            Ok(Some(message)) => message,
            Ok(None) => break,
            // A frame that does not decode (or is over the frame limit) breaks the protocol: the
            // session ends saying so, and its calls in flight fail naming it.
            Err(status) if matches!(status.code(), Code::Internal | Code::OutOfRange) => {
                let reason = format!("a message the server could not decode ({})", status.message());
                tracing::warn!(processor = %session.processor_id, instance = %session.instance_id, %reason, "remote processor broke the protocol");
                session.break_off(reason);
                break;
            }
            Err(_) => break,
        };
        match message.message {
            Some(pb::processor_message::Message::Result(result)) => {
                let call_id = result.call_id;
                if !session.resolve(call_id, Answer::Hook(HookResult::from(result))) {
                    tracing::debug!(call_id, "result for an unknown or abandoned call");
                }
            }
            Some(pb::processor_message::Message::ToolResult(output)) => {
                let call_id = output.call_id;
                if !session.resolve(call_id, Answer::Tool(ToolOutput::from(output))) {
                    tracing::debug!(call_id, "tool result for an unknown or abandoned call");
                }
            }
            Some(pb::processor_message::Message::Pong(pong)) => session.pong(pong.nonce),
            Some(pb::processor_message::Message::Hello(_)) | None => {}
        }
    }
    pool.unregister(&session);
    tracing::info!(processor = %session.processor_id, instance = %session.instance_id, "remote processor disconnected");
}

/// Pings the instance every interval; one that has not answered the previous ping is hung, and
/// is dropped so its calls fail over.
async fn keep_alive(pool: Arc<RemotePool>, session: Arc<Session>) {
    let interval = pool.timing().ping_interval;
    let mut nonce = 0u64;
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = session.ended() => return,
        }
        nonce += 1;
        if !session.ping(nonce) {
            tracing::warn!(processor = %session.processor_id, instance = %session.instance_id, "remote processor did not answer a ping; dropping it");
            pool.unregister(&session);
            return;
        }
    }
}
