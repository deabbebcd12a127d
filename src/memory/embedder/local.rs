//! `local`: a sentence-transformers model directory (`config.json`, `tokenizer.json`,
//! `model.safetensors`, e.g. all-MiniLM-L6-v2) run in-process with candle on the CPU: BERT, mean
//! pooling over the attention mask, L2 normalisation. Nothing is ever downloaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig, DTYPE};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{EmbedError, Embedder, SetupError};

/// The options of a `local` embedder.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// The model directory.
    pub path: PathBuf,
    /// The id stored with the vectors; the directory's name when absent.
    pub model_id: Option<String>,
    /// Longer texts are truncated to this many tokens.
    pub max_tokens: usize,
    /// Texts per forward pass.
    pub batch_size: usize,
}

/// A BERT sentence-embedding model loaded from a directory.
pub struct LocalEmbedder {
    name: String,
    id: String,
    model: Arc<BertModel>,
    tokenizer: Arc<Tokenizer>,
    batch_size: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("LocalEmbedder").field("name", &self.name).field("id", &self.id).finish()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()))
}

impl LocalEmbedder {
    /// Loads the model; the error names the file at fault.
    pub fn load(name: &str, options: LocalOptions) -> Result<LocalEmbedder, SetupError> {
        Self::load_files(name, options).map_err(SetupError::Model)
    }

    /// Loads the model; the error names the file at fault.
    fn load_files(name: &str, options: LocalOptions) -> Result<LocalEmbedder, String> {
        let config_path = options.path.join("config.json");
        let config: BertConfig = serde_json::from_slice(&read(&config_path)?)
            .map_err(|error| format!("`{}` is not a BERT config: {error}", config_path.display()))?;
        let tokenizer_path = options.path.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|error| format!("cannot load `{}`: {error}", tokenizer_path.display()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: options.max_tokens, ..Default::default() }))
            .map_err(|error| format!("bad max_tokens: {error}"))?;
        let weights_path = options.path.join("model.safetensors");
        let weights = VarBuilder::from_buffered_safetensors(read(&weights_path)?, DTYPE, &Device::Cpu)
            .map_err(|error| format!("cannot load `{}`: {error}", weights_path.display()))?;
        let model = BertModel::load(weights, &config)
            .map_err(|error| format!("`{}` does not hold a BERT model: {error}", weights_path.display()))?;
        let id = options.model_id.unwrap_or_else(|| {
            options
                .path
                .file_name()
                .map_or_else(|| "model".to_owned(), |name| name.to_string_lossy().into_owned())
        });
        Ok(LocalEmbedder {
            name: name.to_owned(),
            id: format!("local:{id}"),
            model: Arc::new(model),
            tokenizer: Arc::new(tokenizer),
            batch_size: options.batch_size.max(1),
        })
    }

    /// One forward pass over a batch: mean-pooled, normalised sentence embeddings.
    fn embed_batch(
        model: &BertModel,
        tokenizer: &Tokenizer,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, String> {
        let encodings = tokenizer.encode_batch(texts.to_vec(), true).map_err(|error| error.to_string())?;
        let device = Device::Cpu;
        let tensor_of = |rows: Vec<&[u32]>| -> Result<Tensor, String> {
            let rows: Vec<Tensor> = rows
                .into_iter()
                .map(|row| Tensor::new(row, &device))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            Tensor::stack(&rows, 0).map_err(|error| error.to_string())
        };
        let ids = tensor_of(encodings.iter().map(|encoding| encoding.get_ids()).collect())?;
        let mask = tensor_of(encodings.iter().map(|encoding| encoding.get_attention_mask()).collect())?;
        let pooled = (|| -> candle_core::Result<Tensor> {
            let type_ids = ids.zeros_like()?;
            let hidden = model.forward(&ids, &type_ids, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let pooled = summed.broadcast_div(&mask.sum(1)?)?;
            let norms = pooled.sqr()?.sum_keepdim(1)?.sqrt()?;
            pooled.broadcast_div(&norms)
        })()
        .map_err(|error| error.to_string())?;
        pooled.to_vec2::<f32>().map_err(|error| error.to_string())
    }
}

#[async_trait::async_trait]
impl Embedder for LocalEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (model, tokenizer, batch_size) =
            (Arc::clone(&self.model), Arc::clone(&self.tokenizer), self.batch_size);
        let texts = texts.to_vec();
        // Tens of milliseconds of CPU per batch: off the async threads.
        let outcome = tokio::task::spawn_blocking(move || {
            let mut vectors = Vec::with_capacity(texts.len());
            for batch in texts.chunks(batch_size) {
                vectors.extend(LocalEmbedder::embed_batch(&model, &tokenizer, batch)?);
            }
            Ok::<_, String>(vectors)
        })
        .await
        .map_err(|error| error.to_string())
        .and_then(|outcome| outcome);
        outcome.map_err(|reason| EmbedError::Failed { embedder: self.name.clone(), reason })
    }
}
