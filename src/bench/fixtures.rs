//! What the scenarios run against: the bench's agents, a pass-through processor, pass-through
//! remote processor instances, the floors (the same bytes over bare tonic services, no agentwire
//! code).

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::server::pb::agent_service_server::{AgentService, AgentServiceServer};
use crate::server::pb::processor_service_client::ProcessorServiceClient;
use crate::server::pb::processor_service_server::{ProcessorService, ProcessorServiceServer};
use crate::server::{connect, pb};
use crate::storage::PgOptions;

/// The text deltas of a streamed scenario (S4, R2, G2).
pub const STREAM_CHUNKS: usize = 200;

/// The tokens of the fake provider's answer in G1 and G3: a short answer.
pub const GATEWAY_TOKENS: usize = 20;

/// G3's guards, as `[processors.*]` tables (`benches/guards.rs` runs them in process too).
pub const G3_PROCESSORS: &str = r#"
[processors.g-normalize]
kind = "unicode-normalizer"

[processors.g-pii]
kind = "pii-detector"

[processors.g-injection]
kind = "prompt-injection-detector"

[processors.g-pii-stream]
kind = "pii-detector"
"#;

/// G3's pipeline, as an agent's lines: three guards on the input, one on the stream.
pub const G3_PIPELINE: &str = r#"input_processors = ["g-normalize", "g-pii", "g-injection"]
output_processors = ["g-pii-stream"]"#;

/// The mock answer of most scenarios: about 50 tokens.
const ANSWER: &str = "Thanks for asking. Here is a short answer that stands in for what a real model would \
    write: a few sentences, some detail, and a friendly closing line, so that every run streams and \
    stores a realistic amount of text.";

/// The word a guardrail blocks in S5.
pub(super) const BLOCKED_WORD: &str = "forbidden";

/// The processor kind of the pass-through processors.
const PASS_THROUGH: &str = "pass-through";

/// The bench's agents, one per scenario; with the fake provider's base URL, the gateway
/// scenarios' agents too.
pub fn config(fake_provider: Option<&str>) -> String {
    config_on(fake_provider, None)
}

/// [`config`] for a server that keeps its memory in PostgreSQL, when `postgres` is given (the
/// URL in the environment variable `[storage.postgres] url_env` names by default).
pub(super) fn config_on(fake_provider: Option<&str>, postgres: Option<&PgOptions>) -> String {
    let mut config = agents();
    // The bench is one client on one connection (per replica), driving up to 512 runs at once:
    // no share of the slots per caller.
    config.push_str("\n[limits]\nmax_concurrent_runs_per_caller = 0\n");
    config.push_str(&storage(postgres));
    if let Some(base_url) = fake_provider {
        config.push_str(&gateway_agents(base_url));
    }
    config
}

/// The `[storage]` table. The bench fills resources past the default quotas (a million recalled
/// messages, a thread per run in S2b), so it lifts them.
fn storage(postgres: Option<&PgOptions>) -> String {
    let mut table =
        "\n[storage]\nmax_resource_threads = 0\nmax_resource_messages = 0\nmax_resource_mb = 0\n".to_owned();
    if let Some(postgres) = postgres {
        table.push_str(&format!(
            "backend = \"postgres\"\n\n[storage.postgres]\npool_size = {}\nstatement_timeout_ms = {}\nrecall_ef_search = {}\n",
            postgres.pool_size,
            postgres.statement_timeout.as_millis(),
            postgres.ef_search
        ));
        if let Some(ca_file) = &postgres.ca_file {
            let ca_file = toml::Value::String(ca_file.display().to_string());
            table.push_str(&format!("ca_file = {ca_file}\n"));
        }
    }
    table
}

/// The agents of the G scenarios, calling the fake provider at `base_url`.
fn gateway_agents(base_url: &str) -> String {
    let short = super::fake_provider::model(GATEWAY_TOKENS);
    let long = super::fake_provider::model(STREAM_CHUNKS);
    format!(
        r#"
[providers.fake]
api = "openai"
base_url = "{base_url}"

{G3_PROCESSORS}
[[agents]]
id = "g1"
model = "fake/{short}"

[[agents]]
id = "g1-streamed"
model = "fake/{short}"
output_processors = ["pass-stream"]

[[agents]]
id = "g2"
model = "fake/{long}"

[[agents]]
id = "g3"
model = "fake/{short}"
{G3_PIPELINE}
"#
    )
}

/// The agents of every scenario but the gateway's.
fn agents() -> String {
    let stream_text: Vec<String> = (0..STREAM_CHUNKS).map(|index| format!("w{index}")).collect();
    let stream_text = stream_text.join(" ");
    format!(
        r#"# The agents of `agentwire bench`. To bench a server elsewhere, start it with this config
# and run `agentwire bench --addr <host:port>`.

[processors.pass-input]
kind = "{PASS_THROUGH}"
hooks = ["processInput"]

[processors.pass-stream]
kind = "{PASS_THROUGH}"
hooks = ["processOutputStream"]

[processors.pass-result]
kind = "{PASS_THROUGH}"
hooks = ["processOutputResult"]

[processors.guard]
kind = "content-filter"
blocked_words = ["{BLOCKED_WORD}"]

[processors.remote-input]
kind = "remote"
timeout_ms = 5000

[processors.remote-window]
kind = "remote"
timeout_ms = 5000

[[agents]]
id = "s1"
model = "mock/script"
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "s2"
model = "mock/script"
memory = {{ last_messages = 10 }}
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "s3"
model = "mock/script"
input_processors = ["pass-input"]
output_processors = ["pass-stream", "pass-result"]
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "s4"
model = "mock/script"
script = [{{ text = "{stream_text}" }}]

[[agents]]
id = "s4-pass"
model = "mock/script"
output_processors = ["pass-stream"]
script = [{{ text = "{stream_text}" }}]

[[agents]]
id = "s5"
model = "mock/script"
memory = {{ last_messages = 10 }}
input_processors = ["guard"]
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "s6"
model = "mock/script"
memory = {{ last_messages = 10, semantic_recall = {{ top_k = 3, scope = "resource" }} }}
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "s6-control"
model = "mock/script"
memory = {{ last_messages = 10 }}
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "r1"
model = "mock/script"
input_processors = ["remote-input"]
script = [{{ text = "{ANSWER}" }}]

[[agents]]
id = "r2"
model = "mock/script"
output_processors = ["remote-window"]
script = [{{ text = "{stream_text}" }}]
"#
    )
}

/// Accepts connections with Nagle's algorithm off, as agentwire's server does.
fn incoming(listener: TcpListener) -> impl Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    TcpListenerStream::new(listener).map(|connection| {
        connection.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    })
}

/// Serves `router` on a free loopback port; returns the address.
async fn serve_floor(router: tonic::transport::server::Router) -> Result<String, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|error| error.to_string())?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    tokio::spawn(router.serve_with_incoming(incoming(listener)));
    Ok(address.to_string())
}

/// The S4 and G2 floor: `AgentService.Stream` answering every request with the same 200 text
/// deltas, built once — the bytes of S4 over bare tonic; and the S1 and G1 floors: `Generate`
/// answering with the response agentwire gave the same request (set by the bench before each).
struct FloorAgents {
    chunks: Arc<Vec<pb::Chunk>>,
    answer: FloorAnswer,
}

/// The unary floor's answer, shared with the bench that sets it.
pub(super) type FloorAnswer = Arc<std::sync::RwLock<pb::GenerateResponse>>;

type Chunks = Pin<Box<dyn Stream<Item = Result<pb::Chunk, Status>> + Send>>;

#[tonic::async_trait]
impl AgentService for FloorAgents {
    type StreamStream = Chunks;

    async fn stream(&self, _request: Request<pb::RunRequest>) -> Result<Response<Chunks>, Status> {
        let chunks = Arc::clone(&self.chunks);
        let stream = futures::stream::iter((0..chunks.len()).map(move |index| Ok(chunks[index].clone())));
        Ok(Response::new(Box::pin(stream)))
    }

    async fn generate(
        &self,
        _request: Request<pb::RunRequest>,
    ) -> Result<Response<pb::GenerateResponse>, Status> {
        let answer = self.answer.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Ok(Response::new(answer))
    }

    async fn list_agents(
        &self,
        _request: Request<pb::ListAgentsRequest>,
    ) -> Result<Response<pb::ListAgentsResponse>, Status> {
        Err(Status::unimplemented("the floor only streams"))
    }

    async fn get_agent(&self, _request: Request<pb::GetAgentRequest>) -> Result<Response<pb::Agent>, Status> {
        Err(Status::unimplemented("the floor only streams"))
    }
}

/// Starts the stream and unary floor; returns its address and the unary answer to set.
pub(super) async fn stream_floor() -> Result<(String, FloorAnswer), String> {
    let chunks = (0..STREAM_CHUNKS)
        .map(|index| pb::Chunk {
            run_id: "floor".into(),
            r#type: "text-delta".into(),
            payload: Some(pb::chunk::Payload::TextDelta(pb::DeltaPayload {
                id: "text-0".into(),
                text: format!(" w{index}"),
            })),
        })
        .collect();
    let answer = FloorAnswer::default();
    let service =
        AgentServiceServer::new(FloorAgents { chunks: Arc::new(chunks), answer: Arc::clone(&answer) });
    Ok((serve_floor(tonic::transport::Server::builder().add_service(service)).await?, answer))
}

/// The R1 floor: a bidirectional stream that answers each `Pong` with a `Ping` of its nonce.
struct PingPong;

type Echoes = Pin<Box<dyn Stream<Item = Result<pb::ServerMessage, Status>> + Send>>;

#[tonic::async_trait]
impl ProcessorService for PingPong {
    type ConnectStream = Echoes;

    async fn connect(
        &self,
        request: Request<Streaming<pb::ProcessorMessage>>,
    ) -> Result<Response<Echoes>, Status> {
        let echoes = request.into_inner().map(|message| {
            let nonce = match message?.message {
                Some(pb::processor_message::Message::Pong(pong)) => pong.nonce,
                _ => 0,
            };
            Ok(pb::ServerMessage { message: Some(pb::server_message::Message::Ping(pb::Ping { nonce })) })
        });
        Ok(Response::new(Box::pin(echoes)))
    }

    async fn list_processors(
        &self,
        _request: Request<pb::ListProcessorsRequest>,
    ) -> Result<Response<pb::ListProcessorsResponse>, Status> {
        Ok(Response::new(pb::ListProcessorsResponse::default()))
    }
}

/// Starts the R1 floor; returns its address.
pub(super) async fn ping_pong_floor() -> Result<String, String> {
    serve_floor(tonic::transport::Server::builder().add_service(ProcessorServiceServer::new(PingPong))).await
}

/// One side of the R1 floor: sends a message, waits for its echo.
pub(super) struct Pinger {
    outbox: mpsc::Sender<pb::ProcessorMessage>,
    echoes: Streaming<pb::ServerMessage>,
    nonce: u64,
}

impl Pinger {
    /// A ping-pong stream on the floor at `address`.
    pub(super) async fn connect(address: &str) -> Result<Pinger, String> {
        let (outbox, requests) = mpsc::channel(16);
        let echoes = ProcessorServiceClient::new(connect(address).await.map_err(|error| error.to_string())?)
            .connect(ReceiverStream::new(requests))
            .await
            .map_err(|status| status.to_string())?
            .into_inner();
        Ok(Pinger { outbox, echoes, nonce: 0 })
    }

    /// One round trip.
    pub(super) async fn round_trip(&mut self) -> Result<(), String> {
        self.nonce += 1;
        let pong = pb::Pong { nonce: self.nonce };
        let message = pb::ProcessorMessage { message: Some(pb::processor_message::Message::Pong(pong)) };
        self.outbox.send(message).await.map_err(|_| "the floor hung up".to_owned())?;
        match self.echoes.message().await {
            Ok(Some(_)) => Ok(()),
            _ => Err("the floor hung up".to_owned()),
        }
    }
}

/// Connects a remote processor instance `instance_id` of `processor_id` that lets everything
/// pass, answering each call inline; `window` asks for windows of that many chunks. Aborting the
/// task it gives back hangs the session up.
pub async fn pass_through_instance(
    address: &str,
    processor_id: &str,
    instance_id: &str,
    hook: pb::Hook,
    window: Option<u32>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let (outbox, requests) = mpsc::channel(1024);
    let hook_options = window
        .map(|max_chunks| pb::HookOptions {
            hook: hook as i32,
            mode: pb::HookMode::Blocking as i32,
            window: Some(pb::StreamWindow { max_chunks, max_delay_ms: 20 }),
            data_parts: false,
        })
        .into_iter()
        .collect();
    let hello = pb::Hello {
        processor_id: processor_id.into(),
        instance_id: instance_id.into(),
        min_protocol_version: 1,
        max_protocol_version: 1,
        hooks: vec![hook as i32],
        max_concurrency: 0,
        hook_options,
        tools: Vec::new(),
    };
    let hello = pb::ProcessorMessage { message: Some(pb::processor_message::Message::Hello(hello)) };
    outbox.send(hello).await.map_err(|_| "the instance stopped".to_owned())?;
    let mut calls = ProcessorServiceClient::new(connect(address).await.map_err(|error| error.to_string())?)
        .connect(ReceiverStream::new(requests))
        .await
        .map_err(|status| format!("connecting `{processor_id}`: {status}"))?
        .into_inner();
    match calls.message().await {
        Ok(Some(pb::ServerMessage { message: Some(pb::server_message::Message::Welcome(_)) })) => {}
        other => return Err(format!("`{processor_id}` was not welcomed: {other:?}")),
    }
    Ok(tokio::spawn(async move {
        while let Ok(Some(message)) = calls.message().await {
            let reply = match message.message {
                Some(pb::server_message::Message::Call(call)) => {
                    pb::processor_message::Message::Result(pb::HookResult {
                        call_id: call.call_id,
                        outcome: Some(pb::hook_result::Outcome::Continue(pb::Continue {})),
                        ..Default::default()
                    })
                }
                Some(pb::server_message::Message::Ping(ping)) => {
                    pb::processor_message::Message::Pong(pb::Pong { nonce: ping.nonce })
                }
                _ => continue,
            };
            if outbox.send(pb::ProcessorMessage { message: Some(reply) }).await.is_err() {
                return;
            }
        }
    }))
}
