//! Memory benchmarks: history load, semantic recall, durable run saves, run records' writes and
//! figures over them (`GetStats`), on the sled store in a temporary directory.
//! `cargo bench --bench memory` (add `-- --quick` for a smoke run; `cargo test` runs the smoke
//! run).
//!
//! Every figure is a median (p50) or a rate measured in this one process, side by side.

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use common::{micros, percentile, quick};

use agentwire::bench::{fill, process_cpu, sentence};
use agentwire::domain::{
    FinishReason, Hook, HookCallRecord, HookDecision, Message, ModelCallRecord, Part, Role, RunOutcome,
    RunRecord, RunStats, TimelineEntry, Usage, buckets, new_id, now_millis,
};
use agentwire::memory::embedder::{Embedder, Lexical};
use agentwire::storage::{EmbeddingRecord, RecallScope, RunFilter, RunSave, SledStore, Store, VectorQuery};

fn message(role: Role, text: String) -> Message {
    Message::new(role, vec![Part::text(text)])
}

async fn history_load(store: &SledStore, iterations: usize) {
    let messages: Vec<Message> = (0..10_000).map(|index| message(Role::User, sentence(index))).collect();
    for chunk in messages.chunks(1000) {
        let save = RunSave {
            thread_id: "long".into(),
            resource_id: "history".into(),
            messages: chunk.to_vec(),
            embeddings: Vec::new(),
            working_memory: None,
            quota: Default::default(),
        };
        store.save_run(save).await.unwrap();
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        let loaded = store.last_messages("history", "long", 10).await.unwrap();
        samples.push(start.elapsed());
        assert_eq!(loaded.len(), 10);
    }
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    println!("| history load: last 10 of a 10,000-message thread | {} | {} |", micros(p50), micros(p99));
}

/// The recall path of a run: embed the query, search the resource, fetch the hits' neighbours.
async fn recall(store: &SledStore, resource: &str, count: usize, iterations: usize) {
    fill(store, resource, count).await.unwrap();
    let embedder = Lexical::new();
    let mut samples = Vec::with_capacity(iterations);
    for iteration in 0..=iterations {
        let start = Instant::now();
        let query = VectorQuery {
            scope: RecallScope::Resource(resource.into()),
            embedder: embedder.id().to_owned(),
            vector: embedder.embed(&[sentence(1_000_000 + iteration as u64)]).await.unwrap().remove(0),
            top_k: 4,
            threshold: None,
        };
        let hits = store.search(query).await.unwrap();
        for hit in &hits {
            store.messages_around(resource, &hit.thread_id, &[hit.seq], 1, 1).await.unwrap();
        }
        // The first search loads the resource's vectors into memory; it is not a sample.
        if iteration > 0 {
            samples.push(start.elapsed());
        }
    }
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    println!(
        "| recall (top 4, neighbours 1), resource of {count} messages | {} | {} |",
        micros(p50),
        micros(p99)
    );
}

/// Durable run saves per second: each save is a user message and an answer with embeddings.
async fn durable_saves(store: Arc<SledStore>, concurrency: usize, duration: Duration) {
    let deadline = Instant::now() + duration;
    let workers: Vec<_> = (0..concurrency)
        .map(|worker| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut saves = 0u64;
                while Instant::now() < deadline {
                    let messages = vec![
                        message(Role::User, sentence(saves)),
                        message(Role::Assistant, sentence(saves + 1)),
                    ];
                    let embeddings = messages
                        .iter()
                        .map(|message| EmbeddingRecord {
                            message_id: message.id.clone(),
                            embedder: "lexical-v1".into(),
                            vector: Lexical::embed_one(&message.text()),
                        })
                        .collect();
                    let save = RunSave {
                        thread_id: format!("saver-{concurrency}-{worker}"),
                        resource_id: "savers".into(),
                        messages,
                        embeddings,
                        working_memory: None,
                        quota: Default::default(),
                    };
                    store.save_run(save).await.unwrap();
                    saves += 1;
                }
                saves
            })
        })
        .collect();
    let mut total = 0;
    for worker in workers {
        total += worker.await.unwrap();
    }
    let rate = total as f64 / duration.as_secs_f64();
    println!("| durable run saves, concurrency {concurrency} | {rate:.0} saves/s | |");
}

/// The record of a run like the bench's S3: a model call and three pass-through hooks.
fn run_record(index: u64) -> RunRecord {
    let usage = Usage { input_tokens: 12, output_tokens: 50 };
    let hook = |processor: &str, hook: Hook, step: Option<u32>, at_us: u64| {
        TimelineEntry::Hook(HookCallRecord {
            processor_id: processor.to_owned(),
            hook,
            step,
            retry_count: 0,
            instance_id: None,
            at_us,
            duration_us: 3,
            calls: if hook == Hook::ProcessOutputStream { 12 } else { 1 },
            max_us: 2,
            decision: HookDecision::Continue,
        })
    };
    RunRecord {
        run_id: new_id(),
        agent_id: "s3".into(),
        thread_id: format!("thread-{}", index % 100),
        resource_id: "records".into(),
        key_name: "default".into(),
        started_at: now_millis(),
        ended_at: now_millis(),
        outcome: RunOutcome::Finished,
        finish_reason: FinishReason::Stop,
        usage,
        tripwire: None,
        error: None,
        timeline: vec![
            hook("pass-input", Hook::ProcessInput, None, 10),
            TimelineEntry::Model(ModelCallRecord {
                model: "mock/script".into(),
                step: 0,
                at_us: 20,
                duration_us: 40,
                first_token_us: Some(12),
                usage,
                from_cache: false,
                error: None,
            }),
            hook("pass-stream", Hook::ProcessOutputStream, Some(0), 25),
            hook("pass-result", Hook::ProcessOutputResult, None, 70),
        ],
        content: None,
    }
}

/// What writing a run's record costs the process, in the batches the runtime's writer writes.
async fn record_writes(store: &SledStore, records: usize) {
    const BATCH: usize = 256;
    let batches: Vec<Vec<RunRecord>> =
        (0..records as u64).map(run_record).collect::<Vec<_>>().chunks(BATCH).map(<[_]>::to_vec).collect();
    let cpu_now = || process_cpu().expect("/proc tells this process's CPU time");
    let (cpu, start) = (cpu_now(), Instant::now());
    for batch in batches {
        store.save_run_records(batch).await.unwrap();
    }
    let wall = start.elapsed().as_secs_f64() * 1e6 / records as f64;
    let cpu = (cpu_now() - cpu).as_secs_f64() * 1e6 / records as f64;
    println!("| run records written in batches of {BATCH}, per record | {wall:.1} µs ({cpu:.1} µs CPU) | |");
}

/// What `GetStats` costs over the newest 10,000 runs: the first call reads every record, later
/// calls (the console polls with a moving window) count the tallies the store kept.
async fn stats_over_runs(store: &SledStore, iterations: usize) {
    const RUNS: usize = 10_000;
    let filter = RunFilter::default();
    let stats = || async {
        let start = Instant::now();
        let tallies = store.run_tallies(&filter, RUNS + 1).await.unwrap();
        let counted = tallies[..RUNS].iter().map(Arc::as_ref);
        let stats = RunStats::of(counted.clone());
        let buckets = buckets(counted, 60_000);
        assert_eq!(stats.runs, RUNS as u64);
        assert!(!buckets.is_empty());
        start.elapsed()
    };
    let first = stats().await;
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        samples.push(stats().await);
    }
    println!("| GetStats over 10,000 runs with buckets: first call | {} | |", micros(first));
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    println!("| GetStats over 10,000 runs with buckets: later calls | {} | {} |", micros(p50), micros(p99));
}

#[tokio::main]
async fn main() {
    let quick = quick();
    let (iterations, large, window) = if quick {
        (50, 10_000, Duration::from_millis(300))
    } else {
        (2000, 100_000, Duration::from_secs(3))
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SledStore::open(dir.path()).unwrap());
    println!("| scenario | p50 (or rate) | p99 |");
    println!("|---|---|---|");
    history_load(&store, iterations).await;
    recall(&store, "r10k", 10_000, iterations).await;
    if !quick {
        recall(&store, "r100k", large, iterations / 4).await;
    }
    durable_saves(Arc::clone(&store), 1, window).await;
    durable_saves(Arc::clone(&store), 32, window).await;
    record_writes(&store, if quick { 10_001 } else { 100_000 }).await;
    stats_over_runs(&store, if quick { 5 } else { 50 }).await;
}
