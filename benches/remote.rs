//! Remote processor benchmarks, through the real gRPC server in this process:
//!
//! - **R1**: what a blocking remote `processInput` adds to a `Generate`, next to the floor — a bare
//!   tonic bidirectional ping-pong (tiny messages, no agentwire code) on the same machine.
//! - **R2**: what a remote `processOutputStream` guard adds per chunk to a `Stream` of 200 text
//!   deltas, taking chunks in windows of 32 and, for contrast, one by one.
//!
//! `cargo bench --bench remote` (add `-- --quick` for a smoke run; `cargo test` runs the smoke
//! run). Samples of all variants are taken interleaved, so they share the machine's noise.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::config::Config;
use agentwire::runtime::{Components, Runtime};
use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::processor_service_client::ProcessorServiceClient;
use agentwire::server::pb::processor_service_server::{ProcessorService, ProcessorServiceServer};
use agentwire::{ServeOptions, serve};
use futures::{Stream, StreamExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

const STREAM_CHUNKS: usize = 200;

fn config() -> String {
    let words: Vec<String> = (0..STREAM_CHUNKS).map(|index| format!("w{index}")).collect();
    let text = words.join(" ");
    format!(
        r#"
[processors.input-guard]
kind = "remote"
timeout_ms = 5000

[processors.window-guard]
kind = "remote"
timeout_ms = 5000

[processors.chunk-guard]
kind = "remote"
timeout_ms = 5000

[[agents]]
id = "plain"
model = "mock/echo"

[[agents]]
id = "remote-input"
model = "mock/echo"
input_processors = ["input-guard"]

[[agents]]
id = "stream"
model = "mock/script"
script = [{{ text = "{text}" }}]

[[agents]]
id = "stream-windowed"
model = "mock/script"
output_processors = ["window-guard"]
script = [{{ text = "{text}" }}]

[[agents]]
id = "stream-per-chunk"
model = "mock/script"
output_processors = ["chunk-guard"]
script = [{{ text = "{text}" }}]
"#
    )
}

fn percentile(samples: &mut [Duration], quantile: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * quantile).round() as usize]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// Accepts connections with Nagle's algorithm off, as agentwire's own server does.
fn incoming(listener: TcpListener) -> impl Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    TcpListenerStream::new(listener).map(|connection| {
        connection.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    })
}

async fn channel(address: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}")).unwrap().tcp_nodelay(true).connect().await.unwrap()
}

/// The floor: a bidirectional stream that answers each `Pong` with a `Ping` of the same nonce.
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

/// One side of the floor's ping-pong: send a message, wait for its echo.
struct Pinger {
    outbox: mpsc::Sender<pb::ProcessorMessage>,
    echoes: Streaming<pb::ServerMessage>,
    nonce: u64,
}

impl Pinger {
    async fn start() -> Pinger {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ProcessorServiceServer::new(PingPong))
                .serve_with_incoming(incoming(listener)),
        );
        let (outbox, requests) = mpsc::channel(16);
        let echoes = ProcessorServiceClient::new(channel(address).await)
            .connect(ReceiverStream::new(requests))
            .await
            .unwrap()
            .into_inner();
        Pinger { outbox, echoes, nonce: 0 }
    }

    async fn round_trip(&mut self) -> Duration {
        self.nonce += 1;
        let start = Instant::now();
        let pong = pb::Pong { nonce: self.nonce };
        let message = pb::ProcessorMessage { message: Some(pb::processor_message::Message::Pong(pong)) };
        self.outbox.send(message).await.unwrap();
        self.echoes.message().await.unwrap().expect("an echo");
        start.elapsed()
    }
}

/// A remote processor instance that lets everything pass, answering inline.
async fn connect_instance(channel: Channel, processor_id: &str, hook: pb::Hook, window: Option<u32>) {
    let (outbox, requests) = mpsc::channel(1024);
    let hook_options = window
        .map(|max_chunks| pb::HookOptions {
            hook: hook as i32,
            mode: pb::HookMode::Blocking as i32,
            window: Some(pb::StreamWindow { max_chunks, max_delay_ms: 20 }),
        })
        .into_iter()
        .collect();
    let hello = pb::Hello {
        processor_id: processor_id.into(),
        instance_id: format!("{processor_id}-bench"),
        min_protocol_version: 1,
        max_protocol_version: 1,
        hooks: vec![hook as i32],
        max_concurrency: 0,
        hook_options,
        tools: Vec::new(),
    };
    outbox
        .send(pb::ProcessorMessage { message: Some(pb::processor_message::Message::Hello(hello)) })
        .await
        .unwrap();
    let mut calls = ProcessorServiceClient::new(channel)
        .connect(ReceiverStream::new(requests))
        .await
        .unwrap()
        .into_inner();
    let welcome = calls.message().await.unwrap();
    assert!(matches!(
        welcome.and_then(|message| message.message),
        Some(pb::server_message::Message::Welcome(_))
    ));
    tokio::spawn(async move {
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
    });
}

async fn generate(client: &mut AgentServiceClient<Channel>, agent_id: &str) -> Duration {
    let request = pb::RunRequest { agent_id: agent_id.into(), text: "hello".into(), ..Default::default() };
    let start = Instant::now();
    let result = client.generate(request).await.unwrap().into_inner();
    assert_eq!(result.finish_reason, "stop", "{result:?}");
    start.elapsed()
}

async fn stream(client: &mut AgentServiceClient<Channel>, agent_id: &str) -> Duration {
    let request = pb::RunRequest { agent_id: agent_id.into(), text: "go".into(), ..Default::default() };
    let start = Instant::now();
    let mut chunks = client.stream(request).await.unwrap().into_inner();
    let mut deltas = 0;
    while let Some(chunk) = chunks.message().await.unwrap() {
        deltas += usize::from(chunk.r#type == "text-delta");
    }
    assert_eq!(deltas, STREAM_CHUNKS);
    start.elapsed()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` (CI) does not: it gets the quick
    // smoke run, which checks that every scenario still works.
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|arg| arg == "--quick") || !args.iter().any(|arg| arg == "--bench");
    let (r1_iterations, r2_iterations, warm_up) = if quick { (20, 4, 2) } else { (3000, 400, 200) };

    let config = Config::parse(&config()).unwrap();
    let runtime = Runtime::new(&config, Components::builtin()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, Arc::new(runtime), ServeOptions::default(), std::future::pending()));
    connect_instance(channel(address).await, "input-guard", pb::Hook::ProcessInput, None).await;
    connect_instance(channel(address).await, "window-guard", pb::Hook::ProcessOutputStream, Some(32)).await;
    connect_instance(channel(address).await, "chunk-guard", pb::Hook::ProcessOutputStream, None).await;
    let mut client = AgentServiceClient::new(channel(address).await);
    let mut pinger = Pinger::start().await;

    // R1: interleaved, so the three share the machine's state.
    let (mut floor, mut plain, mut remote) = (Vec::new(), Vec::new(), Vec::new());
    for iteration in 0..warm_up + r1_iterations {
        let samples = (
            pinger.round_trip().await,
            generate(&mut client, "plain").await,
            generate(&mut client, "remote-input").await,
        );
        if iteration >= warm_up {
            floor.push(samples.0);
            plain.push(samples.1);
            remote.push(samples.2);
        }
    }
    let (floor_p50, plain_p50, remote_p50) =
        (percentile(&mut floor, 0.5), percentile(&mut plain, 0.5), percentile(&mut remote, 0.5));
    let added = remote_p50.saturating_sub(plain_p50);
    println!("R1 — blocking remote processInput ({r1_iterations} runs each, interleaved)");
    println!("| measure | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| floor: bare tonic bidi ping-pong round trip | {:.1} µs | {:.1} µs |",
        micros(floor_p50),
        micros(percentile(&mut floor, 0.99))
    );
    println!(
        "| Generate, no processors | {:.1} µs | {:.1} µs |",
        micros(plain_p50),
        micros(percentile(&mut plain, 0.99))
    );
    println!(
        "| Generate, remote processInput | {:.1} µs | {:.1} µs |",
        micros(remote_p50),
        micros(percentile(&mut remote, 0.99))
    );
    println!("| added by the remote hook (p50 difference) | {:.1} µs | |", micros(added));
    println!("| added ÷ floor | {:.2}× | |", added.as_secs_f64() / floor_p50.as_secs_f64());

    // R2: a stream of 200 text deltas, bare, with a windowed remote guard, with a one-by-one guard.
    let (mut bare, mut windowed, mut per_chunk) = (Vec::new(), Vec::new(), Vec::new());
    for iteration in 0..warm_up / 10 + r2_iterations {
        let samples = (
            stream(&mut client, "stream").await,
            stream(&mut client, "stream-windowed").await,
            stream(&mut client, "stream-per-chunk").await,
        );
        if iteration >= warm_up / 10 {
            bare.push(samples.0);
            windowed.push(samples.1);
            per_chunk.push(samples.2);
        }
    }
    let bare_p50 = percentile(&mut bare, 0.5);
    let per_delta = |run: Duration| micros(run.saturating_sub(bare_p50)) / STREAM_CHUNKS as f64;
    let (windowed_p50, per_chunk_p50) = (percentile(&mut windowed, 0.5), percentile(&mut per_chunk, 0.5));
    println!();
    println!(
        "R2 — remote processOutputStream guard on a Stream of {STREAM_CHUNKS} text deltas ({r2_iterations} runs each, interleaved)"
    );
    println!("| measure | run p50 | added per chunk |");
    println!("|---|---|---|");
    println!("| no stream processor | {:.0} µs | |", micros(bare_p50));
    println!(
        "| remote guard, windows of 32 | {:.0} µs | {:.2} µs |",
        micros(windowed_p50),
        per_delta(windowed_p50)
    );
    println!(
        "| remote guard, one chunk per call | {:.0} µs | {:.2} µs |",
        micros(per_chunk_p50),
        per_delta(per_chunk_p50)
    );
}
