//! `openai`: any OpenAI-compatible `/v1/embeddings` endpoint — OpenAI, Ollama, TEI, vLLM —
//! called in batches. The key is read from an environment variable at start-up, never from the
//! config file, and never logged.

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use super::{EmbedError, Embedder, SetupError, normalise};

/// An OpenAI-compatible embeddings endpoint.
pub struct OpenAiEmbedder {
    /// The config name, for errors.
    name: String,
    /// Stored with every vector: `openai:<model>[/<dimensions>]`.
    id: String,
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
    dimensions: Option<u32>,
    batch_size: usize,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter.debug_struct("OpenAiEmbedder").field("name", &self.name).field("url", &self.url).finish()
    }
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

/// The options of an `openai` embedder.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiOptions {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// The model, e.g. `text-embedding-3-small`.
    pub model: String,
    /// The key, already read from its environment variable.
    pub api_key: Option<String>,
    /// Ask the endpoint for this many dimensions (OpenAI's `dimensions`).
    pub dimensions: Option<u32>,
    /// Texts per request.
    pub batch_size: usize,
    /// Per request.
    pub timeout: Duration,
}

impl OpenAiEmbedder {
    /// An embedder named `name` (its config name).
    pub fn new(name: &str, options: OpenAiOptions) -> Result<OpenAiEmbedder, SetupError> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|error| SetupError::Client(error.to_string()))?;
        let id = match options.dimensions {
            Some(dimensions) => format!("openai:{}/{dimensions}", options.model),
            None => format!("openai:{}", options.model),
        };
        Ok(OpenAiEmbedder {
            name: name.to_owned(),
            id,
            client,
            url: format!("{}/embeddings", options.base_url.trim_end_matches('/')),
            model: options.model,
            api_key: options.api_key,
            dimensions: options.dimensions,
            batch_size: options.batch_size.max(1),
        })
    }

    fn failure(&self, reason: impl Into<String>) -> EmbedError {
        EmbedError::Failed { embedder: self.name.clone(), reason: reason.into() }
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut body = json!({ "model": self.model, "input": texts });
        if let Some(dimensions) = self.dimensions {
            body["dimensions"] = json!(dimensions);
        }
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|error| self.failure(format!("request to {} failed: {error}", self.url)))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let excerpt: String = text.chars().take(300).collect();
            return Err(self.failure(format!("{} answered {status}: {excerpt}", self.url)));
        }
        let parsed: EmbeddingsResponse =
            response.json().await.map_err(|error| self.failure(format!("unexpected response: {error}")))?;
        if parsed.data.len() != texts.len() {
            return Err(self.failure(format!(
                "asked for {} embeddings, got {}",
                texts.len(),
                parsed.data.len()
            )));
        }
        let mut vectors = vec![Vec::new(); texts.len()];
        for item in parsed.data {
            let slot = vectors
                .get_mut(item.index)
                .ok_or_else(|| self.failure(format!("unexpected index {}", item.index)))?;
            *slot = item.embedding;
            normalise(slot); // some endpoints do not
        }
        Ok(vectors)
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }
}
