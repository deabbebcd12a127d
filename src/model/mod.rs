//! Language models: the [`LanguageModel`] trait, the request a step sends, the events a model
//! streams back, and the registry that resolves `provider/model` ids.
//!
//! The mock provider ([`mock`]) is production code: deterministic, offline, and the default of the
//! quick start, the demos and the tests. Real models come from HTTP [`provider`]s.

pub mod mock;
pub mod provider;
mod request;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;

pub use self::request::ModelRequest;
use crate::config::MockScript;
use crate::domain::{FinishReason, ToolCall, Usage};

/// What a model streams during one call.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning.
    ReasoningDelta(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// The call is over.
    Finish {
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// Tokens used by the call.
        usage: Usage,
    },
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The provider rejected the request (4xx). Error processors may repair it and retry.
    #[error("model `{model}` rejected the request with status {status}: {message}")]
    Rejected {
        /// The model that was called.
        model: String,
        /// The provider's HTTP-like status code.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached, broke off the stream, or is not set up (no key).
    #[error("model `{model}` is unavailable: {message}")]
    Unavailable {
        /// The model that was called.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// The provider stayed silent longer than its read timeout.
    #[error("model `{model}` stalled: nothing arrived for {after_ms} ms")]
    Stalled {
        /// The model that was called.
        model: String,
        /// The read timeout.
        after_ms: u64,
    },
    /// The model id names no known provider or model. The config or a processor is at fault.
    #[error(
        "unknown model `{0}`: expected `<provider>/<model>` with a configured provider (openai, anthropic, ollama, `[providers.*]`) or `mock/echo`, `mock/inspect`, `mock/script`"
    )]
    UnknownModel(String),
    /// `mock/script` was asked for by an agent that declares no script.
    #[error("model `mock/script` needs a `script` in the agent's config")]
    MissingScript,
}

/// The stream of one model call.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A language model that can serve a step.
#[async_trait::async_trait]
pub trait LanguageModel: Send + Sync {
    /// The `provider/model` id.
    fn id(&self) -> &str;

    /// Starts a call. Rejections may come at once or from the stream.
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError>;
}

/// Resolves `provider/model` ids to models.
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    providers: BTreeMap<String, Arc<provider::Provider>>,
}

impl Default for ModelRegistry {
    fn default() -> ModelRegistry {
        ModelRegistry::new()
    }
}

impl ModelRegistry {
    /// The registry with the built-in providers (mock, openai, anthropic, ollama).
    pub fn new() -> ModelRegistry {
        let providers =
            provider::Provider::builtins().into_iter().map(|p| (p.name().to_owned(), Arc::new(p))).collect();
        ModelRegistry { providers }
    }

    /// Adds a provider, or replaces the one of the same name.
    pub fn add_provider(&mut self, provider: provider::Provider) {
        self.providers.insert(provider.name().to_owned(), Arc::new(provider));
    }

    /// The model for an id. `script` is the agent's mock script, used by `mock/script`.
    pub fn resolve(
        &self,
        model_id: &str,
        script: Option<&Arc<MockScript>>,
    ) -> Result<Arc<dyn LanguageModel>, ModelError> {
        match model_id {
            mock::ECHO => Ok(Arc::new(mock::MockModel::echo())),
            mock::INSPECT => Ok(Arc::new(mock::MockModel::inspect())),
            mock::SCRIPT => match script {
                Some(script) => Ok(Arc::new(mock::MockModel::scripted(Arc::clone(script)))),
                None => Err(ModelError::MissingScript),
            },
            other => match other.split_once('/') {
                Some((name, model)) if !model.is_empty() && name != "mock" => {
                    match self.providers.get(name) {
                        Some(provider) => Ok(Arc::new(provider::HttpModel::new(Arc::clone(provider), model))),
                        None => Err(ModelError::UnknownModel(other.to_owned())),
                    }
                }
                _ => Err(ModelError::UnknownModel(other.to_owned())),
            },
        }
    }
}
