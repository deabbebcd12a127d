//! `[providers.<name>]`: OpenAI-compatible or Anthropic endpoints beyond the built-in ones.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// A `[providers.<name>]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// `openai` (the default; also for Ollama, vLLM, Groq, …) or `anthropic`.
    #[serde(default)]
    pub api: Option<Api>,
    /// The API root, e.g. `https://api.groq.com/openai/v1`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the key (sent as a bearer token, or `x-api-key`).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra headers on every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long connecting may take. Default 10 s.
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// How long the provider may stay silent — before the response starts and between two
    /// events — before the call is given up. Default 60 s.
    #[serde(default)]
    pub read_timeout_ms: Option<u64>,
    /// How long a call answered in one piece may take: a `Generate` that no processor of the
    /// stream watches asks for the whole answer at once, and the provider is silent until it is
    /// written. Default 600 s.
    #[serde(default)]
    pub answer_timeout_ms: Option<u64>,
    /// Retries after a 429 or a 5xx (or a failed connection). Default 2.
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// Idle connections kept open for the next calls (each holds ~60 KB of buffers); beyond
    /// them, a connection whose call ended is closed. Default 64.
    #[serde(default)]
    pub max_idle_connections: Option<usize>,
}
