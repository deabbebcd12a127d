//! The test harness: a real agentwire gRPC server on an ephemeral port, with test processor
//! kinds registered next to the built-ins, and helpers to read runs.
#![allow(dead_code, unreachable_pub, missing_docs)]

pub mod binary;
pub mod certificates;
pub mod fake_provider;
pub mod logs;
pub mod pg_tls_proxy;
pub mod postgres;
pub mod processors;
pub mod raw_codec;
pub mod remote;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentwire::config::Config;
use agentwire::console::{ConnectionLimits, ConsoleAccess};
use agentwire::processor::{Processor, ProcessorRegistry};
use agentwire::runtime::{Components, Runtime};
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use agentwire::server::{ServeOptions, Services, pb};
use agentwire::storage::SledStore;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A shared, ordered record of what test processors saw.
#[derive(Debug, Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: impl Into<String>) {
        self.0.lock().unwrap().push(entry.into());
    }

    pub fn entries(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The entries that start with `prefix`.
    pub fn with_prefix(&self, prefix: &str) -> Vec<String> {
        self.entries().into_iter().filter(|entry| entry.starts_with(prefix)).collect()
    }
}

/// A server running in this test, with its store in a temporary directory (or a given one).
pub struct TestServer {
    pub addr: SocketAddr,
    /// Where `GET /metrics` answers.
    pub metrics_addr: SocketAddr,
    /// Where the console answers (plain HTTP).
    pub console_addr: SocketAddr,
    pub log: Log,
    /// Where the store lives.
    pub data_dir: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    _temp_dir: Option<tempfile::TempDir>,
}

pub struct TestServerBuilder {
    config: String,
    kinds: ProcessorRegistry,
    log: Log,
    data_dir: Option<PathBuf>,
}

impl TestServerBuilder {
    /// Registers a test processor kind; the factory gets the shared log.
    pub fn kind<F>(mut self, kind: &str, factory: F) -> Self
    where
        F: Fn(&str, toml::Table, Log) -> Arc<dyn Processor> + Send + Sync + 'static,
    {
        let log = self.log.clone();
        self.kinds.register_fn(kind, move |id, options| Ok(factory(id, options, log.clone())));
        self
    }

    /// Keeps the store in `data_dir` (to restart a server on the same data).
    pub fn data_dir(mut self, data_dir: &Path) -> Self {
        self.data_dir = Some(data_dir.to_owned());
        self
    }

    pub async fn start(self) -> TestServer {
        let config = Config::parse(&self.config).expect("test config parses");
        let temp_dir = match &self.data_dir {
            Some(_) => None,
            None => Some(tempfile::tempdir().expect("temp dir")),
        };
        let data_dir = self.data_dir.clone().unwrap_or_else(|| temp_dir.as_ref().unwrap().path().to_owned());
        let store: Arc<dyn agentwire::storage::Store> = if postgres::servers_use_postgres() {
            Arc::new(postgres::store_for(&data_dir).await)
        } else {
            // `open` waits for a server stopped a moment ago on the same directory to release it.
            Arc::new(SledStore::open(&data_dir).expect("the store opens"))
        };
        let mut components = Components::builtin().with_store(store);
        components.processor_kinds = self.kinds;
        let runtime = Runtime::new(&config, components).expect("test config is valid");
        let options = ServeOptions::from_config(&config).expect("test auth config is valid");
        let runtime = Arc::new(runtime);
        let metrics_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind metrics");
        let metrics_addr = metrics_listener.local_addr().expect("metrics addr");
        let metrics = tokio::spawn(agentwire::server::serve_metrics(metrics_listener, Arc::clone(&runtime)));
        // Bind first: the socket accepts connections before the server polls, so no sleep is needed.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let console_access = ConsoleAccess::from_config(&config.console, options.auth.is_open());
        let console_limits = ConnectionLimits::from_config(&config.console);
        let services = Services::new(runtime, options);
        let console_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind console");
        let console_addr = console_listener.local_addr().expect("console addr");
        let console = tokio::spawn(agentwire::console::serve(
            console_listener,
            services.routes(),
            None,
            console_access,
            console_limits,
        ));
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = shutdown_rx.await;
            };
            services.serve(listener, shutdown).await.expect("server runs");
            metrics.abort();
            console.abort();
        });
        TestServer {
            addr,
            metrics_addr,
            console_addr,
            log: self.log,
            data_dir,
            shutdown: Some(shutdown_tx),
            task: Some(task),
            _temp_dir: temp_dir,
        }
    }
}

impl TestServer {
    /// A server for `config`, with the built-in kinds and the test kinds of [`processors`].
    pub fn builder(config: &str) -> TestServerBuilder {
        let builder = TestServerBuilder {
            config: config.to_owned(),
            kinds: ProcessorRegistry::with_builtins(),
            log: Log::default(),
            data_dir: None,
        };
        processors::register(builder)
    }

    pub async fn start(config: &str) -> TestServer {
        TestServer::builder(config).start().await
    }

    /// Stops the server and waits until it is gone (its store closed).
    /// Sends the shutdown signal (like SIGTERM) without waiting for the server to stop.
    pub fn signal_stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }

    pub async fn stop(mut self) {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    pub async fn client(&self) -> AgentServiceClient<Channel> {
        AgentServiceClient::new(self.channel().await)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr)).unwrap().connect().await.expect("connect")
    }

    /// Streams a run and collects every chunk.
    pub async fn stream(&self, request: pb::RunRequest) -> Vec<pb::Chunk> {
        let mut stream = self.client().await.stream(request).await.expect("stream starts").into_inner();
        let mut chunks = Vec::new();
        while let Some(chunk) = stream.message().await.expect("stream continues") {
            chunks.push(chunk);
        }
        chunks
    }

    /// Runs unary.
    pub async fn generate(&self, request: pb::RunRequest) -> pb::GenerateResponse {
        self.client().await.generate(request).await.expect("generate succeeds").into_inner()
    }

    /// The texts of the messages stored in thread `thread_id` of resource `alice`, oldest first.
    pub async fn stored_texts(&self, thread_id: &str) -> Vec<String> {
        let mut client = MemoryServiceClient::new(self.channel().await);
        let list = pb::ListMessagesRequest {
            thread_id: thread_id.into(),
            resource_id: "alice".into(),
            direction: pb::Direction::Forward.into(),
            page_size: 1000,
            page_token: String::new(),
        };
        match client.list_messages(list).await {
            Ok(page) => page.into_inner().messages.iter().map(message_text).collect(),
            Err(status) if status.code() == tonic::Code::NotFound => Vec::new(),
            Err(status) => panic!("list messages: {status}"),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A request for `agent_id` with one user text.
pub fn request(agent_id: &str, text: &str) -> pb::RunRequest {
    pb::RunRequest { agent_id: agent_id.to_owned(), text: text.to_owned(), ..Default::default() }
}

/// A message of `role` (`user`, `assistant`, ...) with one text part.
pub fn message(role: &str, text: &str) -> pb::Message {
    pb::Message {
        role: role.into(),
        parts: vec![pb::Part { part: Some(pb::part::Part::Text(pb::TextPart { text: text.into() })) }],
        ..Default::default()
    }
}

/// A processor list override.
pub fn names(names: &[&str]) -> Option<pb::ProcessorList> {
    Some(pb::ProcessorList { names: names.iter().map(|name| (*name).to_owned()).collect() })
}

/// The chunk types, in order.
pub fn types(chunks: &[pb::Chunk]) -> Vec<String> {
    chunks.iter().map(|chunk| chunk.r#type.clone()).collect()
}

/// The concatenated text deltas.
pub fn text(chunks: &[pb::Chunk]) -> String {
    chunks
        .iter()
        .filter_map(|chunk| match &chunk.payload {
            Some(pb::chunk::Payload::TextDelta(delta)) => Some(delta.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The payload of the run's `name` data chunk (e.g. `data-pii`), which must be there.
pub fn report(result: &pb::GenerateResponse, name: &str) -> serde_json::Value {
    let chunk = result.data.iter().find(|chunk| chunk.r#type == name).unwrap_or_else(|| panic!("no {name}"));
    let Some(pb::chunk::Payload::Data(data)) = &chunk.payload else { panic!("{name} is not a data chunk") };
    json(&data.data)
}

/// A request in thread `thread_id` of resource `alice`.
pub fn in_thread(agent_id: &str, text: &str, thread_id: &str) -> pb::RunRequest {
    let mut run = request(agent_id, text);
    run.thread_id = thread_id.into();
    run.resource_id = "alice".into();
    run
}

/// The text parts of a message, joined.
pub fn message_text(message: &pb::Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|part| match &part.part {
            Some(pb::part::Part::Text(text)) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The tripwire of the last chunk, if it is one.
pub fn tripwire(chunks: &[pb::Chunk]) -> Option<pb::Tripwire> {
    match chunks.last().and_then(|chunk| chunk.payload.clone()) {
        Some(pb::chunk::Payload::Tripwire(tripwire)) => Some(tripwire),
        _ => None,
    }
}

/// The error of the last chunk, if it is one.
pub fn error(chunks: &[pb::Chunk]) -> Option<pb::ErrorPayload> {
    match chunks.last().and_then(|chunk| chunk.payload.clone()) {
        Some(pb::chunk::Payload::Error(error)) => Some(error),
        _ => None,
    }
}

/// A protobuf value as JSON.
pub fn json(value: &Option<prost_types::Value>) -> serde_json::Value {
    value.clone().map(agentwire::server::value::from_proto).unwrap_or_default()
}

/// What `mock/inspect` saw, parsed from the answer text.
pub fn inspected(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|error| panic!("inspect answer is JSON ({error}): {text}"))
}

/// Polls `attempt` until it yields a value, failing after a generous deadline.
pub async fn eventually_some<T, F>(what: &str, mut attempt: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The server's `/metrics` page, as text.
pub async fn scrape_metrics(server: &TestServer) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut connection = tokio::net::TcpStream::connect(server.metrics_addr).await.expect("metrics answer");
    connection.write_all(b"GET /metrics HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut response = String::new();
    connection.read_to_string(&mut response).await.unwrap();
    response
}

/// Waits until `condition` holds, failing after a generous deadline (never a fixed sleep).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
