//! The load: `concurrency` workers, each calling its scenario's request back to back — first for
//! a warm-up, then for the measured duration — and what that cost.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::fake_provider::Arrivals;
use super::usage::{Cpu, Watched, reset_peak, resident};

/// One worker's request: called again as soon as it returns, with what a stream's tokens did
/// (nothing for a request that streams none). `Err` stops the bench and says why.
pub(super) type Call = Box<dyn FnMut() -> BoxFuture<'static, Result<Arrivals, String>> + Send>;

/// The name of the bench's client threads; every other thread's CPU time is the server's.
pub(super) const CLIENT_THREADS: &str = "aw-bench-client";

/// How long to load.
#[derive(Debug, Clone, Copy)]
pub(super) struct Phases {
    pub(super) warm_up: Duration,
    pub(super) measure: Duration,
}

/// What a measured phase cost.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Requests completed.
    pub requests: usize,
    /// How long the phase took.
    pub elapsed: Duration,
    /// Each request's latency, sorted.
    pub latencies: Vec<Duration>,
    /// Each streamed request's time to its first token, sorted (empty when none streamed).
    pub first_tokens: Vec<Duration>,
    /// Tokens streamed.
    pub tokens: usize,
    /// Gaps between two arrivals of one stream longer than `super::fake_provider::STALL`.
    pub stalls: usize,
    /// CPU time of everything but the bench's client (the server, and the floors and fake
    /// provider), when the server runs on this machine.
    pub server_cpu: Option<Duration>,
    /// Peak resident memory of the server's process during the phase, in bytes.
    pub peak_rss: Option<u64>,
}

impl Measured {
    /// Completed requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency below which `quantile` of the requests finished.
    pub fn percentile(&self, quantile: f64) -> Duration {
        quantile_of(&self.latencies, quantile)
    }

    /// The time to first token below which `quantile` of the streamed requests had theirs.
    pub fn first_token(&self, quantile: f64) -> Option<Duration> {
        (!self.first_tokens.is_empty()).then(|| quantile_of(&self.first_tokens, quantile))
    }

    /// Server CPU time per request.
    pub fn cpu_per_request(&self) -> Option<Duration> {
        let requests = u32::try_from(self.requests.max(1)).unwrap_or(u32::MAX);
        self.server_cpu.map(|cpu| cpu / requests)
    }
}

/// The value below which `quantile` of `sorted` lies (zero when empty).
fn quantile_of(sorted: &[Duration], quantile: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * quantile).round() as usize]
}

/// What the workers of one phase saw.
#[derive(Debug, Default)]
struct Seen {
    latencies: Vec<Duration>,
    first_tokens: Vec<Duration>,
    tokens: usize,
    stalls: usize,
}

impl Seen {
    fn add(&mut self, latency: Duration, arrivals: Arrivals) {
        self.latencies.push(latency);
        self.first_tokens.extend(arrivals.first_token);
        self.tokens += arrivals.tokens;
        self.stalls += arrivals.stalls as usize;
    }

    fn extend(&mut self, other: Seen) {
        self.latencies.extend(other.latencies);
        self.first_tokens.extend(other.first_tokens);
        self.tokens += other.tokens;
        self.stalls += other.stalls;
    }
}

/// Runs `workers` until `deadline`; gives them back with what they saw.
async fn drive(workers: Vec<Call>, deadline: Instant) -> Result<(Vec<Call>, Seen), String> {
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|mut call| {
            tokio::spawn(async move {
                let mut seen = Seen::default();
                while Instant::now() < deadline {
                    let start = Instant::now();
                    let arrivals = call().await?;
                    seen.add(start.elapsed(), arrivals);
                }
                Ok::<_, String>((call, seen))
            })
        })
        .collect();
    let mut workers = Vec::with_capacity(tasks.len());
    let mut seen = Seen::default();
    for task in tasks {
        let (call, theirs) = task.await.map_err(|error| format!("a worker panicked: {error}"))??;
        workers.push(call);
        seen.extend(theirs);
    }
    Ok((workers, seen))
}

/// Warms `workers` up, then measures them for `phases.measure`; the server's CPU time and memory
/// are read where it is `watched` (not when it runs elsewhere).
pub(super) async fn measure(
    workers: Vec<Call>,
    phases: Phases,
    watched: Option<Watched>,
) -> Result<Measured, String> {
    let (workers, _) = drive(workers, Instant::now() + phases.warm_up).await?;
    let before = watched.and_then(|watched| Cpu::now(CLIENT_THREADS, watched));
    if let Some(watched) = watched {
        reset_peak(watched);
    }
    let start = Instant::now();
    let (_, mut seen) = drive(workers, start + phases.measure).await?;
    let elapsed = start.elapsed();
    let after = watched.and_then(|watched| Cpu::now(CLIENT_THREADS, watched));
    seen.latencies.sort();
    seen.first_tokens.sort();
    let server_cpu = match (before, after) {
        (Some(before), Some(after)) => Some(after.server_since(before)),
        _ => None,
    };
    let peak_rss = watched.and_then(resident).map(|(_, peak)| peak);
    Ok(Measured {
        requests: seen.latencies.len(),
        elapsed,
        latencies: seen.latencies,
        first_tokens: seen.first_tokens,
        tokens: seen.tokens,
        stalls: seen.stalls,
        server_cpu,
        peak_rss,
    })
}
