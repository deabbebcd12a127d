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
//! Unknown keys and bad values are errors that name the key and its line. The file is plain
//! data: each table has its file here, and everything that can be checked from the file alone is
//! checked in `validate` when it is parsed; names that depend on what the runtime is built with
//! (processor kinds, tools, models) are resolved when the runtime is built.

mod agents;
mod embedders;
mod memory;
mod mock_script;
mod providers;
mod records;
mod remote;
mod server;
mod telemetry;
mod tools;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

pub use self::agents::{AgentConfig, ProcessorEntry};
pub use self::embedders::EmbedderConfig;
pub use self::memory::{
    MemoryConfig, MessageRange, RecallScopeKind, SemanticRecallConfig, WorkingMemoryConfig,
    WorkingMemoryScopeKind,
};
pub use self::mock_script::{MockError, MockReply, MockScript, MockToolCall};
pub use self::providers::{Api, ProviderConfig};
pub use self::records::RecordsConfig;
pub use self::remote::{ProcessorTokenConfig, RemoteConfig};
pub use self::server::{
    ApiKeyConfig, AuthConfig, ConsoleConfig, LimitsConfig, MetricsConfig, PostgresConfig, StorageBackend,
    StorageConfig, TlsConfig,
};
pub use self::telemetry::{LogFormat, SpanDetail, TelemetryConfig};
pub use self::tools::RemoteToolConfig;

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
    /// The operator console.
    #[serde(default)]
    pub console: ConsoleConfig,
    /// Logs and traces.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// How long the records of runs are kept.
    #[serde(default)]
    pub records: RecordsConfig,
    /// The source text, to turn byte offsets into line numbers.
    #[serde(skip)]
    source: String,
    /// The directory of the config file, for the files it names (none: the working directory).
    #[serde(skip)]
    dir: Option<std::path::PathBuf>,
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
        config.validate()?;
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

    /// `[storage.postgres]` is parsed with its defaults, and a recall_ef_search pgvector would
    /// refuse is an error naming the key.
    #[test]
    fn postgres_settings_parse_and_are_checked() {
        let config =
            Config::parse("[storage]\nbackend = \"postgres\"\n[storage.postgres]\npool_size = 4\n").unwrap();
        assert_eq!(config.storage.backend, StorageBackend::Postgres);
        assert_eq!(config.storage.postgres.pool_size, 4);
        assert_eq!(config.storage.postgres.recall_ef_search, 100);
        let error = Config::parse("[storage.postgres]\nrecall_ef_search = 0\n").unwrap_err().to_string();
        assert!(
            error.contains("storage.postgres.recall_ef_search must be between 1 and 1000, got 0"),
            "{error}"
        );
    }
}
