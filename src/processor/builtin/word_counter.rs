//! `word-counter`: counts the words streamed in text deltas in its `state`, and at the end of
//! the run emits them as a transient `data-word-count` chunk (the seed's stateful stream
//! accumulator, made observable). A word split across deltas counts once: the state remembers
//! whether the last delta of a text ended inside a word.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{Chunk, DataChunk, Hook, HookSet, Message};
use crate::processor::{BuildError, HookError, OutputResultArgs, OutputStreamArgs, Processor, parse_options};

pub(super) const KIND: &str = "word-counter";
const STATE_KEY: &str = "wordCount";
/// The id of the text whose last delta ended inside a word (none when it ended in a space).
const IN_WORD_KEY: &str = "inWordOf";

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
        if let Chunk::TextDelta { id, text } = &args.part {
            let state = &mut *args.ctx.state;
            let mut in_word = state.get(IN_WORD_KEY).and_then(Value::as_str) == Some(id.as_str());
            let mut words = 0u64;
            for character in text.chars() {
                let inside = !character.is_whitespace();
                words += u64::from(inside && !in_word);
                in_word = inside;
            }
            let count = state.entry(STATE_KEY).or_insert(json!(0));
            *count = json!(count.as_u64().unwrap_or(0).saturating_add(words));
            let ended_in = if in_word { json!(id) } else { Value::Null };
            state.insert(IN_WORD_KEY.to_owned(), ended_in);
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

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::domain::{MessageList, RunInfo};
    use crate::processor::HookContext;

    /// Words split across deltas count once; a new text starts a new word; spaces count nothing.
    #[tokio::test]
    async fn words_split_across_deltas_count_once() {
        let counter = WordCounter::new("words");
        let (run, list) = (RunInfo::default(), MessageList::new());
        let (mut state, mut emitted, mut skipped) = (Map::new(), Vec::new(), Vec::new());
        let deltas = [("a", "echo: the out"), ("a", "put is "), ("a", " fine"), ("b", "again"), ("b", "  ")];
        for (id, text) in deltas {
            let part = Chunk::TextDelta { id: id.into(), text: text.into() };
            let args = OutputStreamArgs {
                ctx: HookContext::new(&run, &mut state, 0, &mut emitted, &mut skipped),
                part: part.clone(),
                stream_parts: std::slice::from_ref(&part),
                message_list: &list,
            };
            counter.process_output_stream(args).await.unwrap();
        }
        assert_eq!(state[STATE_KEY], json!(6), "echo: the output is fine, again");
    }
}
