//! The server's own tables: `[auth]` (client API keys), `[tls]`, `[limits]`, `[metrics]`,
//! `[console]` and `[storage]`.

use serde::Deserialize;
use toml::Spanned;

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
    /// The `replica` label on every series, to tell replicas apart in one Prometheus. Default:
    /// the machine's host name (a pod's name in Kubernetes).
    #[serde(default)]
    pub replica: Option<String>,
}

/// The `[console]` table: the operator console's pages.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Where the console is served (an address of its own, e.g. `127.0.0.1:8080`); none: not
    /// served. With `[tls]`, over HTTPS with the same certificate. Beyond loopback it takes
    /// `[tls]` (API keys would cross the network in the clear) unless `allow_plaintext` says so.
    #[serde(default)]
    pub listen: Option<std::net::SocketAddr>,
    /// Serve the console beyond loopback without TLS (behind a proxy that terminates it).
    #[serde(default)]
    pub allow_plaintext: bool,
    /// The host names the console is reached by, besides IP addresses and `localhost`: a request
    /// naming any other `Host` is refused, so a page that rebinds its own name to the console's
    /// address gets nothing. E.g. `["console.internal.example"]`.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// On a server without API keys, let the console run agents (the playground) and write or
    /// delete memory. Default false: without keys the console only reads.
    #[serde(default)]
    pub allow_unauthenticated_writes: bool,
    /// Connections the console holds at once; past it the next waits to be accepted.
    /// Default 256.
    #[serde(default = "default_console_max_connections")]
    pub max_connections: usize,
    /// How long a connection may take to send a request's whole header, from connecting or from
    /// its last answer (an idle connection is closed then). Default 10000.
    #[serde(default = "default_console_header_timeout_ms")]
    pub header_timeout_ms: u64,
}

impl Default for ConsoleConfig {
    fn default() -> ConsoleConfig {
        ConsoleConfig {
            listen: None,
            allow_plaintext: false,
            hosts: Vec::new(),
            allow_unauthenticated_writes: false,
            max_connections: default_console_max_connections(),
            header_timeout_ms: default_console_header_timeout_ms(),
        }
    }
}

fn default_console_max_connections() -> usize {
    256
}

fn default_console_header_timeout_ms() -> u64 {
    10_000
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
    /// RESOURCE_EXHAUSTED. Default 1024 — Envoy's default for requests in flight to one
    /// upstream: a run waiting on its provider holds little, and a gateway at 512 streams must
    /// not queue half of them; 0: no limit.
    #[serde(default = "default_max_concurrent_runs")]
    pub max_concurrent_runs: usize,
    /// Runs one caller may have at once — an API key, or without keys a connection — so that
    /// no caller can take every slot from the others; past it a run is refused at once
    /// (RESOURCE_EXHAUSTED). A key may set its own (`[[auth.keys]] max_concurrent_runs`).
    /// Default 256, a quarter of `max_concurrent_runs`'s default; 0: no share.
    #[serde(default = "default_max_concurrent_runs_per_caller")]
    pub max_concurrent_runs_per_caller: usize,
    /// Connections the gRPC port holds at once; past it the next waits to be accepted (in the
    /// kernel's queue, holding none of the process's files). Default 10,000; 0: no limit.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
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
    /// A streaming client that leaves no room for the next chunk for this long is cut off: its
    /// stream ends with RESOURCE_EXHAUSTED and its run stops (nothing saved). Default 10000.
    #[serde(default = "default_slow_client_ms")]
    pub slow_client_ms: u64,
    /// What one stream's chunks its client has not read may take, in KiB; past it the run waits
    /// for the client (up to `slow_client_ms`). Default 256.
    #[serde(default = "default_max_stream_buffer_kb")]
    pub max_stream_buffer_kb: usize,
    /// What all streams' unread chunks may take, in MiB; past it the stream holding the most is
    /// cut off at once (RESOURCE_EXHAUSTED, its run stopped). Default 256.
    #[serde(default = "default_max_buffered_mb")]
    pub max_buffered_mb: usize,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        LimitsConfig {
            max_request_bytes: default_max_request_bytes(),
            max_message_bytes: default_max_message_bytes(),
            max_steps: default_max_steps_limit(),
            max_concurrent_runs: default_max_concurrent_runs(),
            max_concurrent_runs_per_caller: default_max_concurrent_runs_per_caller(),
            max_connections: default_max_connections(),
            queue_timeout_ms: default_queue_timeout_ms(),
            max_run_ms: 0,
            shutdown_grace_ms: default_shutdown_grace_ms(),
            slow_client_ms: default_slow_client_ms(),
            max_stream_buffer_kb: default_max_stream_buffer_kb(),
            max_buffered_mb: default_max_buffered_mb(),
        }
    }
}

fn default_max_concurrent_runs() -> usize {
    1024
}

fn default_max_connections() -> usize {
    10_000
}

fn default_max_concurrent_runs_per_caller() -> usize {
    256
}

fn default_slow_client_ms() -> u64 {
    10_000
}

fn default_max_stream_buffer_kb() -> usize {
    256
}

fn default_max_buffered_mb() -> usize {
    256
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
    /// The agents whose instructions `GetAgent` and `ListAgents` show it: exact ids, `prefix*`, or
    /// `*`. Default none: instructions are the system prompt `system-prompt-scrubber` keeps from
    /// leaking, so no caller reads them unless a key is allowed to.
    #[serde(default)]
    pub instructions: Vec<String>,
    /// May see the server's operations: `ProcessorService.ListProcessors` (the connected
    /// processors, their instances and load). Default false.
    #[serde(default)]
    pub admin: bool,
    /// Runs it may have at once (default `[limits] max_concurrent_runs_per_caller`; 0: no share).
    #[serde(default)]
    pub max_concurrent_runs: Option<usize>,
    /// Requests per second it may make, on average (none: no limit).
    #[serde(default)]
    pub rate_per_second: Option<f64>,
    /// Requests it may make at once above the rate. Default: one second's worth.
    #[serde(default)]
    pub burst: Option<u32>,
    /// The threads each resource it writes to may keep (0: no limit); default `[storage]`'s.
    #[serde(default)]
    pub max_resource_threads: Option<u64>,
    /// The messages each resource it writes to may keep (0: no limit); default `[storage]`'s.
    #[serde(default)]
    pub max_resource_messages: Option<u64>,
    /// The MiB of messages each resource it writes to may keep (0: no limit); default `[storage]`'s.
    #[serde(default)]
    pub max_resource_mb: Option<u64>,
    /// The resources it may create (0: no limit); default `[storage] max_key_resources`.
    #[serde(default)]
    pub max_resources: Option<u64>,
}

impl ApiKeyConfig {
    /// The quota of the resources this key writes to: its own settings over `defaults`.
    pub fn resource_quota(&self, defaults: crate::domain::ResourceQuota) -> crate::domain::ResourceQuota {
        crate::domain::ResourceQuota {
            threads: self.max_resource_threads.map_or(defaults.threads, limit),
            messages: self.max_resource_messages.map_or(defaults.messages, limit),
            bytes: self.max_resource_mb.map_or(defaults.bytes, mib_limit),
        }
    }

    /// How many resources this key may create: its own setting over `default` (0: no limit).
    pub fn resource_allowance(&self, default: u64) -> Option<crate::domain::ResourceAllowance> {
        let max_resources = limit(self.max_resources.unwrap_or(default))?;
        Some(crate::domain::ResourceAllowance { key_name: self.name.clone(), max_resources })
    }
}

fn every_agent() -> Vec<String> {
    vec!["*".to_owned()]
}

/// The `[storage]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Where memory is kept: `sled` (embedded in the data directory, the default) or `postgres`
    /// (PostgreSQL 15+ with pgvector, shared by several replicas; `[storage.postgres]`).
    #[serde(default)]
    pub backend: StorageBackend,
    /// The PostgreSQL store, for `backend = "postgres"`.
    #[serde(default)]
    pub postgres: PostgresConfig,
    /// The largest file part (inline data, in bytes) a run with memory may store; larger ones are
    /// refused before the run starts. Default 1 MiB.
    #[serde(default = "default_max_file_bytes")]
    pub max_file_bytes: usize,
    /// The store's page cache, in MiB. Default 16: the server's memory stays bounded however much
    /// it stores (recall keeps its own in-memory copy of the vectors it searches). sled holds
    /// about twice what it counts here, and the operating system caches the files beneath it, so
    /// a larger cache bought no measurable speed in the bench and cost memory (BENCHMARKS.md).
    #[serde(default = "default_cache_mb")]
    pub cache_mb: u64,
    /// The memory semantic recall's in-memory vectors may take, in MiB: past it the least
    /// recently searched resources are dropped (and read from disk again when searched).
    /// Default 256.
    #[serde(default = "default_recall_index_mb")]
    pub recall_index_mb: u64,
    /// The free space, in MiB, writes leave on the data directory's disk: below it runs that
    /// would save and memory writes are refused with UNAVAILABLE (reads and deletes still
    /// work) until space is freed, so the database never fills the disk. Default 128; at least
    /// 1 with sled, which is not trusted to run out of space mid-write.
    #[serde(default = "default_min_free_mb")]
    pub min_free_mb: u64,
    /// A thread's title, in bytes. Default 1 KiB.
    #[serde(default = "default_max_title_bytes")]
    pub max_title_bytes: usize,
    /// A thread's metadata, as JSON, in bytes. Default 16 KiB.
    #[serde(default = "default_max_metadata_bytes")]
    pub max_metadata_bytes: usize,
    /// A working-memory document, in bytes (the API's and the model's updates alike). Default 64 KiB.
    #[serde(default = "default_max_working_memory_bytes")]
    pub max_working_memory_bytes: usize,
    /// The threads one resource may keep (0: no limit). Default 10,000. An API key may set its own.
    #[serde(default = "default_max_resource_threads")]
    pub max_resource_threads: u64,
    /// The messages one resource may keep (0: no limit). Default 1,000,000.
    #[serde(default = "default_max_resource_messages")]
    pub max_resource_messages: u64,
    /// The MiB of messages (with their embeddings) one resource may keep (0: no limit). Default 1024.
    #[serde(default = "default_max_resource_mb")]
    pub max_resource_mb: u64,
    /// The resources one API key may create (0, the default: no limit; a key may set its own).
    /// Each counts, as the key's that first wrote to it, until it is deleted; a write that would
    /// create one more is refused with RESOURCE_EXHAUSTED. With the per-resource quotas above it
    /// bounds what one key may keep in all.
    #[serde(default)]
    pub max_key_resources: u64,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig {
            backend: StorageBackend::default(),
            postgres: PostgresConfig::default(),
            max_file_bytes: default_max_file_bytes(),
            cache_mb: default_cache_mb(),
            recall_index_mb: default_recall_index_mb(),
            min_free_mb: default_min_free_mb(),
            max_title_bytes: default_max_title_bytes(),
            max_metadata_bytes: default_max_metadata_bytes(),
            max_working_memory_bytes: default_max_working_memory_bytes(),
            max_resource_threads: default_max_resource_threads(),
            max_resource_messages: default_max_resource_messages(),
            max_resource_mb: default_max_resource_mb(),
            max_key_resources: 0,
        }
    }
}

impl StorageConfig {
    /// What one resource may keep, unless its caller's API key says otherwise.
    pub fn resource_quota(&self) -> crate::domain::ResourceQuota {
        crate::domain::ResourceQuota {
            threads: limit(self.max_resource_threads),
            messages: limit(self.max_resource_messages),
            bytes: mib_limit(self.max_resource_mb),
        }
    }

    /// The size limits of stored values.
    pub fn field_limits(&self) -> crate::domain::FieldLimits {
        crate::domain::FieldLimits {
            title: self.max_title_bytes,
            metadata: self.max_metadata_bytes,
            working_memory: self.max_working_memory_bytes,
        }
    }
}

/// Where memory is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// Embedded sled, in the data directory.
    #[default]
    Sled,
    /// PostgreSQL with pgvector.
    Postgres,
}

/// The `[storage.postgres]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// The environment variable holding the connection URL
    /// (`postgres://user:password@host:5432/database`): the password never goes in the file.
    /// Default `AGENTWIRE_POSTGRES_URL`.
    #[serde(default = "default_postgres_url_env")]
    pub url_env: String,
    /// Connections kept open at most. Default 16.
    #[serde(default = "default_postgres_pool_size")]
    pub pool_size: usize,
    /// Longest a statement may run, in milliseconds, before PostgreSQL cancels it (the call
    /// fails with UNAVAILABLE). Default 10,000.
    #[serde(default = "default_postgres_statement_timeout_ms")]
    pub statement_timeout_ms: u64,
    /// Candidates semantic recall's HNSW search keeps (`hnsw.ef_search`, 1–1000): more finds
    /// the exact nearest messages more often, at more time per recall. Default 100.
    #[serde(default = "default_postgres_recall_ef_search")]
    pub recall_ef_search: u32,
    /// A PEM file of the CAs the server's certificate must chain to, relative to the config
    /// file; default the system's. TLS itself is the URL's `sslmode` (`disable`, `prefer`,
    /// `require`); whenever it is used, the certificate and host name are verified.
    #[serde(default)]
    pub ca_file: Option<String>,
}

impl Default for PostgresConfig {
    fn default() -> PostgresConfig {
        PostgresConfig {
            url_env: default_postgres_url_env(),
            pool_size: default_postgres_pool_size(),
            statement_timeout_ms: default_postgres_statement_timeout_ms(),
            recall_ef_search: default_postgres_recall_ef_search(),
            ca_file: None,
        }
    }
}

fn default_postgres_url_env() -> String {
    "AGENTWIRE_POSTGRES_URL".to_owned()
}

fn default_postgres_pool_size() -> usize {
    16
}

fn default_postgres_statement_timeout_ms() -> u64 {
    10_000
}

fn default_postgres_recall_ef_search() -> u32 {
    100
}

/// A limit as configured: 0 is none.
fn limit(value: u64) -> Option<u64> {
    (value > 0).then_some(value)
}

/// A limit configured in MiB, in bytes: 0 is none.
fn mib_limit(mb: u64) -> Option<u64> {
    limit(mb).map(|mb| mb.saturating_mul(1024 * 1024))
}

fn default_max_resource_threads() -> u64 {
    10_000
}

fn default_max_resource_messages() -> u64 {
    1_000_000
}

fn default_max_resource_mb() -> u64 {
    1024
}

fn default_max_title_bytes() -> usize {
    crate::domain::FieldLimits::default().title
}

fn default_max_metadata_bytes() -> usize {
    crate::domain::FieldLimits::default().metadata
}

fn default_max_working_memory_bytes() -> usize {
    crate::domain::FieldLimits::default().working_memory
}

fn default_recall_index_mb() -> u64 {
    256
}

fn default_min_free_mb() -> u64 {
    128
}

fn default_cache_mb() -> u64 {
    16
}

fn default_max_file_bytes() -> usize {
    1024 * 1024
}
