//! Process metrics in the Prometheus text format: counters and latency histograms recorded by
//! the runtime as runs go (runs by outcome, tripwires by processor, hook and model latency, model
//! tokens), and gauges read at scrape time (remote instances, store size). One registry per
//! process, like Prometheus clients' default registry; `server::serve_metrics` exposes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// The upper bounds of the latency histograms, in seconds.
const BUCKETS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// What a metric is: its name, kind and help. Every series is recorded through one, and carries
/// it into the registry, so whatever is recorded is exported with its `# HELP` and `# TYPE`.
#[derive(Debug)]
pub struct Metric {
    /// The name, `agentwire_…`.
    pub name: &'static str,
    kind: &'static str,
    help: &'static str,
}

/// A counter's definition.
#[derive(Debug)]
pub struct Counter(Metric);

/// A latency histogram's definition (seconds, `BUCKETS`).
#[derive(Debug)]
pub struct Latency(Metric);

/// A gauge's definition: its value is read at scrape time ([`Gauge`]).
#[derive(Debug)]
pub struct GaugeMetric(Metric);

impl Counter {
    const fn new(name: &'static str, help: &'static str) -> Counter {
        Counter(Metric { name, kind: "counter", help })
    }
}

impl Latency {
    const fn new(name: &'static str, help: &'static str) -> Latency {
        Latency(Metric { name, kind: "histogram", help })
    }
}

impl GaugeMetric {
    const fn new(name: &'static str, help: &'static str) -> GaugeMetric {
        GaugeMetric(Metric { name, kind: "gauge", help })
    }
}

/// Runs concluded.
pub static RUNS: Counter = Counter::new(
    "agentwire_runs_total",
    "Runs concluded, by agent and outcome (finished, tripwire, error, cancelled).",
);
/// Tripwires.
pub static TRIPWIRES: Counter =
    Counter::new("agentwire_tripwires_total", "Tripwires, by the processor that aborted.");
/// Hook calls' latency.
pub static HOOK_DURATION: Latency =
    Latency::new("agentwire_hook_duration_seconds", "Hook calls, by processor and hook.");
/// Model calls' latency.
pub static MODEL_DURATION: Latency = Latency::new(
    "agentwire_model_duration_seconds",
    "Model calls, from request to the end of the stream, by model.",
);
/// Model tokens.
pub static MODEL_TOKENS: Counter =
    Counter::new("agentwire_model_tokens_total", "Model tokens, by model and direction (input, output).");
/// Streaming clients cut off for reading too slowly.
pub static SLOW_CLIENTS: Counter = Counter::new(
    "agentwire_slow_clients_total",
    "Streaming clients cut off, by the limit: slow_client_ms (no room for a chunk in time), \
     max_buffered_mb (the stream held the most when the server's stream buffers were full).",
);
/// Run records never stored.
pub static RUN_RECORDS_DROPPED: Counter = Counter::new(
    "agentwire_run_records_dropped_total",
    "Run records not stored, by cause (queue full, store).",
);
/// Runs refused for want of a slot.
pub static RUNS_REFUSED: Counter = Counter::new(
    "agentwire_runs_refused_total",
    "Runs refused before they started, by limit (max_concurrent_runs, max_concurrent_runs_per_caller).",
);
/// Connected remote instances.
pub static REMOTE_INSTANCES: GaugeMetric =
    GaugeMetric::new("agentwire_remote_instances", "Connected remote processor instances, by processor.");
/// The store's size.
pub static STORE_BYTES: GaugeMetric =
    GaugeMetric::new("agentwire_store_bytes", "Bytes the store takes on disk.");
/// Whether the store takes writes.
pub static STORE_WRITABLE: GaugeMetric = GaugeMetric::new(
    "agentwire_store_writable",
    "1 while the store takes writes, else 0; `state` says why not (disk_low, failed).",
);
/// What streams' unread chunks take.
pub static STREAM_BUFFERED_BYTES: GaugeMetric = GaugeMetric::new(
    "agentwire_stream_buffered_bytes",
    "Bytes of chunks streaming clients have not read yet, held by the server (max_buffered_mb).",
);
/// Free disk under the store.
pub static STORE_FREE_BYTES: GaugeMetric =
    GaugeMetric::new("agentwire_store_free_bytes", "Free bytes on the disk under the store.");

/// A value read at scrape time.
#[derive(Debug, Clone)]
pub struct Gauge {
    /// The metric.
    pub metric: &'static GaugeMetric,
    /// Its labels.
    pub labels: Vec<(&'static str, String)>,
    /// Its value now.
    pub value: f64,
}

#[derive(Debug, Clone)]
enum Series {
    Counter(u64),
    Histogram(Arc<Histogram>),
}

/// One latency histogram's series, recorded without a lock: a caller that records into it often
/// (a hook on every stream chunk) resolves it once with [`Metrics::histogram`] and keeps it.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket, each counted once (the text format's cumulative counts are
    /// summed when rendered); the last is past the largest bound.
    counts: [AtomicU64; BUCKETS.len() + 1],
    /// The observations' sum, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: std::time::Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS.partition_point(|bound| *bound < seconds);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The cumulative count of each bound, then the total and the sum in seconds.
    fn read(&self) -> ([u64; BUCKETS.len()], u64, f64) {
        let mut cumulative = [0; BUCKETS.len()];
        let mut total = 0;
        for (index, count) in self.counts.iter().enumerate() {
            total += count.load(Ordering::Relaxed);
            if let Some(slot) = cumulative.get_mut(index) {
                *slot = total;
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        (cumulative, total, sum)
    }
}

/// One metric's definition and its series by rendered label set.
type Recorded = (&'static Metric, BTreeMap<String, Series>);

/// The registry.
#[derive(Debug, Default)]
pub struct Metrics {
    /// By metric name: its definition, and its series by rendered label set.
    series: Mutex<BTreeMap<&'static str, Recorded>>,
}

static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// The process's registry.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

static REPLICA: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Names this process as the `replica` label of every series the metrics endpoint serves (set
/// once, at start: several replicas scraped into one Prometheus stay apart).
pub fn set_replica(name: String) {
    let _ = REPLICA.set(name);
}

/// The name [`set_replica`] gave, if any.
pub fn replica() -> Option<&'static str> {
    REPLICA.get().map(String::as_str)
}

/// `labels` (a rendered set, or empty) with `replica="…"` first, when there is a replica.
fn with_replica(replica: &str, labels: &str) -> String {
    let inner = labels.trim_start_matches('{').trim_end_matches('}');
    match (replica.is_empty(), inner.is_empty()) {
        (true, _) => labels.to_owned(),
        (false, true) => format!("{{{replica}}}"),
        (false, false) => format!("{{{replica},{inner}}}"),
    }
}

/// `{name="value",...}`, values escaped as the text format wants.
fn label_set(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    write_label_set(&mut out, labels);
    out
}

/// Writes `{name="value",...}` into `out` (nothing for no labels).
fn write_label_set(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (index, (name, value)) in labels.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for char in value.chars() {
            match char {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                other => out.push(other),
            }
        }
        out.push('"');
    }
    out.push('}');
}

thread_local! {
    /// The label set of the series being recorded, built here so that recording into an existing
    /// series allocates nothing (hooks record on every stream chunk).
    static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

impl Metrics {
    /// Calls `record` with the series `metric` `labels`, made with `new` if it is not there yet.
    fn with_series(
        &self,
        metric: &'static Metric,
        labels: &[(&str, &str)],
        new: fn() -> Series,
        record: impl FnOnce(&mut Series),
    ) {
        KEY.with_borrow_mut(|key| {
            key.clear();
            write_label_set(key, labels);
            let mut series = self.series.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let (_, by_labels) = series.entry(metric.name).or_insert_with(|| (metric, BTreeMap::new()));
            match by_labels.get_mut(key.as_str()) {
                Some(found) => record(found),
                None => record(by_labels.entry(key.clone()).or_insert_with(new)),
            }
        });
    }

    /// Adds `by` to a counter.
    pub fn count(&self, counter: &'static Counter, labels: &[(&str, &str)], by: u64) {
        self.with_series(
            &counter.0,
            labels,
            || Series::Counter(0),
            |series| {
                if let Series::Counter(value) = series {
                    *value += by;
                }
            },
        );
    }

    /// Records one observation in a histogram.
    pub fn observe(&self, latency: &'static Latency, labels: &[(&str, &str)], elapsed: std::time::Duration) {
        self.histogram(latency, labels).observe(elapsed);
    }

    /// The histogram `latency` `labels`, made if it is not there yet, to record into without
    /// looking it up again.
    pub fn histogram(&self, latency: &'static Latency, labels: &[(&str, &str)]) -> Arc<Histogram> {
        let new = || Series::Histogram(Arc::default());
        let mut found = None;
        self.with_series(&latency.0, labels, new, |series| {
            if let Series::Histogram(histogram) = series {
                found = Some(Arc::clone(histogram));
            }
        });
        // Series of one name are all of its one kind: a histogram is always found.
        found.unwrap_or_default()
    }

    /// Every metric recorded, and `gauges` read now, in the Prometheus text format, by name;
    /// every series labelled `replica` when there is one.
    pub fn render(&self, gauges: &[Gauge], replica: Option<&str>) -> String {
        let series = self.series.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        let replica = replica.map(|replica| label_set(&[("replica", replica)])).unwrap_or_default();
        let replica = replica.trim_start_matches('{').trim_end_matches('}');
        let mut metrics: BTreeMap<&str, &Metric> =
            series.iter().map(|(name, (metric, _))| (*name, *metric)).collect();
        metrics.extend(gauges.iter().map(|gauge| (gauge.metric.0.name, &gauge.metric.0)));
        let mut out = String::new();
        for (name, metric) in metrics {
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}", metric.help, metric.kind);
            for (labels, value) in series.get(name).into_iter().flat_map(|(_, series)| series) {
                let labels = &with_replica(replica, labels);
                match value {
                    Series::Counter(value) => {
                        let _ = writeln!(out, "{name}{labels} {value}");
                    }
                    Series::Histogram(histogram) => {
                        let (counts, count, sum) = histogram.read();
                        let inner = labels.trim_start_matches('{').trim_end_matches('}');
                        let with_le = |le: &str| {
                            if inner.is_empty() {
                                format!("{{le=\"{le}\"}}")
                            } else {
                                format!("{{{inner},le=\"{le}\"}}")
                            }
                        };
                        for (bound, bucket) in BUCKETS.iter().zip(counts) {
                            let _ = writeln!(out, "{name}_bucket{} {bucket}", with_le(&bound.to_string()));
                        }
                        let _ = writeln!(out, "{name}_bucket{} {count}", with_le("+Inf"));
                        let _ = writeln!(out, "{name}_sum{labels} {sum}\n{name}_count{labels} {count}");
                    }
                }
            }
            for gauge in gauges.iter().filter(|gauge| gauge.metric.0.name == name) {
                let labels: Vec<(&str, &str)> =
                    gauge.labels.iter().map(|(label, value)| (*label, value.as_str())).collect();
                let _ = writeln!(out, "{name}{} {}", with_replica(replica, &label_set(&labels)), gauge.value);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters and histograms render in the Prometheus text format, with cumulative buckets.
    #[test]
    fn counters_and_histograms_render_in_the_text_format() {
        let metrics = Metrics::default();
        metrics.count(&RUNS, &[("agent", "echo"), ("outcome", "finished")], 2);
        metrics.observe(
            &HOOK_DURATION,
            &[("processor", "p\"1"), ("hook", "processInput")],
            std::time::Duration::from_millis(3),
        );
        let text = metrics.render(&[Gauge { metric: &STORE_BYTES, labels: Vec::new(), value: 4096.0 }], None);
        assert!(text.contains("agentwire_runs_total{agent=\"echo\",outcome=\"finished\"} 2"), "{text}");
        assert!(text.contains("agentwire_hook_duration_seconds_bucket{processor=\"p\\\"1\",hook=\"processInput\",le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("agentwire_hook_duration_seconds_bucket{processor=\"p\\\"1\",hook=\"processInput\",le=\"0.0025\"} 0"), "{text}");
        assert!(
            text.contains(
                "agentwire_hook_duration_seconds_count{processor=\"p\\\"1\",hook=\"processInput\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("agentwire_store_bytes 4096"), "{text}");
    }

    /// A histogram resolved once and the registry's lookups record into the same series, each
    /// observation in every bucket at or above it, with the sum in seconds.
    #[test]
    fn a_resolved_histogram_records_into_its_series() {
        let metrics = Metrics::default();
        let labels = [("processor", "p"), ("hook", "processOutputStream")];
        let resolved = metrics.histogram(&HOOK_DURATION, &labels);
        resolved.observe(std::time::Duration::from_micros(200));
        resolved.observe(std::time::Duration::from_secs(20));
        metrics.observe(&HOOK_DURATION, &labels, std::time::Duration::from_micros(100));
        let text = metrics.render(&[], None);
        let line = |le: &str| {
            format!(
                "agentwire_hook_duration_seconds_bucket{{processor=\"p\",hook=\"processOutputStream\",le=\"{le}\"}}"
            )
        };
        assert!(text.contains(&format!("{} 1\n", line("0.0001"))), "{text}");
        assert!(text.contains(&format!("{} 2\n", line("0.00025"))), "{text}");
        assert!(text.contains(&format!("{} 2\n", line("10"))), "{text}");
        assert!(text.contains(&format!("{} 3\n", line("+Inf"))), "{text}");
        assert!(
            text.contains(
                "agentwire_hook_duration_seconds_sum{processor=\"p\",hook=\"processOutputStream\"} 20.0003\n"
            ),
            "{text}"
        );
    }

    /// Whatever is recorded is exported with its help and type — the counters once missing from
    /// the scrape (slow clients, dropped run records) among them.
    #[test]
    fn every_recorded_metric_is_exported() {
        let metrics = Metrics::default();
        for counter in [&SLOW_CLIENTS, &RUN_RECORDS_DROPPED, &RUNS_REFUSED, &MODEL_TOKENS, &TRIPWIRES] {
            metrics.count(counter, &[], 1);
        }
        metrics.observe(&MODEL_DURATION, &[], std::time::Duration::from_millis(1));
        let text = metrics.render(&[], None);
        for name in [
            "agentwire_slow_clients_total",
            "agentwire_run_records_dropped_total",
            "agentwire_runs_refused_total",
            "agentwire_model_tokens_total",
            "agentwire_tripwires_total",
        ] {
            assert!(text.contains(&format!("# TYPE {name} counter\n")), "{name}: {text}");
            assert!(text.contains(&format!("\n{name} 1\n")), "{name}: {text}");
        }
        assert!(text.contains("# TYPE agentwire_model_duration_seconds histogram\n"), "{text}");
    }

    /// With a replica name, every series — counters, histogram lines, gauges — carries it first.
    #[test]
    fn every_series_carries_the_replica() {
        let metrics = Metrics::default();
        metrics.count(&RUNS, &[("agent", "echo")], 1);
        metrics.observe(&HOOK_DURATION, &[], std::time::Duration::from_millis(1));
        let gauges = [Gauge { metric: &STORE_BYTES, labels: Vec::new(), value: 1.0 }];
        let text = metrics.render(&gauges, Some("pod-\"a\""));
        assert!(text.contains("agentwire_runs_total{replica=\"pod-\\\"a\\\"\",agent=\"echo\"} 1"), "{text}");
        assert!(
            text.contains("agentwire_hook_duration_seconds_bucket{replica=\"pod-\\\"a\\\"\",le=\"+Inf\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("agentwire_hook_duration_seconds_count{replica=\"pod-\\\"a\\\"\"} 1"),
            "{text}"
        );
        assert!(text.contains("agentwire_store_bytes{replica=\"pod-\\\"a\\\"\"} 1"), "{text}");
    }
}
