//! Latency added, measured fairly on a noisy machine: each text run with the processor and
//! without it, one run at a time, alternating, and the medians of both compared.

use std::time::{Duration, Instant};

/// The medians of `run((true, text))` and of `run((false, text))` over `texts`, alternating.
pub(super) async fn paired<F, Fut>(texts: &[String], run: F) -> Result<(Duration, Duration), String>
where
    F: Fn((bool, String)) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let (mut with, mut without) = (Vec::with_capacity(texts.len()), Vec::with_capacity(texts.len()));
    for text in texts {
        for (on, timed) in [(true, &mut with), (false, &mut without)] {
            let started = Instant::now();
            run((on, text.clone())).await?;
            timed.push(started.elapsed());
        }
    }
    Ok((median(with), median(without)))
}

/// The median (the upper one of an even count); zero when there is none.
pub(super) fn median(mut durations: Vec<Duration>) -> Duration {
    durations.sort();
    durations.get(durations.len() / 2).copied().unwrap_or_default()
}
