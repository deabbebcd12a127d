//! `word-counter`: counts the words streamed in text deltas in its `state`, and at the end of
//! the run emits them as a transient `data-word-count` chunk (the seed's stateful stream
//! accumulator, made observable).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{Chunk, DataChunk, Hook, HookSet, Message};
use crate::processor::{BuildError, HookError, OutputResultArgs, OutputStreamArgs, Processor, parse_options};

pub(super) const KIND: &str = "word-counter";
const STATE_KEY: &str = "wordCount";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {}

/// Counts streamed words.
#[derive(Debug, Clone)]
pub struct WordCounter {
    id: String,
}

impl WordCounter {
    /// A word counter.
    pub fn new(id: impl Into<String>) -> WordCounter {
        WordCounter { id: id.into() }
    }

    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let Options {} = parse_options(options)?;
        Ok(Arc::new(WordCounter::new(id)))
    }
}

#[async_trait::async_trait]
impl Processor for WordCounter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessOutputStream, Hook::ProcessOutputResult])
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        if let Chunk::TextDelta { text, .. } = &args.part {
            let words = u64::try_from(text.split_whitespace().count()).unwrap_or(u64::MAX);
            let count = args.ctx.state.entry(STATE_KEY).or_insert(json!(0));
            *count = json!(count.as_u64().unwrap_or(0) + words);
        }
        Ok(Some(args.part))
    }

    async fn process_output_result(
        &self,
        mut args: OutputResultArgs<'_>,
    ) -> Result<Option<Vec<Message>>, HookError> {
        let count = args.ctx.state.get(STATE_KEY).and_then(Value::as_u64).unwrap_or(0);
        args.ctx.emit(DataChunk::new("word-count", json!({ "words": count })).transient());
        Ok(None)
    }
}
