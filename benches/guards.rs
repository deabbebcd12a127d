//! What a typical guard pipeline adds to a run, in process, away from any transport: G3's four
//! guards (`unicode-normalizer`, `pii-detector` and `prompt-injection-detector` on the input,
//! `pii-detector` on the stream) on G3's run — "hello" in, a 20-token answer streamed — against
//! the same run without them. The two agents' runs alternate, so a noisy machine slows both
//! alike; the figure is the median of the paired differences. `cargo bench --bench guards` (add
//! `-- --quick` for a smoke run; `cargo test` runs the smoke run).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentwire::bench::{G3_PIPELINE, G3_PROCESSORS, GATEWAY_TOKENS};
use agentwire::config::Config;
use agentwire::domain::{FinishReason, Message, Part, Role};
use agentwire::runtime::{ChunkSink, Components, RunRequest, Runtime};
use common::{median, micros, quick};

// The server's allocator, so the figures are the server's.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The two agents, on G3's answer as `mock/script` streams it (word by word, ` w0` … ` w19`):
/// one with G3's pipeline, one without.
fn config() -> String {
    let words: Vec<String> = (0..GATEWAY_TOKENS).map(|index| format!("w{index}")).collect();
    let script = format!("script = [{{ text = \"{}\" }}]", words.join(" "));
    format!(
        r#"{G3_PROCESSORS}
[[agents]]
id = "plain"
model = "mock/script"
{script}

[[agents]]
id = "guarded"
model = "mock/script"
{script}
{G3_PIPELINE}
"#
    )
}

/// One run of `agent` on "hello", timed from its request to its result.
async fn timed_run(runtime: &Arc<Runtime>, agent: &str) -> Duration {
    let request = RunRequest {
        agent_id: agent.to_owned(),
        messages: vec![Message::new(Role::User, vec![Part::text("hello")])],
        ..RunRequest::default()
    };
    let started = Instant::now();
    let run = runtime.prepare(request).await.expect("the request is valid");
    let result = run.execute(ChunkSink::discard()).await;
    let took = started.elapsed();
    assert_eq!(result.finish_reason, FinishReason::Stop, "{agent}: {:?}", result.error);
    let last = format!("w{}", GATEWAY_TOKENS - 1);
    assert!(result.text.ends_with(&last), "{agent} answered {:?}", result.text);
    took
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (warm_up, pairs) = if quick() { (20, 50) } else { (2_000, 20_000) };
    let config = Config::parse(&config()).expect("the bench's config is valid");
    let runtime = Arc::new(Runtime::new(&config, Components::builtin()).expect("the bench's agents build"));
    for _ in 0..warm_up {
        timed_run(&runtime, "plain").await;
        timed_run(&runtime, "guarded").await;
    }
    let (mut plain, mut guarded, mut added) = (Vec::new(), Vec::new(), Vec::new());
    for pair in 0..pairs {
        // Each agent goes first in every other pair, so neither always runs on a warmer cache.
        let guarded_first = pair % 2 == 1;
        let (without, with) = if guarded_first {
            let with = timed_run(&runtime, "guarded").await;
            (timed_run(&runtime, "plain").await, with)
        } else {
            let without = timed_run(&runtime, "plain").await;
            (without, timed_run(&runtime, "guarded").await)
        };
        plain.push(without);
        guarded.push(with);
        added.push(with.saturating_sub(without));
    }
    println!("| G3's run in process ({pairs} pairs, alternated) | median |");
    println!("|---|---:|");
    println!("| without guards | {} |", micros(median(&mut plain)));
    println!("| with G3's four guards | {} |", micros(median(&mut guarded)));
    println!("| what the guards add (median of the pairs' differences) | {} |", micros(median(&mut added)));
}
