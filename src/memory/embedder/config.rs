//! `[embedders.<name>]`: embedders declared in the config.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{Embedder, LocalEmbedder, LocalOptions, OpenAiEmbedder, OpenAiOptions};

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

impl EmbedderConfig {
    /// Builds the embedder; the error names the bad option (or the missing variable).
    pub fn build(&self, name: &str) -> Result<std::sync::Arc<dyn Embedder>, String> {
        match self {
            EmbedderConfig::Openai { base_url, model, api_key_env, dimensions, batch_size, timeout_ms } => {
                let api_key = match api_key_env {
                    Some(variable) => Some(std::env::var(variable).map_err(|_| {
                        format!("api_key_env: the environment variable `{variable}` is not set")
                    })?),
                    None => None,
                };
                let options = OpenAiOptions {
                    base_url: base_url.clone(),
                    model: model.clone(),
                    api_key,
                    dimensions: *dimensions,
                    batch_size: *batch_size,
                    timeout: Duration::from_millis(*timeout_ms),
                };
                Ok(std::sync::Arc::new(OpenAiEmbedder::new(name, options)?))
            }
            EmbedderConfig::Local { path, model_id, max_tokens, batch_size } => {
                let options = LocalOptions {
                    path: path.clone(),
                    model_id: model_id.clone(),
                    max_tokens: *max_tokens,
                    batch_size: *batch_size,
                };
                let embedder =
                    LocalEmbedder::load(name, options).map_err(|reason| format!("path: {reason}"))?;
                Ok(std::sync::Arc::new(embedder))
            }
        }
    }
}
