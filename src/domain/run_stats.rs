//! Figures over many runs' tallies (`run_tally.rs`), for operators: how runs ended, which
//! processors tripped them and why, what they warned of, and how long each processor's hooks
//! take (percentiles per processor and hook).

use std::collections::BTreeMap;

use super::{Hook, RunTally, TalliedDecision};

/// Tripwires of one processor with one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TripwireCount {
    /// The processor that aborted.
    pub processor_id: String,
    /// Its reason.
    pub reason: String,
    /// How many runs it ended so.
    pub count: u64,
}

/// Warnings of one processor of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarningCount {
    /// The processor that warned.
    pub processor_id: String,
    /// What of (`pii`, `prompt-injection`, ...).
    pub kind: String,
    /// How many warnings (each of a timeline entry's count).
    pub count: u64,
}

/// The calls of one processor's hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookLatency {
    /// The processor.
    pub processor_id: String,
    /// The hook.
    pub hook: Hook,
    /// Its calls.
    pub calls: u64,
    /// Percentiles of a call's time, in microseconds (a stream entry's calls each count as its
    /// mean).
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// The longest call.
    pub max_us: u64,
    /// Calls that aborted the run (or the step).
    pub aborts: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Calls the processor missed (the `open` policy).
    pub skipped: u64,
}

/// Figures over a set of runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Runs counted.
    pub runs: u64,
    /// Runs by how they ended.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Tripwires by processor and reason, most first.
    pub tripwires: Vec<TripwireCount>,
    /// Warnings by processor and kind, most first.
    pub warnings: Vec<WarningCount>,
    /// Hook calls by processor and hook, in that order.
    pub hooks: Vec<HookLatency>,
}

/// The runs that started in one interval of a window: what plots of a window draw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsBucket {
    /// Its start, in milliseconds since the epoch (a multiple of the bucket's length).
    pub start: i64,
    /// Runs that started in it.
    pub runs: u64,
    /// Of them, by how they ended.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Of them, tripwires by processor.
    pub tripwires: BTreeMap<String, u64>,
    /// Hook call times by processor, all its hooks together.
    pub latency: BTreeMap<String, BucketLatency>,
    /// Of them, warnings by processor.
    pub warnings: BTreeMap<String, u64>,
}

/// A processor's hook calls in one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketLatency {
    /// Calls.
    pub calls: u64,
    /// Median call time, in microseconds.
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
}

/// A call's time in microseconds, and how many calls it stands for.
type Sample = (u64, u64);

/// The percentile `share` (0–1) of `samples` (time, weight), sorted by time.
fn percentile(samples: &[Sample], share: f64) -> u64 {
    let total: u64 = samples.iter().map(|(_, weight)| weight).sum();
    let wanted = (total as f64 * share).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (time, weight) in samples {
        seen += weight;
        if seen >= wanted {
            return *time;
        }
    }
    samples.last().map_or(0, |(time, _)| *time)
}

impl RunStats {
    /// The figures of `tallies`.
    pub fn of<'a>(tallies: impl IntoIterator<Item = &'a RunTally>) -> RunStats {
        let mut stats = RunStats::default();
        // Keyed by the tallies' own strings: nothing is copied per call.
        let mut tripwires: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        let mut warnings: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        let mut hooks: BTreeMap<(&str, Hook), (HookLatency, Vec<Sample>)> = BTreeMap::new();
        for tally in tallies {
            stats.runs += 1;
            *stats.outcomes.entry(tally.outcome.as_str()).or_default() += 1;
            if let Some((processor_id, reason)) = &tally.tripwire {
                *tripwires.entry((processor_id, reason)).or_default() += 1;
            }
            for warned in &tally.warnings {
                *warnings.entry((&warned.processor_id, &warned.kind)).or_default() += warned.count;
            }
            for call in &tally.hooks {
                let (latency, samples) = hooks.entry((&call.processor_id, call.hook)).or_insert_with(|| {
                    let latency = HookLatency {
                        processor_id: call.processor_id.clone(),
                        hook: call.hook,
                        calls: 0,
                        p50_us: 0,
                        p95_us: 0,
                        p99_us: 0,
                        max_us: 0,
                        aborts: 0,
                        failures: 0,
                        skipped: 0,
                    };
                    (latency, Vec::new())
                });
                latency.calls += call.calls;
                latency.max_us = latency.max_us.max(call.max_us);
                match call.decision {
                    TalliedDecision::Aborted => latency.aborts += 1,
                    TalliedDecision::Failed => latency.failures += 1,
                    TalliedDecision::Skipped => latency.skipped += 1,
                    TalliedDecision::Passed => {}
                }
                samples.push(call.sample());
            }
        }
        stats.tripwires = tripwires
            .into_iter()
            .map(|((processor_id, reason), count)| TripwireCount {
                processor_id: processor_id.to_owned(),
                reason: reason.to_owned(),
                count,
            })
            .collect();
        stats.tripwires.sort_by_key(|tripwire| std::cmp::Reverse(tripwire.count));
        stats.warnings = warnings
            .into_iter()
            .map(|((processor_id, kind), count)| WarningCount {
                processor_id: processor_id.to_owned(),
                kind: kind.to_owned(),
                count,
            })
            .collect();
        stats.warnings.sort_by_key(|warning| std::cmp::Reverse(warning.count));
        stats.hooks = hooks
            .into_values()
            .map(|(mut latency, mut samples)| {
                samples.sort_unstable();
                latency.p50_us = percentile(&samples, 0.50);
                latency.p95_us = percentile(&samples, 0.95);
                latency.p99_us = percentile(&samples, 0.99);
                latency
            })
            .collect();
        stats
    }
}

/// `tallies` in buckets of `bucket_ms` aligned on the epoch, oldest first; buckets without runs
/// are left out.
pub fn buckets<'a>(tallies: impl IntoIterator<Item = &'a RunTally>, bucket_ms: i64) -> Vec<StatsBucket> {
    let bucket_ms = bucket_ms.max(1);
    let mut buckets: BTreeMap<i64, (StatsBucket, BTreeMap<&str, Vec<Sample>>)> = BTreeMap::new();
    for tally in tallies {
        let start = tally.started_at.div_euclid(bucket_ms) * bucket_ms;
        let (bucket, samples) = buckets
            .entry(start)
            .or_insert_with(|| (StatsBucket { start, ..StatsBucket::default() }, BTreeMap::new()));
        bucket.runs += 1;
        *bucket.outcomes.entry(tally.outcome.as_str()).or_default() += 1;
        if let Some((processor_id, _)) = &tally.tripwire {
            count(&mut bucket.tripwires, processor_id, 1);
        }
        for call in &tally.hooks {
            samples.entry(&call.processor_id).or_default().push(call.sample());
        }
        for warned in &tally.warnings {
            count(&mut bucket.warnings, &warned.processor_id, warned.count);
        }
    }
    buckets
        .into_values()
        .map(|(mut bucket, samples)| {
            for (processor, mut samples) in samples {
                samples.sort_unstable();
                let latency = BucketLatency {
                    calls: samples.iter().map(|(_, weight)| weight).sum(),
                    p50_us: percentile(&samples, 0.50),
                    p95_us: percentile(&samples, 0.95),
                };
                bucket.latency.insert(processor.to_owned(), latency);
            }
            bucket
        })
        .collect()
}

/// Adds `by` to `key`'s count, copying the key only the first time.
fn count(counts: &mut BTreeMap<String, u64>, key: &str, by: u64) {
    match counts.get_mut(key) {
        Some(counted) => *counted += by,
        None => {
            counts.insert(key.to_owned(), by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weighted percentiles: a sample's weight counts it that many times.
    #[test]
    fn percentiles_weigh_their_samples() {
        let samples = [(10, 1), (20, 8), (1000, 1)];
        assert_eq!(percentile(&samples, 0.5), 20);
        assert_eq!(percentile(&samples, 0.1), 10);
        assert_eq!(percentile(&samples, 0.99), 1000);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
