//! Logs and traces.
//!
//! [`Telemetry::install`] sets the process's `tracing` subscriber: log lines on stderr as text or
//! JSON (filtered by `RUST_LOG`, default `info`), and, when an OTLP endpoint is configured, the
//! spans of [`spans`] exported to an OpenTelemetry collector. [`propagation`] carries W3C trace
//! context from the caller, through the run, to remote processors and tools.

pub mod metrics;
pub mod propagation;
pub mod spans;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer, Registry};

use crate::config::{LogFormat, SpanDetail, TelemetryConfig};

/// How long the exit waits for the last spans to be exported.
pub const SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The standard variable naming a collector when the config names none.
const ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `sample_ratio` is outside 0..=1.
    #[error("[telemetry] sample_ratio must be between 0 and 1, not {0}")]
    SampleRatio(f64),
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("{setting} must be an http:// or https:// URL, not `{endpoint}`")]
    Endpoint {
        /// Where it was set: the config key or the environment variable.
        setting: &'static str,
        /// What it says.
        endpoint: String,
    },
    /// The exporter could not be built.
    #[error("cannot export traces to {endpoint}: {message}")]
    Exporter {
        /// Where the spans were to go.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// A subscriber was already installed in this process.
    #[error("logging is already set up in this process")]
    AlreadyInstalled,
}

/// The installed subscriber; [`Telemetry::shut_down`] sends the spans not yet exported.
#[derive(Debug)]
#[must_use = "shut it down on exit, or the last spans are lost"]
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Log lines only, e.g. for the command line's client commands.
    pub fn install_logs(format: LogFormat) -> Result<Telemetry, TelemetryError> {
        Registry::default()
            .with(log_layer(format))
            .try_init()
            .map_err(|_| TelemetryError::AlreadyInstalled)?;
        Ok(Telemetry { tracer_provider: None })
    }

    /// Logs in `config`'s format, and spans exported to its collector, if any. Must be called
    /// inside a Tokio runtime (the exporter's channel lives on it).
    pub fn install(config: &TelemetryConfig) -> Result<Telemetry, TelemetryError> {
        if !(0.0..=1.0).contains(&config.sample_ratio) {
            return Err(TelemetryError::SampleRatio(config.sample_ratio));
        }
        let endpoint = match &config.otlp_endpoint {
            Some(endpoint) => Some(("[telemetry] otlp_endpoint", endpoint.clone())),
            None => std::env::var(ENDPOINT_VARIABLE)
                .ok()
                .filter(|endpoint| !endpoint.is_empty())
                .map(|endpoint| (ENDPOINT_VARIABLE, endpoint)),
        };
        let Some((setting, endpoint)) = endpoint else { return Telemetry::install_logs(config.log_format) };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(TelemetryError::Endpoint { setting, endpoint });
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(&endpoint)
            .build()
            .map_err(|error| TelemetryError::Exporter {
                endpoint: endpoint.clone(),
                message: error.to_string(),
            })?;
        let tracer_provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(config.sample_ratio))))
            .with_resource(Resource::builder().with_service_name(config.service_name.clone()).build())
            .build();
        let traces = tracing_opentelemetry::layer()
            .with_tracer(tracer_provider.tracer("agentwire"))
            .with_filter(Targets::new().with_target(spans::TARGET, span_level(config.spans)));
        Registry::default()
            .with(log_layer(config.log_format))
            .with(traces)
            .try_init()
            .map_err(|_| TelemetryError::AlreadyInstalled)?;
        tracing::info!("exporting traces to {endpoint}");
        Ok(Telemetry { tracer_provider: Some(tracer_provider) })
    }

    /// Exports the spans still queued and stops the exporter; gives up after
    /// [`SHUTDOWN_TIMEOUT`], so a collector that stopped answering never holds up the exit.
    pub async fn shut_down(self) {
        let Some(provider) = self.tracer_provider else { return };
        // It blocks until the last batch is sent over a channel that lives on this runtime, so
        // it runs on a thread of its own (not a blocking task: the runtime would wait for it).
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || sender.send(provider.shutdown()));
        match tokio::time::timeout(SHUTDOWN_TIMEOUT, receiver).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!("traces not all exported at exit: {error}"),
            Ok(Err(_)) | Err(_) => tracing::warn!(
                "traces not all exported at exit: the collector did not answer within {SHUTDOWN_TIMEOUT:?}"
            ),
        }
    }
}

/// Log lines on stderr, filtered by `RUST_LOG` (`target=level` directives; default `info`), in
/// colour only when stderr is a terminal.
///
/// A [`Targets`] filter rather than an `EnvFilter`: the latter takes a lock on every span enter
/// and exit (for span-field directives), and a streaming run enters its spans on every chunk.
fn log_layer(format: LogFormat) -> Box<dyn Layer<Registry> + Send + Sync> {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(Level::INFO));
    // Colours only for a terminal: a log file or a collector gets plain text.
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(colours);
    match format {
        LogFormat::Text => lines.with_filter(filter).boxed(),
        LogFormat::Json => lines.json().flatten_event(true).with_span_list(true).with_filter(filter).boxed(),
    }
}

/// The most detailed level of the spans exported (see [`spans`] for each span's level).
fn span_level(detail: SpanDetail) -> Level {
    match detail {
        SpanDetail::Steps => Level::INFO,
        SpanDetail::Hooks => Level::DEBUG,
        SpanDetail::Chunks => Level::TRACE,
    }
}
