//! `[telemetry]`: log format, and the spans of runs exported to OpenTelemetry.

use serde::Deserialize;

/// The `[telemetry]` table: how the server logs, and where it sends its traces.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `text` (the default) or `json`: one JSON object per line, with the spans it happened in.
    #[serde(default)]
    pub log_format: LogFormat,
    /// An OpenTelemetry collector's OTLP/gRPC endpoint (e.g. `http://127.0.0.1:4317`): spans of
    /// runs, steps, hooks, model and tool calls are exported there. Without it, the standard
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` variable is used; without either, nothing is exported.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the exported spans. Default `agentwire`.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// The share of traces kept (0 to 1), for traces the caller did not already decide on (a
    /// caller's sampled `traceparent` is followed). Default 1.
    #[serde(default = "default_sample_ratio")]
    pub sample_ratio: f64,
    /// Which spans are exported: `steps` (runs, steps, model and tool calls), `hooks` (the
    /// default: also every hook call except per-chunk `processOutputStream`) or `chunks` (every
    /// hook call, one span per chunk and processor).
    #[serde(default)]
    pub spans: SpanDetail,
}

impl Default for TelemetryConfig {
    fn default() -> TelemetryConfig {
        TelemetryConfig {
            log_format: LogFormat::default(),
            otlp_endpoint: None,
            service_name: default_service_name(),
            sample_ratio: default_sample_ratio(),
            spans: SpanDetail::default(),
        }
    }
}

fn default_service_name() -> String {
    "agentwire".to_owned()
}

fn default_sample_ratio() -> f64 {
    1.0
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// For people.
    #[default]
    Text,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// How many spans a run exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanDetail {
    /// Runs, steps, model calls and tool calls.
    Steps,
    /// Also each hook call, but for per-chunk `processOutputStream` calls.
    #[default]
    Hooks,
    /// Every hook call.
    Chunks,
}
