//! Embedders: text to vectors for semantic recall. [`Lexical`] is built in and needs no files and
//! no network, so recall works out of the box; [`OpenAiEmbedder`] calls any OpenAI-compatible
//! endpoint; [`LocalEmbedder`] runs a sentence-transformers model directory in-process. Agents name them in `semantic_recall.embedder`; `[embedders.<name>]` declares more.

mod lexical;
#[cfg(feature = "local-embedder")]
mod local;
mod openai;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

pub use self::lexical::Lexical;
#[cfg(feature = "local-embedder")]
pub use self::local::{LocalEmbedder, LocalOptions};
pub use self::openai::{OpenAiEmbedder, OpenAiOptions};
use crate::config::EmbedderConfig;

/// The name of the built-in embedder.
pub const LEXICAL: &str = lexical::NAME;

/// Why texts could not be embedded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmbedError {
    /// The embedder failed (a remote endpoint, a model file...).
    #[error("embedder `{embedder}` failed: {reason}")]
    Failed {
        /// The embedder.
        embedder: String,
        /// What went wrong.
        reason: String,
    },
}

/// Why an `[embedders.<name>]` table does not make an embedder. The config (or the model files
/// it names) is at fault; the message starts with the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// `api_key_env` names a variable that is not set.
    #[error("api_key_env: the environment variable `{0}` is not set")]
    MissingKey(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The local model could not be loaded; the message names the file at fault.
    #[error("path: {0}")]
    Model(String),
    /// This build leaves out the local embedder (the `local-embedder` feature).
    #[error("kind: `local` needs a build with the `local-embedder` feature")]
    NotBuilt,
}

/// Turns texts into L2-normalised vectors.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync + Debug {
    /// A stable id naming the model (and its version): stored with the vectors, so that vectors
    /// of another model are never compared with this one's.
    fn id(&self) -> &str;

    /// Embeds each text.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalise(vector: &mut [f32]) {
    let norm = vector.iter().map(|value| value * value).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|value| *value /= norm);
    }
}

/// The embedders agents can name: `lexical` and the config's `[embedders.*]`.
#[derive(Debug, Clone)]
pub struct Embedders {
    by_name: BTreeMap<String, Arc<dyn Embedder>>,
}

impl Default for Embedders {
    fn default() -> Embedders {
        let mut by_name: BTreeMap<String, Arc<dyn Embedder>> = BTreeMap::new();
        by_name.insert(LEXICAL.to_owned(), Arc::new(Lexical::new()));
        Embedders { by_name }
    }
}

impl Embedders {
    /// Adds an embedder under a name.
    pub fn insert(&mut self, name: &str, embedder: Arc<dyn Embedder>) {
        self.by_name.insert(name.to_owned(), embedder);
    }

    /// The embedder with this name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Embedder>> {
        self.by_name.get(name)
    }

    /// The embedder whose id is `id` (as the store records it, with or without `/<dimension>`).
    pub fn by_id(&self, id: &str) -> Option<&Arc<dyn Embedder>> {
        let id = id.rsplit_once('/').map_or(id, |(id, _dimension)| id);
        self.by_name.values().find(|embedder| embedder.id() == id)
    }

    /// The names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// Builds the embedder; the error names the bad option (or the missing variable).
pub fn build(name: &str, config: &EmbedderConfig) -> Result<Arc<dyn Embedder>, SetupError> {
    match config {
        EmbedderConfig::Openai { base_url, model, api_key_env, dimensions, batch_size, timeout_ms } => {
            let api_key = match api_key_env {
                Some(variable) => {
                    Some(std::env::var(variable).map_err(|_| SetupError::MissingKey(variable.clone()))?)
                }
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
            Ok(Arc::new(OpenAiEmbedder::new(name, options)?))
        }
        #[cfg(not(feature = "local-embedder"))]
        EmbedderConfig::Local { .. } => Err(SetupError::NotBuilt),
        #[cfg(feature = "local-embedder")]
        EmbedderConfig::Local { path, model_id, max_tokens, batch_size } => {
            let options = LocalOptions {
                path: path.clone(),
                model_id: model_id.clone(),
                max_tokens: *max_tokens,
                batch_size: *batch_size,
            };
            let embedder = LocalEmbedder::load(name, options)?;
            Ok(Arc::new(embedder))
        }
    }
}
