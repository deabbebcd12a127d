//! How remote processors connect: `[remote]` (session timing) and `[[processor_tokens]]` (who may
//! register as which processor id).

use serde::Deserialize;

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
    /// A session that has not said `Hello` this long after connecting is closed. Default 10 s.
    #[serde(default = "default_hello_timeout_ms")]
    pub hello_timeout_ms: u64,
    /// Sessions that may be waiting to say `Hello` at once; more are refused at once. Default 64.
    #[serde(default = "default_max_pending_hellos")]
    pub max_pending_hellos: usize,
    /// A starting server reports `agentwire.v1.AgentService` NOT_SERVING until an instance of
    /// every remote processor that fails closed has connected, or this long has passed (then it
    /// serves anyway: runs follow each processor's failure policy). Default 10 s; 0: serve at once.
    #[serde(default = "default_startup_grace_ms")]
    pub startup_grace_ms: u64,
}

impl Default for RemoteConfig {
    fn default() -> RemoteConfig {
        RemoteConfig {
            ping_interval_ms: default_ping_interval_ms(),
            drain_timeout_ms: default_drain_timeout_ms(),
            hello_timeout_ms: default_hello_timeout_ms(),
            max_pending_hellos: default_max_pending_hellos(),
            startup_grace_ms: default_startup_grace_ms(),
        }
    }
}

fn default_ping_interval_ms() -> u64 {
    10_000
}

fn default_hello_timeout_ms() -> u64 {
    10_000
}

fn default_startup_grace_ms() -> u64 {
    10_000
}

fn default_max_pending_hellos() -> usize {
    64
}

fn default_drain_timeout_ms() -> u64 {
    5_000
}
