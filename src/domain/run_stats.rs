//! Figures over many runs' records, for operators: how runs ended, which processors tripped
//! them and why, what they warned of, and how long each processor's hooks take (percentiles per
//! processor and hook).

use std::collections::BTreeMap;

use super::{Hook, HookDecision, RunOutcome, RunRecord, TimelineEntry};

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
    /// The figures of `records`.
    pub fn of<'a>(records: impl IntoIterator<Item = &'a RunRecord>) -> RunStats {
        let mut stats = RunStats::default();
        let mut tripwires: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut warnings: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut hooks: BTreeMap<(String, Hook), (HookLatency, Vec<Sample>)> = BTreeMap::new();
        for record in records {
            stats.runs += 1;
            *stats.outcomes.entry(record.outcome.as_str()).or_default() += 1;
            if let (RunOutcome::Tripwire, Some(tripwire)) = (record.outcome, &record.tripwire) {
                *tripwires.entry((tripwire.processor_id.clone(), tripwire.reason.clone())).or_default() += 1;
            }
            for entry in &record.timeline {
                let call = match entry {
                    TimelineEntry::Hook(call) => call,
                    TimelineEntry::Warning(warned) => {
                        let key = (warned.processor_id.clone(), warned.warning.kind.clone());
                        *warnings.entry(key).or_default() += u64::from(warned.count);
                        continue;
                    }
                    TimelineEntry::Model(_) | TimelineEntry::Tool(_) => continue,
                };
                let (latency, samples) =
                    hooks.entry((call.processor_id.clone(), call.hook)).or_insert_with(|| {
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
                let calls = u64::from(call.calls.max(1));
                latency.calls += calls;
                latency.max_us = latency.max_us.max(call.max_us);
                match call.decision {
                    HookDecision::Abort { .. } => latency.aborts += 1,
                    HookDecision::Failed { .. } => latency.failures += 1,
                    HookDecision::Skipped { .. } => latency.skipped += 1,
                    HookDecision::Continue
                    | HookDecision::Replaced { .. }
                    | HookDecision::Dropped
                    | HookDecision::Observed => {}
                }
                samples.push((call.duration_us / calls, calls));
            }
        }
        stats.tripwires = tripwires
            .into_iter()
            .map(|((processor_id, reason), count)| TripwireCount { processor_id, reason, count })
            .collect();
        stats.tripwires.sort_by_key(|tripwire| std::cmp::Reverse(tripwire.count));
        stats.warnings = warnings
            .into_iter()
            .map(|((processor_id, kind), count)| WarningCount { processor_id, kind, count })
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

/// `records` in buckets of `bucket_ms` aligned on the epoch, oldest first; buckets without runs
/// are left out.
pub fn buckets<'a>(records: impl IntoIterator<Item = &'a RunRecord>, bucket_ms: i64) -> Vec<StatsBucket> {
    let bucket_ms = bucket_ms.max(1);
    let mut buckets: BTreeMap<i64, (StatsBucket, BTreeMap<String, Vec<Sample>>)> = BTreeMap::new();
    for record in records {
        let start = record.started_at.div_euclid(bucket_ms) * bucket_ms;
        let (bucket, samples) = buckets
            .entry(start)
            .or_insert_with(|| (StatsBucket { start, ..StatsBucket::default() }, BTreeMap::new()));
        bucket.runs += 1;
        *bucket.outcomes.entry(record.outcome.as_str()).or_default() += 1;
        if let (RunOutcome::Tripwire, Some(tripwire)) = (record.outcome, &record.tripwire) {
            *bucket.tripwires.entry(tripwire.processor_id.clone()).or_default() += 1;
        }
        for entry in &record.timeline {
            match entry {
                TimelineEntry::Hook(call) => {
                    let calls = u64::from(call.calls.max(1));
                    samples
                        .entry(call.processor_id.clone())
                        .or_default()
                        .push((call.duration_us / calls, calls));
                }
                TimelineEntry::Warning(warned) => {
                    *bucket.warnings.entry(warned.processor_id.clone()).or_default() +=
                        u64::from(warned.count);
                }
                TimelineEntry::Model(_) | TimelineEntry::Tool(_) => {}
            }
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
                bucket.latency.insert(processor, latency);
            }
            bucket
        })
        .collect()
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
