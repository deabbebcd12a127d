//! `agentwire.toml`: the agents and the processor definitions they name.
//!
//! ```toml
//! [processors.no-secrets]          # a processor definition: a kind and its options
//! kind = "content-filter"
//! blocked_words = ["secret"]
//!
//! [[agents]]
//! id = "echo"
//! model = "mock/echo"
//! input_processors = ["no-secrets", "lowercase"]   # definitions, or built-in kinds by name
//! output_processors = [{ remote = "pii-guard", timeout_ms = 1500 }]   # or a remote one, inline
//! ```
//!
//! Unknown keys and bad values are errors that name the key and its line.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::memory::MemoryConfig;
use crate::memory::embedder::EmbedderConfig;
use crate::model::provider::ProviderConfig;
use crate::model::{MockScript, ModelSettings};
use crate::tool::RemoteToolConfig;

/// The config used when no `--config` is given: one `echo` agent on `mock/echo`.
pub const DEFAULT_CONFIG: &str = r#"
[[agents]]
id = "echo"
name = "Echo"
instructions = "You repeat what the user says."
model = "mock/echo"
"#;

/// The parsed config file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The agents, by id.
    #[serde(default)]
    pub agents: Vec<Spanned<AgentConfig>>,
    /// Processor definitions by name: `kind` plus the kind's options.
    #[serde(default)]
    pub processors: BTreeMap<String, Spanned<toml::Table>>,
    /// How memory is stored.
    #[serde(default)]
    pub storage: StorageConfig,
    /// Embedders for semantic recall, by name (`lexical` is built in).
    #[serde(default)]
    pub embedders: BTreeMap<String, Spanned<EmbedderConfig>>,
    /// Tokens remote processors present, each naming the processor ids it may register as.
    /// With none, any configured id may connect (fine on loopback, not beyond).
    #[serde(default)]
    pub processor_tokens: Vec<Spanned<ProcessorTokenConfig>>,
    /// How the server keeps remote processor sessions.
    #[serde(default)]
    pub remote: RemoteConfig,
    /// Remote tools by name (`kind = "remote"`), which agents list in `tools`.
    #[serde(default)]
    pub tools: BTreeMap<String, Spanned<RemoteToolConfig>>,
    /// Model providers by name (the part of a model id before `/`), over the built-in ones.
    #[serde(default)]
    pub providers: BTreeMap<String, Spanned<ProviderConfig>>,
    /// Client API keys and what each may use.
    #[serde(default)]
    pub auth: AuthConfig,
    /// Limits on requests and runs.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// TLS for the gRPC port (none: plaintext).
    #[serde(default)]
    pub tls: Option<Spanned<TlsConfig>>,
    /// The Prometheus endpoint.
    #[serde(default)]
    pub metrics: MetricsConfig,
    /// Logs and traces.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// The source text, to turn byte offsets into line numbers.
    #[serde(skip)]
    source: String,
    /// The directory of the config file, for the files it names (none: the working directory).
    #[serde(skip)]
    dir: Option<std::path::PathBuf>,
}

/// The `[auth]` table: with keys, every `AgentService` and `MemoryService` call must present one
/// (`authorization: Bearer <key>` or `x-api-key`), and may only use the resources and agents its
/// key names.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The keys.
    #[serde(default)]
    pub keys: Vec<Spanned<ApiKeyConfig>>,
    /// A TOML file of more `[[keys]]`, relative to this config file.
    #[serde(default)]
    pub keys_file: Option<String>,
    /// Serve without keys on an address other than loopback. Without keys and without this, the
    /// server refuses to listen beyond loopback.
    #[serde(default)]
    pub allow_unauthenticated: bool,
}

/// The `[metrics]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `GET /metrics` is served (a port of its own, e.g. `127.0.0.1:9464`); none: not
    /// served.
    #[serde(default)]
    pub listen: Option<std::net::SocketAddr>,
}

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

/// The `[tls]` table: PEM files, relative to the config file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The server's certificate chain.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// A CA: clients must present a certificate it signed (mutual TLS).
    #[serde(default)]
    pub client_ca: Option<String>,
}

/// The `[limits]` table. Each limit's error names it and its value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// The largest request message, in bytes (larger ones are refused before decoding).
    /// Default 4 MiB.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// The largest conversation message a run takes (`text`, or each of `messages`): its text,
    /// file data and JSON, in bytes. Default 1 MiB.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// The most model steps any run may take: agents' `max_steps` and requests' `max_steps` must
    /// stay within it. Default 100.
    #[serde(default = "default_max_steps_limit")]
    pub max_steps: u32,
    /// Runs at once; more wait up to `queue_timeout_ms` for a slot, then get
    /// RESOURCE_EXHAUSTED. 0 (the default): no limit.
    #[serde(default)]
    pub max_concurrent_runs: usize,
    /// How long a run waits for a slot. Default 1000.
    #[serde(default = "default_queue_timeout_ms")]
    pub queue_timeout_ms: u64,
    /// A run still going after this long ends with an error (nothing saved). 0 (the default):
    /// no limit.
    #[serde(default)]
    pub max_run_ms: u64,
    /// On SIGTERM, how long runs in flight may take to finish before they are stopped (new runs
    /// are refused at once). Default 10000.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        LimitsConfig {
            max_request_bytes: default_max_request_bytes(),
            max_message_bytes: default_max_message_bytes(),
            max_steps: default_max_steps_limit(),
            max_concurrent_runs: 0,
            queue_timeout_ms: default_queue_timeout_ms(),
            max_run_ms: 0,
            shutdown_grace_ms: default_shutdown_grace_ms(),
        }
    }
}

fn default_shutdown_grace_ms() -> u64 {
    10_000
}

fn default_max_request_bytes() -> usize {
    4 * 1024 * 1024
}

fn default_max_message_bytes() -> usize {
    1024 * 1024
}

fn default_max_steps_limit() -> u32 {
    100
}

fn default_queue_timeout_ms() -> u64 {
    1000
}

/// One client API key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Who holds it, for logs and errors (never the key itself).
    pub name: String,
    /// The key (prefer `key_env` or `key_sha256`: files get copied).
    #[serde(default)]
    pub key: Option<String>,
    /// The environment variable holding the key.
    #[serde(default)]
    pub key_env: Option<String>,
    /// The key's SHA-256, in hex: the file then holds no secret.
    #[serde(default)]
    pub key_sha256: Option<String>,
    /// The resources it may use: exact ids, `prefix*`, or `*`.
    pub resources: Vec<String>,
    /// The agents it may call: exact ids, `prefix*`, or `*` (the default).
    #[serde(default = "every_agent")]
    pub agents: Vec<String>,
    /// Requests per second it may make, on average (none: no limit).
    #[serde(default)]
    pub rate_per_second: Option<f64>,
    /// Requests it may make at once above the rate. Default: one second's worth.
    #[serde(default)]
    pub burst: Option<u32>,
}

fn every_agent() -> Vec<String> {
    vec!["*".to_owned()]
}

/// One `[[processor_tokens]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessorTokenConfig {
    /// The token itself.
    #[serde(default)]
    pub token: Option<String>,
    /// Or the environment variable holding it (kept out of the file).
    #[serde(default)]
    pub token_env: Option<String>,
    /// The processor ids a holder may register as.
    pub processors: Vec<String>,
}

/// One entry of an agent's processor list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ProcessorEntry {
    /// A `[processors.*]` definition, a memory kind, or a built-in kind, by name.
    Name(String),
    /// A remote processor declared in place: `{ remote = "pii-guard", timeout_ms = 1500,
    /// on_failure = "closed", mode = "blocking" }` (the options of `kind = "remote"`, with the
    /// processor id under `remote`).
    Inline(toml::Table),
}

fn no_entries() -> Spanned<Vec<ProcessorEntry>> {
    Spanned::new(0..0, Vec::new())
}

/// The `[remote]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// The server pings every connected processor this often; one that has not answered by the
    /// next ping is dropped as hung and its calls fail over. Default 10 s.
    #[serde(default = "default_ping_interval_ms")]
    pub ping_interval_ms: u64,
    /// On shutdown, how long remote calls in flight may take to be answered. Default 5 s.
    #[serde(default = "default_drain_timeout_ms")]
    pub drain_timeout_ms: u64,
}

impl Default for RemoteConfig {
    fn default() -> RemoteConfig {
        RemoteConfig {
            ping_interval_ms: default_ping_interval_ms(),
            drain_timeout_ms: default_drain_timeout_ms(),
        }
    }
}

fn default_ping_interval_ms() -> u64 {
    10_000
}

fn default_drain_timeout_ms() -> u64 {
    5_000
}

/// The `[storage]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The largest file part (inline data, in bytes) a run with memory may store; larger ones are
    /// refused before the run starts. Default 1 MiB.
    #[serde(default = "default_max_file_bytes")]
    pub max_file_bytes: usize,
    /// The store's page cache, in MiB. Default 64: the server's memory stays bounded however much
    /// it stores (recall keeps its own in-memory copy of the vectors it searches).
    #[serde(default = "default_cache_mb")]
    pub cache_mb: u64,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig { max_file_bytes: default_max_file_bytes(), cache_mb: default_cache_mb() }
    }
}

fn default_cache_mb() -> u64 {
    64
}

fn default_max_file_bytes() -> usize {
    1024 * 1024
}

/// One agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Unique id, used by clients.
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub instructions: String,
    /// `provider/model`, e.g. `mock/echo`.
    pub model: Spanned<String>,
    /// Tools by name.
    #[serde(default = "no_names")]
    pub tools: Spanned<Vec<String>>,
    /// Input processors, in order: definition names, built-in kinds, or inline remote processors.
    #[serde(default = "no_entries")]
    pub input_processors: Spanned<Vec<ProcessorEntry>>,
    /// Output processors, in order.
    #[serde(default = "no_entries")]
    pub output_processors: Spanned<Vec<ProcessorEntry>>,
    /// Error processors (`processAPIError`), in order.
    #[serde(default = "no_entries")]
    pub error_processors: Spanned<Vec<ProcessorEntry>>,
    /// Retries processors may ask for; unset means a processor's retry request aborts.
    #[serde(default)]
    pub max_processor_retries: Option<u32>,
    /// Model steps per run, at least 1. Default 5.
    #[serde(default = "default_max_steps")]
    pub max_steps: Spanned<u32>,
    /// Sampling settings passed to the model.
    #[serde(default)]
    pub settings: ModelSettings,
    /// Replies of `mock/script`, one per model call.
    #[serde(default)]
    pub script: Option<Spanned<MockScript>>,
    /// How the agent remembers (needs a thread id in the request).
    #[serde(default)]
    pub memory: Option<Spanned<MemoryConfig>>,
    /// A JSON schema every final answer must follow (structured output).
    #[serde(default)]
    pub output_schema: Option<Spanned<serde_json::Value>>,
}

/// A default has no place in the file: its span is empty.
fn no_names() -> Spanned<Vec<String>> {
    Spanned::new(0..0, Vec::new())
}

fn default_max_steps() -> Spanned<u32> {
    Spanned::new(0..0, 5)
}

/// Why a config could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file `{path}`: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys or bad values.
    #[error("invalid config: {0}")]
    Parse(String),
    /// A value is well-formed but wrong (an unknown tool, processor or model).
    #[error("invalid config at line {line}: {message}")]
    Invalid {
        /// 1-based line of the offending table.
        line: usize,
        /// What is wrong, naming the key.
        message: String,
    },
}

impl Config {
    /// Parses config text.
    pub fn parse(source: &str) -> Result<Config, ConfigError> {
        let mut config: Config =
            toml::from_str(source).map_err(|error| ConfigError::Parse(error.to_string()))?;
        config.source = source.to_owned();
        Ok(config)
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let source = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
        let mut config = Config::parse(&source)?;
        config.dir = path.parent().map(Path::to_path_buf);
        Ok(config)
    }

    /// A path the config names, relative to the config file's directory.
    pub fn resolve(&self, path: &str) -> std::path::PathBuf {
        match &self.dir {
            Some(dir) => dir.join(path),
            None => std::path::PathBuf::from(path),
        }
    }

    /// The built-in default config.
    pub fn default_config() -> Config {
        Config::parse(DEFAULT_CONFIG).expect("the default config is valid")
    }

    /// An [`ConfigError::Invalid`] located at byte `offset` of the source.
    pub fn invalid_at(&self, offset: usize, message: String) -> ConfigError {
        let end = offset.min(self.source.len());
        let line = self.source.as_bytes()[..end].iter().filter(|byte| **byte == b'\n').count() + 1;
        ConfigError::Invalid { line, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unknown key fails parsing with its name and line.
    #[test]
    fn unknown_key_names_key_and_line() {
        let source = "[[agents]]\nid = \"a\"\nmodel = \"mock/echo\"\ntemprature = 1\n";
        let error = Config::parse(source).unwrap_err().to_string();
        assert!(error.contains("temprature"), "{error}");
        assert!(error.contains("line 4"), "{error}");
    }
}
