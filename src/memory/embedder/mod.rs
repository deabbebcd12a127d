//! Embedders: text to vectors for semantic recall. [`Lexical`] is built in and needs no files and
//! no network, so recall works out of the box.

mod lexical;

use std::fmt::Debug;

pub use self::lexical::Lexical;

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

/// Turns texts into L2-normalised vectors of one dimension.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync + Debug {
    /// A stable id naming the model (and its version): stored with every vector, so that vectors
    /// of another model are never compared with this one's.
    fn id(&self) -> &str;

    /// The dimension of every vector.
    fn dimension(&self) -> usize;

    /// Embeds each text.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// The embedder with this config name (`lexical`); `None` for an unknown name.
pub fn by_name(name: &str) -> Option<std::sync::Arc<dyn Embedder>> {
    match name {
        lexical::NAME => Some(std::sync::Arc::new(Lexical::new())),
        _ => None,
    }
}
