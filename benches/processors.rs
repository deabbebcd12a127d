//! Stream processors on the hot path: the cost of `processOutputStream` per text delta that
//! matches nothing, for each built-in stream processor, called in-process as the run loop calls
//! it (hook context, state, the chunks seen so far; a window at a time for windowed ones).
//! `cargo bench --bench processors` (add `-- --quick` for a smoke run; `cargo test` runs the
//! smoke run).

use std::time::{Duration, Instant};

mod common;

use common::{median, quick};

use agentwire::domain::{Chunk, MessageList, RunInfo};
use agentwire::processor::{HookContext, OutputStreamArgs, OutputWindowArgs, ProcessorRegistry};
use serde_json::Map;

const WORDS: &[&str] =
    &[" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", " today."];

const INSTRUCTIONS: &str = "You are the support agent of Acme Corporation. Answer politely and briefly, \
                            never reveal internal discount codes, and escalate billing disputes. ";

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let quick = quick();
    let (rounds, per_round) = if quick { (3, 200) } else { (31, 20_000) };
    let registry = ProcessorRegistry::with_builtins();
    let table = |source: &str| -> toml::Table { source.parse().expect("valid options") };
    let processors = [
        ("content-filter", table("blocked_words = [\"secret\", \"password\"]")),
        ("word-counter", toml::Table::new()),
        ("pii-detector", toml::Table::new()),
        ("regex-filter", table("patterns = [{ name = \"order\", pattern = \"order-[0-9]{4}\" }]")),
        ("token-limiter", table("output_limit = 1_000_000_000")),
        ("system-prompt-scrubber", toml::Table::new()),
        ("batch-parts", toml::Table::new()),
    ];
    let run = RunInfo::default();
    // The run's system prompt, for `system-prompt-scrubber`: 120 words.
    let mut list = MessageList::new();
    list.add_system(INSTRUCTIONS.repeat(6));
    println!("| stream processor | ns per text delta (median of {rounds} rounds × {per_round}) |");
    println!("|---|---|");
    for (kind, options) in processors {
        let processor = registry.build(kind, kind, options).expect("builds");
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            // A fresh run each round: its state and seen chunks start empty, as in a real run.
            let mut state = Map::new();
            let (mut emitted, mut skipped) = (Vec::new(), Vec::new());
            let mut seen: Vec<Chunk> = Vec::with_capacity(per_round);
            let start = Instant::now();
            match processor.stream_window(&run) {
                // A windowed processor gets the chunks as the runtime hands them over: a window
                // at a time.
                Some(window) => {
                    for first in (0..per_round).step_by(window.max_chunks) {
                        let parts: Vec<Chunk> = (first..(first + window.max_chunks).min(per_round))
                            .map(|index| Chunk::TextDelta {
                                id: "m".into(),
                                text: WORDS[index % WORDS.len()].into(),
                            })
                            .collect();
                        seen.extend(parts.iter().cloned());
                        let args = OutputWindowArgs {
                            ctx: HookContext::new(&run, &mut state, 0, &mut emitted, &mut skipped),
                            parts,
                            stream_parts: &seen,
                            message_list: &list,
                            answered: None,
                        };
                        std::hint::black_box(processor.process_output_window(args).await.expect("passes"));
                    }
                }
                None => {
                    for index in 0..per_round {
                        let part =
                            Chunk::TextDelta { id: "m".into(), text: WORDS[index % WORDS.len()].into() };
                        seen.push(part.clone());
                        let args = OutputStreamArgs {
                            ctx: HookContext::new(&run, &mut state, 0, &mut emitted, &mut skipped),
                            part,
                            stream_parts: &seen,
                            message_list: &list,
                        };
                        std::hint::black_box(processor.process_output_stream(args).await.expect("passes"));
                    }
                }
            }
            samples.push(start.elapsed() / u32::try_from(per_round).unwrap());
        }
        println!("| `{kind}` | {} |", median(&mut samples).as_nanos());
    }
    hook_histogram(rounds, per_round * 10);
}

/// What recording one hook call's duration costs: looked up in the registry by its labels on
/// every call, or resolved once (as a run does for each processor's hooks).
fn hook_histogram(rounds: usize, per_round: usize) {
    let metrics = agentwire::telemetry::metrics::Metrics::default();
    let labels = [("processor", "pass-through"), ("hook", "processOutputStream")];
    let name = &agentwire::telemetry::metrics::HOOK_DURATION;
    let time = |observe: &dyn Fn(Duration)| {
        let mut samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let start = Instant::now();
                for index in 0..per_round {
                    observe(Duration::from_nanos(index as u64 % 5_000));
                }
                start.elapsed() / u32::try_from(per_round).unwrap()
            })
            .collect();
        median(&mut samples).as_nanos()
    };
    let looked_up = time(&|elapsed| metrics.observe(name, &labels, elapsed));
    let resolved = metrics.histogram(name, &labels);
    let once = time(&|elapsed| resolved.observe(elapsed));
    println!();
    println!("| recording a hook call's duration | ns per call (median of {rounds} rounds × {per_round}) |");
    println!("|---|---|");
    println!("| looked up by its labels | {looked_up} |");
    println!("| resolved once per run | {once} |");
}
