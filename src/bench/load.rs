//! The load: `concurrency` workers, each calling its scenario's request back to back — first for
//! a warm-up, then for the measured duration — and what that cost.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::usage::{Cpu, reset_peak, resident};

/// One worker's request: called again as soon as it returns. `Err` stops the bench and says why.
pub(super) type Call = Box<dyn FnMut() -> BoxFuture<'static, Result<(), String>> + Send>;

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
    /// CPU time of everything but the bench's client, when the server runs in this process.
    pub server_cpu: Option<Duration>,
    /// Peak resident memory of the process during the phase, in bytes.
    pub peak_rss: Option<u64>,
}

impl Measured {
    /// Completed requests per second.
    pub fn rate(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency below which `quantile` of the requests finished.
    pub fn percentile(&self, quantile: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        self.latencies[((self.latencies.len() - 1) as f64 * quantile).round() as usize]
    }

    /// Server CPU time per request.
    pub fn cpu_per_request(&self) -> Option<Duration> {
        let requests = u32::try_from(self.requests.max(1)).unwrap_or(u32::MAX);
        self.server_cpu.map(|cpu| cpu / requests)
    }
}

/// Runs `workers` until `deadline`; gives them back with the latencies they saw.
async fn drive(workers: Vec<Call>, deadline: Instant) -> Result<(Vec<Call>, Vec<Duration>), String> {
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|mut call| {
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let start = Instant::now();
                    call().await?;
                    latencies.push(start.elapsed());
                }
                Ok::<_, String>((call, latencies))
            })
        })
        .collect();
    let mut workers = Vec::with_capacity(tasks.len());
    let mut latencies = Vec::new();
    for task in tasks {
        let (call, seen) = task.await.map_err(|error| format!("a worker panicked: {error}"))??;
        workers.push(call);
        latencies.extend(seen);
    }
    Ok((workers, latencies))
}

/// Warms `workers` up, then measures them for `phases.measure`. `in_process`: the server runs in
/// this process, so its CPU time and memory can be read.
pub(super) async fn measure(
    workers: Vec<Call>,
    phases: Phases,
    in_process: bool,
) -> Result<Measured, String> {
    let (workers, _) = drive(workers, Instant::now() + phases.warm_up).await?;
    let before = Cpu::now(CLIENT_THREADS);
    reset_peak();
    let start = Instant::now();
    let (_, mut latencies) = drive(workers, start + phases.measure).await?;
    let elapsed = start.elapsed();
    let after = Cpu::now(CLIENT_THREADS);
    latencies.sort();
    let server_cpu = match (in_process, before, after) {
        (true, Some(before), Some(after)) => Some(after.server_since(before)),
        _ => None,
    };
    let peak_rss = if in_process { resident().map(|(_, peak)| peak) } else { None };
    Ok(Measured { requests: latencies.len(), elapsed, latencies, server_cpu, peak_rss })
}
