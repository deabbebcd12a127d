//! The command line: `agentwire serve` starts the server; `agentwire run` and `agentwire agents`
//! are a small client for newcomers; `agentwire bench` measures a server.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio::net::TcpListener;

use crate::bench::BenchOptions;
use crate::config::StorageBackend;
use crate::config::{Config, LogFormat};
use crate::runtime::{Components, Runtime};
use crate::server::pb::agent_service_client::AgentServiceClient;
use crate::server::{ServeOptions, Services, pb};
use crate::storage::{PgOptions, PgStore, SledStore, Store};
use crate::telemetry::Telemetry;

mod runs;

/// The address `serve` listens on and the clients call by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:50051";

#[derive(Debug, Parser)]
#[command(name = "agentwire", version, about = "An agent runtime served over gRPC")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Starts the server.
    Serve {
        /// The agents config (TOML). Without it: one `echo` agent on `mock/echo`.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Address to listen on; port 0 picks a free port.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        listen: SocketAddr,
        /// Where the server keeps its data.
        #[arg(long, default_value = "agentwire-data")]
        data_dir: PathBuf,
        /// Log lines as `text` or `json` (overrides `[telemetry] log_format`).
        #[arg(long, env = "AGENTWIRE_LOG_FORMAT")]
        log_format: Option<LogFormat>,
        /// Where the console is served (overrides `[console] listen`); port 0 picks a free port.
        #[arg(long)]
        console: Option<SocketAddr>,
    },
    /// Streams an agent's answer to a text.
    Run {
        /// The agent to run.
        #[arg(long)]
        agent: String,
        /// The text to send.
        text: String,
        /// The server.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        addr: String,
        /// The conversation.
        #[arg(long, default_value = "")]
        thread: String,
        /// The owner of the conversation.
        #[arg(long, default_value = "")]
        resource: String,
        /// The API key, when the server has `[auth]` keys.
        #[arg(long, env = "AGENTWIRE_API_KEY", hide_env_values = true)]
        key: Option<String>,
    },
    /// Lists the server's agents.
    Agents {
        /// The server.
        #[arg(long, default_value = DEFAULT_LISTEN)]
        addr: String,
        /// The API key, when the server has `[auth]` keys.
        #[arg(long, env = "AGENTWIRE_API_KEY", hide_env_values = true)]
        key: Option<String>,
    },
    /// Lists the latest runs (their records), or shows one: `agentwire runs show RUN_ID`.
    #[command(args_conflicts_with_subcommands = true)]
    Runs {
        #[command(subcommand)]
        show: Option<runs::RunsCommand>,
        #[command(flatten)]
        list: runs::RunsList,
        /// The server.
        #[arg(long, default_value = DEFAULT_LISTEN, global = true)]
        addr: String,
        /// The API key, when the server has `[auth]` keys.
        #[arg(long, env = "AGENTWIRE_API_KEY", hide_env_values = true, global = true)]
        key: Option<String>,
    },
    /// Rewrites the store with only its live data, giving the space of overwritten and deleted
    /// records back to the disk. Run it with the server stopped.
    Compact {
        /// The server's data directory.
        #[arg(long, default_value = "agentwire-data")]
        data_dir: PathBuf,
    },
    /// Scores the built-in guardrails on the labelled corpora (see GUARDRAILS.md) and prints a
    /// Markdown report.
    Eval {
        #[command(subcommand)]
        what: EvalCommand,
    },
    /// Measures runs, hooks and recall (see BENCHMARKS.md) and prints a Markdown report.
    Bench {
        /// Bench running servers (started with `--print-config`'s agents; several: the replicas of
        /// one deployment, clients spread over them) instead of `agentwire serve` started by the
        /// bench. CPU and memory are then not measured, and recall and gateway scenarios are
        /// skipped.
        #[arg(long, value_delimiter = ',')]
        addr: Vec<String>,
        /// The server keeps its memory in PostgreSQL, at the URL in the environment
        /// variable AGENTWIRE_POSTGRES_URL (the bench's tables go into that database).
        #[arg(long)]
        postgres: bool,
        /// With --postgres: the candidates semantic recall's HNSW search keeps
        /// ([storage.postgres] recall_ef_search), to measure recall and latency at another value.
        #[arg(long)]
        ef_search: Option<u32>,
        /// The server keeps its sled store in this data directory (and leaves it there) instead
        /// of a temporary one: a second run finds the recall resources filled.
        #[arg(long, conflicts_with_all = ["addr", "postgres"])]
        data_dir: Option<PathBuf>,
        /// Seconds each measurement lasts.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Seconds of warm-up before each measurement.
        #[arg(long, default_value_t = 1.0)]
        warm_up: f64,
        /// Concurrent clients, each measured in turn.
        #[arg(long, value_delimiter = ',', default_value = "1,32")]
        concurrency: Vec<usize>,
        /// Only scenarios whose id starts with one of these (e.g. `S1,S4,R`).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Stored messages of the recall scenarios' resources.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        recall_sizes: Vec<usize>,
        /// The server keeps no run records (`[records] enabled = false`), to measure
        /// what recording costs against a run with them.
        #[arg(long)]
        no_records: bool,
        /// The gateway scenarios (G) are also measured at this many concurrent clients (0: not).
        #[arg(long, default_value_t = 512)]
        wide: usize,
        /// Every scenario, briefly: checks that the bench works (what CI runs).
        #[arg(long)]
        smoke: bool,
        /// Print the bench's agents config and exit (the gateway scenarios' agents need the
        /// fake provider the bench starts for a server it starts only).
        #[arg(long)]
        print_config: bool,
    },
}

/// What `agentwire eval` scores.
#[derive(Debug, Subcommand)]
enum EvalCommand {
    /// `pii-detector` through a server in this process, in Generate and Stream.
    Guardrails {
        /// The corpora's directory.
        #[arg(long, default_value = "tests/corpora")]
        corpora: PathBuf,
        /// A quarter of each corpus in two modes; exits 1 when a figure is under its floor.
        #[arg(long)]
        quick: bool,
        /// Misses listed per entity type and sort.
        #[arg(long, default_value_t = 3)]
        misses: usize,
    },
    /// Trains `prompt-injection-detector`'s n-gram model and writes the file the binary ships.
    TrainInjection {
        /// The training corpus.
        #[arg(long, default_value = "tests/corpora/train/injection.jsonl")]
        corpus: PathBuf,
        /// Where the model goes (rebuild to ship it).
        #[arg(long, default_value = "src/processor/builtin/prompt_injection/model.bin")]
        out: PathBuf,
        /// Passes over the corpus.
        #[arg(long, default_value_t = crate::eval::TrainOptions::default().epochs)]
        epochs: usize,
        /// L2 penalty per update.
        #[arg(long, default_value_t = crate::eval::TrainOptions::default().l2)]
        l2: f32,
        /// Also print how the model alone does on these corpora (no server, no heuristic).
        #[arg(long)]
        check: Vec<PathBuf>,
    },
}

/// Runs the command line; the exit code is 0 on success, 1 on failure and 2 after a tripwire.
pub async fn main() -> ExitCode {
    let command = Cli::parse().command;
    if !matches!(command, Command::Serve { .. }) {
        // The server sets up its own, from its config.
        let _logs = Telemetry::install_logs(LogFormat::Text);
    }
    let outcome = match command {
        Command::Serve { config, listen, data_dir, log_format, console } => {
            run_server(config, listen, data_dir, log_format, console).await
        }
        Command::Run { agent, text, addr, thread, resource, key } => {
            let request = pb::RunRequest {
                agent_id: agent,
                text,
                thread_id: thread,
                resource_id: resource,
                ..Default::default()
            };
            run_agent(addr, request, key).await
        }
        Command::Agents { addr, key } => list_agents(addr, key).await,
        Command::Runs { show, list, addr, key } => {
            runs::runs(&addr, key.as_deref(), show, list).await.map(|out| {
                print!("{out}");
                ExitCode::SUCCESS
            })
        }
        Command::Compact { data_dir } => compact(&data_dir),
        Command::Eval { what: EvalCommand::Guardrails { corpora, quick, misses } } => {
            run_eval(crate::eval::EvalOptions { corpora, quick, misses }).await
        }
        Command::Eval { what: EvalCommand::TrainInjection { corpus, out, epochs, l2, check } } => {
            let options = crate::eval::TrainOptions { epochs, l2, ..crate::eval::TrainOptions::default() };
            train_injection(&corpus, &out, options, &check)
        }
        Command::Bench {
            addr,
            postgres,
            ef_search,
            data_dir,
            seconds,
            warm_up,
            concurrency,
            only,
            recall_sizes,
            no_records,
            wide,
            smoke,
            print_config,
        } => {
            if print_config {
                print!("{}", crate::bench::config(None));
                return ExitCode::SUCCESS;
            }
            let postgres = match postgres.then(|| std::env::var("AGENTWIRE_POSTGRES_URL")) {
                None => None,
                Some(Ok(url)) => Some(PgOptions {
                    url,
                    pool_size: 16,
                    statement_timeout: Duration::from_secs(30),
                    ef_search: ef_search
                        .unwrap_or_else(|| crate::config::PostgresConfig::default().recall_ef_search),
                    ca_file: None,
                }),
                Some(Err(_)) => {
                    eprintln!(
                        "agentwire: --postgres reads the URL from AGENTWIRE_POSTGRES_URL, which is not set"
                    );
                    return ExitCode::FAILURE;
                }
            };
            let defaults = BenchOptions {
                server_binary: std::env::current_exe().ok(),
                ..if smoke { BenchOptions::smoke() } else { BenchOptions::default() }
            };
            let options = if smoke {
                BenchOptions { addr, postgres, data_dir, only, records: !no_records, ..defaults }
            } else {
                BenchOptions {
                    addr,
                    postgres,
                    data_dir,
                    warm_up: Duration::from_secs_f64(warm_up),
                    duration: Duration::from_secs_f64(seconds),
                    concurrency,
                    only,
                    recall_sizes,
                    records: !no_records,
                    wide: (wide > 0).then_some(wide),
                    ..defaults
                }
            };
            run_bench(options).await
        }
    };
    match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("agentwire: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `agentwire compact`: the store of `data_dir` rewritten with only its live data.
fn compact(data_dir: &std::path::Path) -> Result<ExitCode, String> {
    let compacted = crate::storage::compact(&data_dir.join("store")).map_err(|error| error.to_string())?;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!(
        "compacted `{}`: {:.1} MiB → {:.1} MiB ({} records)",
        data_dir.display(),
        mib(compacted.before_bytes),
        mib(compacted.after_bytes),
        compacted.records
    );
    Ok(ExitCode::SUCCESS)
}

async fn run_server(
    config: Option<PathBuf>,
    listen: SocketAddr,
    data_dir: PathBuf,
    log_format: Option<LogFormat>,
    console: Option<SocketAddr>,
) -> Result<ExitCode, String> {
    let mut config = match config {
        Some(path) => Config::load(&path).map_err(|error| error.to_string())?,
        None => Config::default_config(),
    };
    if let Some(log_format) = log_format {
        config.telemetry.log_format = log_format;
    }
    if console.is_some() {
        config.console.listen = console;
    }
    let telemetry = Telemetry::install(&config.telemetry).map_err(|error| error.to_string())?;
    let served = serve_config(config, listen, data_dir).await;
    telemetry.shut_down().await;
    served
}

/// Raises this process's open-file limit to the most it may have, as Go's runtime does: the soft
/// limit (often 1024) is what thousands of clients — gRPC, the console's, processors — would run
/// into while the hard limit allows far more.
fn raise_file_limit() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum || (limit.maximum.is_none() && limit.current.is_some()) {
        let raised = Rlimit { current: limit.maximum, maximum: limit.maximum };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => tracing::debug!(from = ?limit.current, to = ?limit.maximum, "open-file limit raised"),
            Err(error) => tracing::warn!(%error, "the open-file limit could not be raised"),
        }
    }
}

/// Serves `config` until SIGINT or SIGTERM, then drains and flushes the store.
async fn serve_config(config: Config, listen: SocketAddr, data_dir: PathBuf) -> Result<ExitCode, String> {
    raise_file_limit();
    std::fs::create_dir_all(&data_dir)
        .map_err(|error| format!("cannot create data directory `{}`: {error}", data_dir.display()))?;
    crate::telemetry::metrics::set_replica(config.metrics.replica.clone().unwrap_or_else(host_name));
    let (store, flushed_on_exit) = open_store(&config, &data_dir).await?;
    let runtime =
        Runtime::new(&config, Components::builtin().with_store(store)).map_err(|error| error.to_string())?;
    let options = ServeOptions::from_config(&config).map_err(|error| error.to_string())?;
    if options.auth.is_open() {
        if !listen.ip().is_loopback() && !config.auth.allow_unauthenticated {
            return Err(format!(
                "refusing to serve {listen} without API keys: anyone who can reach it could use every agent \
                 and read every resource's memory. Add `[[auth.keys]]`, listen on loopback, or set \
                 `[auth] allow_unauthenticated = true`"
            ));
        }
        tracing::warn!("no API keys configured ([auth]): every caller may use every agent and resource");
    }
    let listener =
        TcpListener::bind(listen).await.map_err(|error| format!("cannot listen on {listen}: {error}"))?;
    let address = listener.local_addr().map_err(|error| error.to_string())?;
    let runtime = Arc::new(runtime);
    if let Some(metrics) = config.metrics.listen {
        let listener = TcpListener::bind(metrics)
            .await
            .map_err(|error| format!("cannot serve metrics on {metrics}: {error}"))?;
        let bound = listener.local_addr().map_err(|error| error.to_string())?;
        tracing::info!("metrics on http://{bound}/metrics");
        tokio::spawn(crate::server::serve_metrics(listener, Arc::clone(&runtime)));
    }
    let open = options.auth.is_open();
    let services = Services::new(runtime, options);
    let console = match config.console.listen {
        Some(listen) => Some(start_console(&config, listen, open, &services).await?),
        None => None,
    };
    let shutdown = shutdown_signal()?;
    // Test runners in every language read the first line to learn the port. Both lines go out in
    // one write: a reader that stops after the first must not make a later write fail.
    let mut ready = format!("agentwire listening on {address}\n");
    if let Some(console) = console {
        ready.push_str(&format!("agentwire console on {console}\n"));
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(ready.as_bytes()).and_then(|()| stdout.flush()).map_err(|error| error.to_string())?;
    drop(stdout);
    services.serve(listener, shutdown).await.map_err(|error| error.to_string())?;
    if let Some(sled) = flushed_on_exit {
        sled.flush().map_err(|error| format!("cannot flush the store: {error}"))?;
    }
    tracing::info!("agentwire stopped");
    Ok(ExitCode::SUCCESS)
}

/// Serves the console on `listen`, over HTTPS when `[tls]` is set; returns its URL. Beyond
/// loopback it needs API keys (as the gRPC port does) and TLS (or `[console] allow_plaintext`).
async fn start_console(
    config: &Config,
    listen: SocketAddr,
    open: bool,
    services: &Services,
) -> Result<String, String> {
    let remote = !listen.ip().is_loopback();
    if remote && open && !config.auth.allow_unauthenticated {
        return Err(format!(
            "refusing to serve the console on {listen} without API keys: anyone who can reach it could read \
             every run and resource. Add `[[auth.keys]]` (an admin key sees everything), listen on loopback, \
             or set `[auth] allow_unauthenticated = true`"
        ));
    }
    if remote && config.tls.is_none() && !config.console.allow_plaintext {
        return Err(format!(
            "refusing to serve the console on {listen} without TLS: API keys would cross the network in the \
             clear. Add `[tls]` (the console uses its certificate), listen on loopback, or set \
             `[console] allow_plaintext = true` behind a proxy that terminates TLS"
        ));
    }
    let tls = match &config.tls {
        Some(tls) => Some(
            crate::console::acceptor(
                &config.resolve(&tls.get_ref().cert),
                &config.resolve(&tls.get_ref().key),
            )
            .map_err(|error| error.to_string())?,
        ),
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|error| format!("cannot serve the console on {listen}: {error}"))?;
    let bound = listener.local_addr().map_err(|error| error.to_string())?;
    let access = crate::console::ConsoleAccess::from_config(&config.console, open);
    let limits = crate::console::ConnectionLimits::from_config(&config.console);
    let console = crate::console::serve(listener, services.routes(), tls, access, limits);
    tokio::spawn(async move {
        if let Err(error) = console.await {
            tracing::error!(%error, "the console stopped");
        }
    });
    Ok(format!("{scheme}://{bound}/"))
}

/// This machine's host name (the metrics' default `replica`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "agentwire".to_owned())
}

/// The store `[storage]` names: sled in `data_dir/store` (also handed back, to flush on the way
/// out), or PostgreSQL at the URL in the environment variable `[storage.postgres] url_env`.
async fn open_store(
    config: &Config,
    data_dir: &std::path::Path,
) -> Result<(Arc<dyn Store>, Option<SledStore>), String> {
    let storage = &config.storage;
    match storage.backend {
        StorageBackend::Sled => {
            let store =
                SledStore::open_with_cache(&data_dir.join("store"), storage.cache_mb.max(1) * 1024 * 1024)
                    .map_err(|error| format!("cannot open the store in `{}`: {error}", data_dir.display()))?;
            let recall_bytes =
                usize::try_from(storage.recall_index_mb.max(1) * 1024 * 1024).unwrap_or(usize::MAX);
            store.set_recall_budget(recall_bytes);
            store.set_min_free_bytes(storage.min_free_mb.saturating_mul(1024 * 1024));
            Ok((Arc::new(store.clone()), Some(store)))
        }
        StorageBackend::Postgres => {
            let postgres = &storage.postgres;
            let url = std::env::var(&postgres.url_env).map_err(|_| {
                format!(
                    "[storage] backend = \"postgres\" reads the connection URL from the environment variable \
                     `{}` ([storage.postgres] url_env), which is not set",
                    postgres.url_env
                )
            })?;
            let options = PgOptions {
                url,
                pool_size: postgres.pool_size,
                statement_timeout: std::time::Duration::from_millis(postgres.statement_timeout_ms),
                ef_search: postgres.recall_ef_search,
                ca_file: postgres.ca_file.as_deref().map(|file| config.resolve(file)),
            };
            let store = PgStore::connect(&options).await.map_err(|error| {
                format!("cannot open the PostgreSQL store (`{}`): {error}", postgres.url_env)
            })?;
            Ok((Arc::new(store), None))
        }
    }
}

/// Installs the SIGINT and SIGTERM handlers now, and resolves when either signal arrives.
/// Installed before the ready line is printed, so a signal sent right after it is never lost.
fn shutdown_signal() -> Result<impl Future<Output = ()>, String> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|error| format!("cannot handle SIGINT: {error}"))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|error| format!("cannot handle SIGTERM: {error}"))?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
    })
}

/// A request carrying `key` as a bearer token, when there is one.
fn keyed<T>(message: T, key: Option<&str>) -> Result<tonic::Request<T>, String> {
    let mut request = tonic::Request::new(message);
    if let Some(key) = key {
        let value = format!("Bearer {key}")
            .parse()
            .map_err(|_| "the API key has characters a header cannot carry")?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

async fn run_agent(addr: String, request: pb::RunRequest, key: Option<String>) -> Result<ExitCode, String> {
    let request = keyed(request, key.as_deref())?;
    let mut client =
        AgentServiceClient::new(crate::server::connect(&addr).await.map_err(|error| error.to_string())?);
    let mut stream = client.stream(request).await.map_err(|status| status.message().to_owned())?.into_inner();
    let mut stdout = std::io::stdout();
    while let Some(chunk) = stream.message().await.map_err(|status| status.message().to_owned())? {
        use pb::chunk::Payload;
        match chunk.payload {
            Some(Payload::TextDelta(delta)) => {
                print!("{}", delta.text);
                let _ = stdout.flush();
            }
            Some(Payload::ToolCall(call)) => {
                eprintln!("\n[tool call] {}({})", call.tool_name, json_of(call.args))
            }
            Some(Payload::ToolResult(result)) => eprintln!("[tool result] {}", json_of(result.result)),
            Some(Payload::Data(data)) => eprintln!("\n[{}] {}", chunk.r#type, json_of(data.data)),
            Some(Payload::Tripwire(tripwire)) => {
                println!();
                eprintln!("TRIPWIRE from processor `{}`: {}", tripwire.processor_id, tripwire.reason);
                return Ok(ExitCode::from(2));
            }
            Some(Payload::Error(error)) => {
                println!();
                return Err(format!("run failed ({}): {}", error.source, error.message));
            }
            Some(Payload::Finish(finish)) => {
                println!();
                let usage = finish.usage.unwrap_or_default();
                eprintln!("[finish] {} ({} tokens)", finish.finish_reason, usage.total_tokens);
            }
            _ => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the bench on threads of its own (it starts its own runtimes) and prints its report.
async fn run_bench(options: BenchOptions) -> Result<ExitCode, String> {
    let (done, report) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = done.send(crate::bench::run(&options));
    });
    let report = report.await.map_err(|_| "the bench stopped".to_owned())??;
    print!("{}", crate::bench::render(&report));
    Ok(ExitCode::SUCCESS)
}

/// Runs the evaluation on threads of its own and prints its report; with `--quick`, fails when
/// a figure is under its floor.
async fn run_eval(options: crate::eval::EvalOptions) -> Result<ExitCode, String> {
    let (done, report) = tokio::sync::oneshot::channel();
    let quick = options.quick;
    std::thread::spawn(move || {
        let _ = done.send(crate::eval::run(&options));
    });
    let report = report.await.map_err(|_| "the evaluation stopped".to_owned())??;
    print!("{}", crate::eval::render(&report));
    let below = crate::eval::below_floors(&report);
    for line in &below {
        eprintln!("under its floor: {line}");
    }
    Ok(if quick && !below.is_empty() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Trains the injection model, then prints how it does alone on each of `check`.
fn train_injection(
    corpus: &std::path::Path,
    out: &std::path::Path,
    options: crate::eval::TrainOptions,
    check: &[PathBuf],
) -> Result<ExitCode, String> {
    let trained = crate::eval::train(corpus, out, options)?;
    println!(
        "trained on {} texts ({} readings), {:.3} of them right; wrote {}",
        trained.cases,
        trained.examples,
        trained.accuracy,
        out.display()
    );
    for corpus in check {
        for (path, confusion) in crate::eval::check(&trained.model, corpus)? {
            println!(
                "{}, {path}: precision {:.3}, recall {:.3}, specificity {:.3}, balanced accuracy {:.3}",
                corpus.display(),
                confusion.precision(),
                confusion.recall(),
                confusion.specificity(),
                confusion.balanced_accuracy()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn json_of(value: Option<prost_types::Value>) -> String {
    value.map(crate::server::value::from_proto).unwrap_or_default().to_string()
}

async fn list_agents(addr: String, key: Option<String>) -> Result<ExitCode, String> {
    let request = keyed(pb::ListAgentsRequest {}, key.as_deref())?;
    let mut client =
        AgentServiceClient::new(crate::server::connect(&addr).await.map_err(|error| error.to_string())?);
    let agents =
        client.list_agents(request).await.map_err(|status| status.message().to_owned())?.into_inner().agents;
    for agent in agents {
        println!("{:<20} {:<16} {}", agent.id, agent.model, agent.name);
    }
    Ok(ExitCode::SUCCESS)
}
