//! The load soak behind `scripts/soak-load`: the real binary under minutes of mixed load — memory
//! runs over many resources and threads, working-memory overwrites, deletes that keep the live
//! data steady, 1,000 streaming clients that stop reading a long answer (each cut off after
//! `slow_client_ms`, then back with a new stream), remote processors that come and go — with the
//! server's resident memory and data directory measured against the live data each interval.
//!
//! `cargo run --release --example soak_load -- <agentwire binary> <minutes>` (`SOAK_STALLED=N`:
//! that many stalled clients instead of 1,000; 0: none)

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentwire::bench::{pass_through_instance, resident_of};
use agentwire::server::pb;
use agentwire::server::pb::agent_service_client::AgentServiceClient;
use agentwire::server::pb::memory_service_client::MemoryServiceClient;
use agentwire::storage::directory_bytes;
use tonic::transport::Channel;

const CONFIG: &str = r##"
[limits]
slow_client_ms = 1000
# The stalled clients hold up to a thousand runs at once; the memory runs must still find slots.
max_concurrent_runs = 2048

[processors.churn]
kind = "remote"
timeout_ms = 2000
on_failure = "open"

[[agents]]
id = "soak"
model = "mock/echo"
input_processors = ["churn"]
memory = { last_messages = 10, semantic_recall = { top_k = 2 }, working_memory = { scope = "resource", template = "# Notes\n" } }
"##;

/// Streaming clients that never read, at once, and the connections they share.
const STALLED: u64 = 1000;
const STALLED_CONNECTIONS: u64 = 20;
/// Words of the answer they never read: far more than the buffers between a run and a client.
const LONG_ANSWER_WORDS: usize = 50_000;

/// Resources the load spreads over, and threads each keeps alive (older ones are deleted).
const RESOURCES: u64 = 50;
const LIVE_THREADS: u64 = 4;
/// Runs per thread before the worker moves to a new one.
const RUNS_PER_THREAD: u64 = 10;
/// Memory-run workers.
const WORKERS: u64 = 8;
/// How often the figures are printed.
const INTERVAL: Duration = Duration::from_secs(15);

#[derive(Default)]
struct Counts {
    runs: AtomicU64,
    failures: AtomicU64,
    deletes: AtomicU64,
    working_memory: AtomicU64,
    stalled: AtomicU64,
    sessions: AtomicU64,
}

fn text(worker: u64, run: u64) -> String {
    format!("worker {worker} run {run}: {}", "the quick brown fox jumps over the lazy dog ".repeat(8))
}

/// Memory runs: each worker cycles through threads of its resources, deleting a thread once it
/// is `LIVE_THREADS` behind, so that the live data stays about constant.
async fn memory_runs(channel: Channel, worker: u64, counts: Arc<Counts>, until: Instant) {
    let mut agents = AgentServiceClient::new(channel.clone());
    let mut memory = MemoryServiceClient::new(channel);
    let mut run = 0u64;
    while Instant::now() < until {
        let generation = run / RUNS_PER_THREAD;
        let resource = format!("resource-{}", (worker * 7 + generation) % RESOURCES);
        let thread = format!("w{worker}-t{generation}");
        let request = pb::RunRequest {
            agent_id: "soak".into(),
            text: text(worker, run),
            thread_id: thread,
            resource_id: resource,
            ..Default::default()
        };
        match agents.generate(request).await {
            Ok(response) if response.get_ref().error.is_none() => counts.runs.fetch_add(1, Ordering::Relaxed),
            _ => counts.failures.fetch_add(1, Ordering::Relaxed),
        };
        run += 1;
        if run.is_multiple_of(RUNS_PER_THREAD) && generation >= LIVE_THREADS {
            let old = generation - LIVE_THREADS;
            let delete = pb::DeleteThreadRequest {
                thread_id: format!("w{worker}-t{old}"),
                resource_id: format!("resource-{}", (worker * 7 + old) % RESOURCES),
            };
            if memory.delete_thread(delete).await.is_ok() {
                counts.deletes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Overwrites resources' working memory with documents of varying size.
async fn working_memory(channel: Channel, counts: Arc<Counts>, until: Instant) {
    let mut memory = MemoryServiceClient::new(channel);
    let mut round = 0u64;
    while Instant::now() < until {
        let content = format!("# Notes\n{}", "- a remembered fact\n".repeat(100 + (round % 400) as usize));
        let request = pb::UpdateWorkingMemoryRequest {
            scope: Some(pb::WorkingMemoryScope {
                scope: Some(pb::working_memory_scope::Scope::ResourceId(format!(
                    "resource-{}",
                    round % RESOURCES
                ))),
            }),
            content,
            expected_version: None,
            resource_id: String::new(),
        };
        if memory.update_working_memory(request).await.is_ok() {
            counts.working_memory.fetch_add(1, Ordering::Relaxed);
        }
        round += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client that never reads a long answer: its stream holds its run until the server cuts it
/// off (`slow_client_ms`); three seconds later it starts another.
async fn stalled_client(channel: Channel, counts: Arc<Counts>, until: Instant) {
    let mut agents = AgentServiceClient::new(channel);
    while Instant::now() < until {
        let request = pb::RunRequest { agent_id: "talker".into(), text: "talk".into(), ..Default::default() };
        match agents.stream(request).await {
            Ok(stream) => {
                counts.stalled.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(3)).await;
                drop(stream);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A remote processor that answers every call with `continue`, for `life`, then hangs up.
async fn processor_session(address: String, index: u64, life: Duration) {
    let instance = format!("churn-{index}");
    if let Ok(session) =
        pass_through_instance(&address, "churn", &instance, pb::Hook::ProcessInput, None).await
    {
        tokio::time::sleep(life).await;
        session.abort();
    }
}

/// Two processor instances at a time, each living a few seconds, replaced as they go.
async fn processor_churn(address: String, counts: Arc<Counts>, until: Instant) {
    let mut index = 0;
    while Instant::now() < until {
        let sessions: Vec<_> = (0..2)
            .map(|offset| {
                index += 1;
                tokio::spawn(processor_session(
                    address.clone(),
                    index,
                    Duration::from_millis(2000 + offset * 1500),
                ))
            })
            .collect();
        counts.sessions.fetch_add(2, Ordering::Relaxed);
        for session in sessions {
            let _ = session.await;
        }
    }
}

/// The live messages: every thread's, listed through the memory API.
async fn live_messages(channel: Channel) -> (u64, u64) {
    let mut memory = MemoryServiceClient::new(channel);
    let (mut messages, mut bytes) = (0u64, 0u64);
    for resource in 0..RESOURCES {
        let list = pb::ListThreadsRequest {
            resource_id: format!("resource-{resource}"),
            page_size: 1000,
            ..Default::default()
        };
        let Ok(threads) = memory.list_threads(list).await else { continue };
        for thread in threads.into_inner().threads {
            let list = pb::ListMessagesRequest {
                thread_id: thread.id,
                resource_id: thread.resource_id,
                page_size: 1000,
                ..Default::default()
            };
            if let Ok(page) = memory.list_messages(list).await {
                for message in page.into_inner().messages {
                    messages += 1;
                    bytes += prost::Message::encoded_len(&message) as u64;
                }
            }
        }
    }
    (messages, bytes)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let binary = args.next().expect("usage: soak_load <agentwire binary> <minutes>");
    let minutes: f64 = args.next().and_then(|minutes| minutes.parse().ok()).unwrap_or(3.0);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agentwire.toml");
    let talker = format!(
        "\n[[agents]]\nid = \"talker\"\nmodel = \"mock/script\"\nscript = [{{ text = \"{}\" }}]\n",
        "word ".repeat(LONG_ANSWER_WORDS)
    );
    std::fs::write(&config, format!("{CONFIG}{talker}")).unwrap();
    let data = dir.path().join("data");
    let mut server = Command::new(&binary)
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary starts");
    let mut ready = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    let addr = ready.trim().strip_prefix("agentwire listening on ").expect("the ready line").to_owned();
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();

    let started = Instant::now();
    let until = started + Duration::from_secs_f64(minutes * 60.0);
    let counts = Arc::new(Counts::default());
    let mut load = Vec::new();
    for worker in 0..WORKERS {
        load.push(tokio::spawn(memory_runs(channel.clone(), worker, Arc::clone(&counts), until)));
    }
    load.push(tokio::spawn(working_memory(channel.clone(), Arc::clone(&counts), until)));
    // `SOAK_STALLED=0` leaves them out, to tell what they cost the rest.
    let stalled: u64 =
        std::env::var("SOAK_STALLED").ok().and_then(|count| count.parse().ok()).unwrap_or(STALLED);
    for _ in 0..STALLED_CONNECTIONS.min(stalled) {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
        let channel = endpoint.connect().await.unwrap();
        for _ in 0..stalled / STALLED_CONNECTIONS {
            load.push(tokio::spawn(stalled_client(channel.clone(), Arc::clone(&counts), until)));
        }
    }
    load.push(tokio::spawn(processor_churn(addr.clone(), Arc::clone(&counts), until)));

    println!(
        "| minute | runs | failed | deletes | working-memory writes | stalled streams | processor sessions | live messages | live MiB | data dir MiB | RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let report = |live: (u64, u64)| {
        let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
        println!(
            "| {:.1} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.0} |",
            started.elapsed().as_secs_f64() / 60.0,
            counts.runs.load(Ordering::Relaxed),
            counts.failures.load(Ordering::Relaxed),
            counts.deletes.load(Ordering::Relaxed),
            counts.working_memory.load(Ordering::Relaxed),
            counts.stalled.load(Ordering::Relaxed),
            counts.sessions.load(Ordering::Relaxed),
            live.0,
            mib(live.1),
            mib(directory_bytes(&data)),
            resident_of(server.id()).map_or(0.0, mib),
        );
    };
    while Instant::now() < until {
        tokio::time::sleep(INTERVAL.min(until.saturating_duration_since(Instant::now()))).await;
        report(live_messages(channel.clone()).await);
    }
    for task in load {
        let _ = task.await;
    }
    report(live_messages(channel.clone()).await);
    let _ = server.kill();
    let _ = server.wait();
}
