//! `[embedders.<name>]`: embedders declared in the config.

use std::path::PathBuf;

use serde::Deserialize;

/// One declared embedder, by kind.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum EmbedderConfig {
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    Openai {
        /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
        base_url: String,
        /// The model.
        model: String,
        /// The environment variable holding the key (none for local endpoints).
        #[serde(default)]
        api_key_env: Option<String>,
        /// Ask for this many dimensions.
        #[serde(default)]
        dimensions: Option<u32>,
        /// Texts per request. Default 64.
        #[serde(default = "default_batch_size")]
        batch_size: usize,
        /// Per request, in milliseconds. Default 30000.
        #[serde(default = "default_timeout_ms")]
        timeout_ms: u64,
    },
    /// A sentence-transformers model directory run in-process (`config.json`, `tokenizer.json`,
    /// `model.safetensors`).
    Local {
        /// The model directory.
        path: PathBuf,
        /// The id stored with the vectors; the directory's name when absent.
        #[serde(default)]
        model_id: Option<String>,
        /// Longer texts are truncated to this many tokens. Default 256.
        #[serde(default = "default_max_tokens")]
        max_tokens: usize,
        /// Texts per forward pass. Default 32.
        #[serde(default = "default_local_batch_size")]
        batch_size: usize,
    },
}

fn default_max_tokens() -> usize {
    256
}

fn default_local_batch_size() -> usize {
    32
}

fn default_batch_size() -> usize {
    64
}

fn default_timeout_ms() -> u64 {
    30_000
}
