//! `agentwire bench`: the measured cost of a run, a hook and a recall, next to their floors.
//!
//! The bench starts `agentwire serve` in a process of its own on a temporary data directory (or a
//! server in this process, when it has no binary to start; or drives one elsewhere with `--addr`,
//! started with [`config`]), drives it over real gRPC from its own client threads, and for each
//! scenario — after a warm-up, for a fixed duration, at each concurrency — reports requests per
//! second, p50 and p99 latency, the server's CPU time per request (the server's process, plus the
//! bench's own threads but the clients': the floors and the fake provider) and the server's peak
//! resident memory. The floors are the same bytes over bare tonic services in the bench's
//! process. `--smoke` runs every scenario briefly, so that the bench cannot rot (CI runs it).

mod child;
mod corpus;
mod fake_provider;
mod fixtures;
mod gateway;
mod idle;
mod load;
mod scenarios;
mod usage;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::child::{Launch, ServerProcess};
use self::corpus::{FirstSearch, RECALL_QUERIES, first_search};
pub use self::corpus::{fill, recall_at, sentence};
pub use self::fake_provider::Arrivals;
use self::fixtures::FloorAnswer;
pub use self::fixtures::{
    G3_PIPELINE, G3_PROCESSORS, GATEWAY_TOKENS, STREAM_CHUNKS, config, pass_through_instance,
};
pub use self::load::Measured;
use self::load::{CLIENT_THREADS, Call, Phases, measure};
use self::scenarios::{Ask, Scenario, Targets, Threads};
use self::usage::Watched;
pub use self::usage::{process_cpu, resident_of};
use crate::server::pb::agent_service_client::AgentServiceClient;
use crate::server::pb::memory_service_client::MemoryServiceClient;
use crate::server::{InProcess, pb};
use crate::storage::{PgOptions, PgStore, SledStore, Store};

/// How long the bench leaves the server without load before reading its memory a last time:
/// twice the second after which its allocator gives freed pages back (`.cargo/config.toml`).
const SETTLE: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Running servers to bench (started with [`config`]), the clients spread over them in turn
    /// (replicas of one deployment); none starts one in this process.
    pub addr: Vec<String>,
    /// The server's store in PostgreSQL instead of sled.
    pub postgres: Option<PgOptions>,
    /// The server's sled store kept in this data directory instead of a temporary one: a later
    /// run finds the recall resources filled.
    pub data_dir: Option<std::path::PathBuf>,
    /// Warm-up before each measurement.
    pub warm_up: Duration,
    /// How long each measurement lasts.
    pub duration: Duration,
    /// The concurrencies to measure each scenario at.
    pub concurrency: Vec<usize>,
    /// Only the scenarios whose id starts with one of these (all when empty).
    pub only: Vec<String>,
    /// Stored messages of the recall scenarios' resources.
    pub recall_sizes: Vec<usize>,
    /// Messages the long thread of S2a holds before it is measured.
    pub long_thread: usize,
    /// Whether the server the bench starts keeps run records.
    pub records: bool,
    /// The gateway scenarios are measured at this many concurrent clients too (none: only at
    /// `concurrency`).
    pub wide: Option<usize>,
    /// The agentwire binary: the server under test runs as `agentwire serve` in a process of its
    /// own, and an idle one is measured first. None: the server runs in the bench's process, its
    /// memory counted with the clients', and the idle server is not measured.
    pub server_binary: Option<std::path::PathBuf>,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            addr: Vec::new(),
            postgres: None,
            data_dir: None,
            warm_up: Duration::from_secs(1),
            duration: Duration::from_secs(5),
            concurrency: vec![1, 32],
            only: Vec::new(),
            recall_sizes: vec![10_000, 100_000],
            long_thread: 1_000,
            records: true,
            wide: Some(512),
            server_binary: None,
        }
    }
}

impl BenchOptions {
    /// Every scenario, briefly: a check that the bench still works, not a measurement.
    pub fn smoke() -> BenchOptions {
        BenchOptions {
            warm_up: Duration::from_millis(20),
            duration: Duration::from_millis(100),
            concurrency: vec![1, 4],
            recall_sizes: vec![300],
            long_thread: 30,
            wide: None,
            ..BenchOptions::default()
        }
    }

    fn wants(&self, scenario: &Scenario) -> bool {
        self.only.is_empty() || self.only.iter().any(|prefix| scenario.id.starts_with(prefix.as_str()))
    }

    /// The concurrencies `scenario` is measured at.
    fn concurrencies(&self, scenario: &Scenario) -> Vec<usize> {
        let mut concurrencies = self.concurrency.clone();
        if let Some(wide) = self.wide.filter(|wide| scenario.is_gateway() && !concurrencies.contains(wide)) {
            concurrencies.push(wide);
        }
        concurrencies
    }
}

/// One scenario at one concurrency.
#[derive(Debug, Clone)]
pub struct Row {
    /// The scenario's id (`S1`, `S4 floor`, ...).
    pub scenario: String,
    /// What it measures.
    pub what: String,
    /// Concurrent clients.
    pub concurrency: usize,
    /// What it cost.
    pub measured: Measured,
}

/// Everything a bench run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Each scenario at each concurrency, in order.
    pub rows: Vec<Row>,
    /// Resident memory, in bytes, of `agentwire serve` alone on an empty data directory, idle.
    pub idle_server_rss: Option<u64>,
    /// The server's resident memory after it started and after the bench.
    pub server_rss: Option<ServerRss>,
    /// Runs S5 aborted, and the threads they left in the store (must be 0).
    pub aborted_runs: Option<(usize, usize)>,
    /// Recall@3 of each recall scenario's search against an exact scan (a server the bench starts).
    pub recall: Vec<(String, f64)>,
    /// What filling and first searching each recall scenario's resource cost (a server the bench starts).
    pub recall_loads: Vec<RecallLoad>,
}

/// The server's resident memory, in bytes, before the first scenario and after the last.
#[derive(Debug, Clone, Copy)]
pub struct ServerRss {
    /// Once it started (and the recall resources were filled).
    pub started: u64,
    /// As the last scenario ended.
    pub ended: u64,
    /// `SETTLE` later, with no load: what an operator sees once a burst is over, after the
    /// allocator gave freed memory back.
    pub settled: u64,
    /// `agentwire serve` alone; false: the bench's process, its clients, floors and fake
    /// provider with the server.
    pub alone: bool,
}

/// What a recall scenario's resource cost before it was measured.
#[derive(Debug, Clone)]
pub struct RecallLoad {
    /// The scenario.
    pub scenario: String,
    /// Messages it holds.
    pub size: usize,
    /// Storing them, when this run did.
    pub filled: Option<Duration>,
    /// The first search, which loads the resource's index, and what it cost the others.
    pub first_search: FirstSearch,
    /// Resident memory once its searches were measured, in bytes.
    pub resident: Option<u64>,
}

impl Report {
    /// The row of `scenario` at `concurrency`.
    pub fn row(&self, scenario: &str, concurrency: usize) -> Option<&Row> {
        self.rows.iter().find(|row| row.scenario == scenario && row.concurrency == concurrency)
    }
}

/// What the bench starts beside the server: the floors and the fake provider.
struct Beside {
    /// The stream and unary floor's address, and the unary floor's answer.
    floor: (String, FloorAnswer),
    /// The ping-pong floor's address.
    ping_floor: String,
    /// The fake provider's base URL.
    fake_provider: String,
}

/// Runs the bench; progress goes to stderr.
pub fn run(options: &BenchOptions) -> Result<Report, String> {
    // First, while nothing else runs: the server alone, idle, in a process of its own.
    let idle_server_rss = options.server_binary.as_deref().and_then(|binary| {
        idle::idle_server_rss(binary)
            .inspect_err(|reason| eprintln!("the idle server's memory is not measured: {reason}"))
            .ok()
    });
    // The floors and the fake provider serve from threads of their own, like the server, so
    // their CPU time is counted as a server's (a gateway scenario's direct row is the fake's).
    let floors = runtime("aw-floor")?;
    let beside = floors.block_on(async {
        Ok::<_, String>(Beside {
            floor: fixtures::stream_floor().await?,
            ping_floor: fixtures::ping_pong_floor().await?,
            fake_provider: fake_provider::start().await?,
        })
    })?;
    let mut config = fixtures::config_on(Some(&beside.fake_provider), options.postgres.as_ref());
    if !options.records {
        config.push_str("\n[records]\nenabled = false\n");
    }
    let client = runtime(CLIENT_THREADS)?;
    let (server, recalled) = Server::start(options, &config, &client)?;
    let report = client.block_on(bench(options, &server, &beside, recalled));
    drop(client);
    drop(floors);
    server.stop();
    report.map(|report| Report { idle_server_rss, ..report })
}

/// A runtime of two worker threads named `name`.
fn runtime(name: &str) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the {name} runtime: {error}"))
}

/// The server under test.
enum Server {
    /// Elsewhere: the replicas of one deployment.
    Remote(Vec<String>),
    /// In this process, on its own runtime and threads.
    Local(InProcess),
    /// `agentwire serve` in a process of its own, on a data directory deleted after it stops
    /// unless the bench was given one.
    Child { process: ServerProcess, _data: Option<tempfile::TempDir> },
}

impl Server {
    /// Starts the server `options` name, serving `config`, with the recall scenarios' resources
    /// filled (before it starts, when it runs in a process of its own: the store is the
    /// server's once it runs); returns it with what their fill, first search and recall cost.
    fn start(
        options: &BenchOptions,
        config: &str,
        client: &tokio::runtime::Runtime,
    ) -> Result<(Server, Report), String> {
        if !options.addr.is_empty() {
            return Ok((Server::Remote(options.addr.clone()), Report::default()));
        }
        let Some(binary) = &options.server_binary else {
            let server = match (&options.postgres, &options.data_dir) {
                (None, None) => InProcess::start(config, "aw-server")?,
                (None, Some(data_dir)) => InProcess::start_in(config, "aw-server", data_dir)?,
                (Some(postgres), _) => InProcess::start_on_postgres(config, "aw-server", postgres)?,
            };
            let recalled = client.block_on(prepare_recall(server.store().as_ref(), options))?;
            return Ok((Server::Local(server), recalled));
        };
        let temporary = match &options.data_dir {
            Some(_) => None,
            None => {
                Some(tempfile::tempdir().map_err(|error| format!("cannot make a data directory: {error}"))?)
            }
        };
        let data_dir = temporary
            .as_ref()
            .map_or_else(|| options.data_dir.clone().unwrap_or_default(), |dir| dir.path().to_owned());
        let recalled = client.block_on(async {
            let store = open_store(options, &data_dir).await?;
            prepare_recall(store.as_ref(), options).await
            // The store closes here, before the server opens it.
        })?;
        let mut env = Vec::new();
        if let Some(postgres) = &options.postgres {
            env.push((crate::config::PostgresConfig::default().url_env, postgres.url.clone()));
        }
        let launch = Launch { binary, config: Some(config), data_dir: &data_dir, env };
        let process = ServerProcess::start(&launch)?;
        Ok((Server::Child { process, _data: temporary }, recalled))
    }

    /// Where the clients connect, in turn.
    fn addresses(&self) -> Vec<&str> {
        match self {
            Server::Remote(addresses) => addresses.iter().map(String::as_str).collect(),
            Server::Local(server) => vec![server.address()],
            Server::Child { process, .. } => vec![process.address()],
        }
    }

    /// Where its CPU time and memory are read; none when it runs elsewhere.
    fn watched(&self) -> Option<Watched> {
        match self {
            Server::Remote(_) => None,
            Server::Local(_) => Some(Watched::InProcess),
            Server::Child { process, .. } => Some(Watched::Child(process.pid())),
        }
    }

    fn stop(self) {
        if let Server::Local(server) = self {
            server.stop();
        }
    }
}

/// The store the server of `options` will open in `data_dir`, opened by the bench to fill it.
async fn open_store(options: &BenchOptions, data_dir: &std::path::Path) -> Result<Arc<dyn Store>, String> {
    Ok(match &options.postgres {
        Some(postgres) => Arc::new(
            PgStore::connect(postgres)
                .await
                .map_err(|error| format!("cannot open the PostgreSQL store: {error}"))?,
        ),
        None => Arc::new(
            SledStore::open(&data_dir.join("store"))
                .map_err(|error| format!("cannot open the store: {error}"))?,
        ),
    })
}

/// Fills the wanted recall scenarios' resources where they are empty, and measures each one's
/// first search and recall@3 against an exact scan.
async fn prepare_recall(store: &dyn Store, options: &BenchOptions) -> Result<Report, String> {
    let mut report = Report::default();
    for scenario in
        scenarios::all(&options.recall_sizes).into_iter().filter(|scenario| options.wants(scenario))
    {
        let Some((resource, size)) = recall_resource(&scenario) else { continue };
        let filled = fill_once(store, &resource, size).await?;
        if scenario.id.ends_with("control") {
            continue;
        }
        let first_search = first_search(store, &resource).await?;
        eprintln!("{}: recall@3 against an exact scan ...", scenario.id);
        report.recall.push((scenario.id.clone(), recall_at(store, &resource, size, 3).await?));
        report.recall_loads.push(RecallLoad {
            scenario: scenario.id.clone(),
            size,
            filled,
            first_search,
            resident: None,
        });
    }
    Ok(report)
}

/// Fills `resource` with `size` messages unless it holds some; how long that took, if it did.
async fn fill_once(store: &dyn Store, resource: &str, size: usize) -> Result<Option<Duration>, String> {
    let seeded = store.list_threads(resource, "", 1).await.map_err(|error| error.to_string())?;
    if !seeded.threads.is_empty() {
        return Ok(None);
    }
    eprintln!("seeding {size} messages into {resource} ...");
    let started = Instant::now();
    fill(store, resource, size).await?;
    Ok(Some(started.elapsed()))
}

/// Runs the scenarios against `server`; `report` holds what preparing the recall resources cost.
async fn bench(
    options: &BenchOptions,
    server: &Server,
    beside: &Beside,
    mut report: Report,
) -> Result<Report, String> {
    let watched = server.watched();
    let mut channels = Vec::new();
    for address in server.addresses() {
        channels.push(crate::server::connect(address).await.map_err(|error| error.to_string())?);
        pass_through_instance(address, "remote-input", "remote-input-bench", pb::Hook::ProcessInput, None)
            .await?;
        let window = Some(32);
        pass_through_instance(
            address,
            "remote-window",
            "remote-window-bench",
            pb::Hook::ProcessOutputStream,
            window,
        )
        .await?;
    }
    let channel = channels[0].clone();
    let stream_floor = crate::server::connect(&beside.floor.0).await.map_err(|error| error.to_string())?;
    let started = watched.and_then(usage::resident).map(|(now, _)| now);
    let phases = Phases { warm_up: options.warm_up, measure: options.duration };
    for scenario in
        scenarios::all(&options.recall_sizes).into_iter().filter(|scenario| options.wants(scenario))
    {
        if watched.is_none() && (scenario.is_gateway() || recall_resource(&scenario).is_some()) {
            eprintln!(
                "{}: skipped (its fake provider or data serve only a server the bench starts)",
                scenario.id
            );
            continue;
        }
        prepare(&scenario, options, &channel).await?;
        if let Ask::UnaryFloor { agent } = scenario.ask {
            // The floor answers with what agentwire answered the same request.
            let answer = AgentServiceClient::new(channel.clone())
                .generate(scenarios::unary_floor_request(agent))
                .await
                .map_err(|status| format!("{}: {status}", scenario.id))?
                .into_inner();
            *beside.floor.1.write().unwrap_or_else(std::sync::PoisonError::into_inner) = answer;
        }
        for concurrency in options.concurrencies(&scenario) {
            eprintln!("{} at concurrency {concurrency} ...", scenario.id);
            let mut workers: Vec<Call> = Vec::with_capacity(concurrency);
            for index in 0..concurrency {
                let targets = Targets {
                    server: &channels[index % channels.len()],
                    floors: &stream_floor,
                    ping_floor: &beside.ping_floor,
                    fake_provider: watched.is_some().then_some(beside.fake_provider.as_str()),
                };
                workers.push(scenarios::worker(&scenario, &targets, index).await?);
            }
            let measured = measure(workers, phases, watched)
                .await
                .map_err(|error| format!("{}: {error}", scenario.id))?;
            report.rows.push(Row {
                scenario: scenario.id.clone(),
                what: scenario.what.clone(),
                concurrency,
                measured,
            });
        }
        if let Some(load) = report.recall_loads.iter_mut().find(|load| load.scenario == scenario.id) {
            load.resident = watched.and_then(usage::resident).map(|(now, _)| now);
        }
        if scenario.id == "S5" {
            report.aborted_runs = Some(aborted_runs_check(&report, &channel).await?);
        }
    }
    if let (Some(started), Some((ended, _))) = (started, watched.and_then(usage::resident)) {
        tokio::time::sleep(SETTLE).await;
        let settled = watched.and_then(usage::resident).map_or(ended, |(now, _)| now);
        let alone = matches!(server, Server::Child { .. });
        report.server_rss = Some(ServerRss { started, ended, settled, alone });
    }
    Ok(report)
}

/// The resource a recall scenario searches (`recall-<size>`) and its size.
fn recall_resource(scenario: &Scenario) -> Option<(String, usize)> {
    let Ask::Generate { threads: Threads::Each(resource), .. } = &scenario.ask else { return None };
    let size = resource.strip_prefix("recall-")?.parse().ok()?;
    Some((resource.clone(), size))
}

/// Seeds what `scenario` needs beyond the recall resources ([`prepare_recall`]): S2a's long
/// thread, grown past `long_thread` messages (each run adds two).
async fn prepare(
    scenario: &Scenario,
    options: &BenchOptions,
    channel: &tonic::transport::Channel,
) -> Result<(), String> {
    let Ask::Generate { threads: Threads::One(thread), agent, .. } = &scenario.ask else { return Ok(()) };
    let mut client = AgentServiceClient::new(channel.clone());
    for _ in 0..options.long_thread.div_ceil(2) {
        let request = pb::RunRequest {
            agent_id: (*agent).into(),
            text: "hello".into(),
            thread_id: thread.clone(),
            resource_id: "bench".into(),
            ..Default::default()
        };
        client.generate(request).await.map_err(|status| status.to_string())?;
    }
    Ok(())
}

/// S5's runs all tripped: none may have left a thread behind.
async fn aborted_runs_check(
    report: &Report,
    channel: &tonic::transport::Channel,
) -> Result<(usize, usize), String> {
    let runs = report.rows.iter().filter(|row| row.scenario == "S5").map(|row| row.measured.requests).sum();
    let request = pb::ListThreadsRequest {
        resource_id: "bench-aborted".into(),
        page_size: 1000,
        page_token: String::new(),
    };
    let threads = MemoryServiceClient::new(channel.clone())
        .list_threads(request)
        .await
        .map_err(|status| status.to_string())?
        .into_inner()
        .threads
        .len();
    Ok((runs, threads))
}

pub(super) fn micros(duration: Duration) -> String {
    let micros = duration.as_secs_f64() * 1e6;
    if micros >= 10_000.0 { format!("{:.1} ms", micros / 1000.0) } else { format!("{micros:.0} µs") }
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1_048_576.0)
}

/// The report as Markdown: the table, the derived figures and the targets.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| scenario | what | clients | req/s | p50 | p99 | first token p50 | server CPU / req | peak RSS |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for row in &report.rows {
        let measured = &row.measured;
        let cpu = measured
            .cpu_per_request()
            .map_or("–".to_owned(), |cpu| format!("{:.3} ms", cpu.as_secs_f64() * 1e3));
        let rss = measured.peak_rss.map_or("–".to_owned(), megabytes);
        let first_token = measured.first_token(0.5).map_or("–".to_owned(), micros);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {} | {} | {first_token} | {cpu} | {rss} |",
            row.scenario,
            row.what,
            row.concurrency,
            measured.rate(),
            micros(measured.percentile(0.5)),
            micros(measured.percentile(0.99)),
        );
    }
    let _ = writeln!(out);
    for line in derived(report) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

/// What a recall resource's fill and first search cost, and the memory once it was searched.
fn recall_load_line(load: &RecallLoad, verdict: impl Fn(bool) -> &'static str) -> String {
    let mut line = format!("{}:", load.scenario);
    if let Some(filled) = load.filled {
        let seconds = filled.as_secs_f64();
        let _ = write!(line, " filled in {seconds:.1} s ({:.0} messages/s);", load.size as f64 / seconds);
    }
    let first = load.first_search;
    let _ = write!(line, " first search (loads the index) {}", micros(first.took));
    if first.bystander_searches > 0 {
        let (searches, slowest) = (first.bystander_searches, micros(first.bystander_slowest));
        let _ = write!(line, ", meanwhile {searches} searches of another resource, the slowest {slowest}");
    }
    if let Some(resident) = load.resident {
        let _ = write!(line, "; RSS once searched {}", megabytes(resident));
        if load.size == 1_000_000 {
            let _ = write!(line, " (target ≤ 400 MB: {})", verdict(resident <= 400 * 1_048_576));
        }
    }
    line
}

/// Figures computed from the rows, at concurrency 1, with the targets.
fn derived(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    let p50 = |scenario: &str| report.row(scenario, 1).map(|row| row.measured.percentile(0.5));
    let cpu = |scenario: &str| report.row(scenario, 1).and_then(|row| row.measured.cpu_per_request());
    let per_chunk = |duration: Duration| duration.as_secs_f64() * 1e6 / STREAM_CHUNKS as f64;
    let verdict = |met: bool| if met { "met" } else { "**missed**" };
    if let Some(used) = cpu("S1") {
        let ms = used.as_secs_f64() * 1e3;
        let floor = cpu("S1 floor").map_or(String::new(), |floor| {
            format!(", next to {:.3} ms for the same bytes over bare tonic", floor.as_secs_f64() * 1e3)
        });
        lines.push(format!(
            "S1 server CPU per request: {ms:.3} ms{floor} (target ≤ 0.07 ms: {})",
            verdict(ms <= 0.07)
        ));
    }
    for scenario in ["S2a", "S2b"] {
        if let Some(cpu) = cpu(scenario) {
            let ms = cpu.as_secs_f64() * 1e3;
            lines.push(format!(
                "{scenario} server CPU per request, durable writes: {ms:.3} ms (target < 1 ms: {})",
                verdict(ms < 1.0)
            ));
        }
        if let Some(row) = report.row(scenario, 32) {
            let rate = row.measured.rate();
            lines.push(format!(
                "{scenario} at 32 clients: {rate:.0} durable runs/s (target ≥ 5,000: {})",
                verdict(rate >= 5000.0)
            ));
        }
    }
    if let (Some(bare), Some(passed)) = (p50("S4"), p50("S4+p")) {
        let added = per_chunk(passed.saturating_sub(bare));
        lines.push(format!(
            "S4: {:.2} µs per chunk; a pass-through processOutputStream adds {added:.2} µs per chunk (target ≤ 0.3 µs: {})",
            per_chunk(bare),
            verdict(added <= 0.3)
        ));
    }
    if let Some(floor) = p50("S4 floor") {
        lines.push(format!("S4 floor: {:.2} µs per chunk over bare tonic", per_chunk(floor)));
    }
    if let Some(aborted) = p50("S5") {
        let ms = aborted.as_secs_f64() * 1e3;
        lines.push(format!("S5 p50: {ms:.3} ms (target < 0.3 ms: {})", verdict(ms < 0.3)));
    }
    if let Some((runs, threads)) = report.aborted_runs {
        lines.push(format!("S5: {runs} aborted runs left {threads} threads in the store (must be 0)"));
    }
    for row in report.rows.iter().filter(|row| {
        row.concurrency == 1 && row.scenario.starts_with("S6 ") && !row.scenario.ends_with("control")
    }) {
        let ms = row.measured.percentile(0.5).as_secs_f64() * 1e3;
        let target = if row.scenario.ends_with(" 100000") {
            format!(" (target ≤ 2 ms: {})", verdict(ms <= 2.0))
        } else if row.scenario.ends_with(" 1000000") {
            format!(" (target ≤ 10 ms: {})", verdict(ms <= 10.0))
        } else {
            String::new()
        };
        lines.push(format!("{} p50: {ms:.2} ms{target}", row.scenario));
    }
    for (scenario, recall) in &report.recall {
        let target = if scenario.ends_with(" 100000") || scenario.ends_with(" 1000000") {
            format!(" (target ≥ 0.95: {})", verdict(*recall >= 0.95))
        } else {
            String::new()
        };
        lines.push(format!(
            "{scenario} recall@3 against an exact scan: {recall:.3} over {RECALL_QUERIES} new sentences{target}"
        ));
    }
    for load in &report.recall_loads {
        lines.push(recall_load_line(load, verdict));
    }
    if let (Some(plain), Some(remote), Some(floor)) = (p50("S1"), p50("R1"), p50("R1 floor")) {
        let added = remote.saturating_sub(plain);
        lines.push(format!(
            "R1: a blocking remote processInput adds {} at p50, next to a {} floor round trip: {:.2}×",
            micros(added),
            micros(floor),
            added.as_secs_f64() / floor.as_secs_f64()
        ));
    }
    if let (Some(bare), Some(guarded)) = (p50("S4"), p50("R2")) {
        lines.push(format!(
            "R2: a windowed remote stream guard adds {:.2} µs per chunk",
            per_chunk(guarded.saturating_sub(bare))
        ));
    }
    lines.extend(gateway::derived(report));
    if let Some(idle) = report.idle_server_rss {
        lines.push(format!(
            "Idle RSS of `agentwire serve` alone, a second after start: {} (target ≤ 20 MB: {})",
            megabytes(idle),
            verdict(idle <= 20 * 1_048_576)
        ));
    }
    if let Some(rss) = report.server_rss {
        let whose = if rss.alone {
            "`agentwire serve`"
        } else {
            "the bench's process (its server, clients, floors and fake provider)"
        };
        lines.push(format!(
            "RSS of {whose}: {} before the first scenario, {} as the last one ended, {} {} s later \
             (target after the bench ≤ 200 MB: {})",
            megabytes(rss.started),
            megabytes(rss.ended),
            megabytes(rss.settled),
            SETTLE.as_secs(),
            verdict(rss.settled <= 200 * 1_048_576)
        ));
    }
    lines
}
