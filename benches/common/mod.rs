//! What the micro-benchmarks share: whether this is the smoke run, and how samples are summed up.

use std::time::Duration;

/// The smoke run: a few rounds, to prove the bench still runs. `cargo bench` passes `--bench`;
/// `cargo test --all-targets` (CI) does not, and gets the smoke run, as `-- --quick` does.
pub(crate) fn quick() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|arg| arg == "--quick") || !args.iter().any(|arg| arg == "--bench")
}

/// The value below which `quantile` of the samples lie (sorts them).
pub(crate) fn percentile(samples: &mut [Duration], quantile: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * quantile).round() as usize]
}

/// The median of the samples (sorts them).
#[allow(dead_code)] // not every bench takes medians
pub(crate) fn median(samples: &mut [Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// A duration in microseconds, to a tenth.
#[allow(dead_code)] // not every bench prints microseconds
pub(crate) fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}
