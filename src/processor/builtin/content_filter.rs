//! `content-filter`: aborts the run when the input or a streamed text delta contains a blocked
//! word (the seed's hybrid processor example).

use std::sync::Arc;

use serde::Deserialize;

use crate::domain::{Chunk, Hook, HookSet};
use crate::processor::{
    Abort, BuildError, HookError, InputArgs, InputOutcome, OutputStreamArgs, Processor, parse_options,
};

pub(super) const KIND: &str = "content-filter";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    blocked_words: Vec<String>,
    #[serde(default)]
    case_sensitive: bool,
}

/// Blocks input and output containing any of its words.
#[derive(Debug, Clone)]
pub struct ContentFilter {
    id: String,
    /// Lowercased unless `case_sensitive`.
    blocked_words: Vec<String>,
    case_sensitive: bool,
}

impl ContentFilter {
    /// A filter blocking `blocked_words` (matched case-insensitively).
    pub fn new(id: impl Into<String>, blocked_words: Vec<String>) -> ContentFilter {
        let blocked_words = blocked_words.iter().map(|word| word.to_lowercase()).collect();
        ContentFilter { id: id.into(), blocked_words, case_sensitive: false }
    }

    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        if options.blocked_words.iter().any(String::is_empty) {
            return Err("`blocked_words` must not contain an empty word".to_owned().into());
        }
        let mut filter = ContentFilter::new(id, options.blocked_words.clone());
        if options.case_sensitive {
            filter.blocked_words = options.blocked_words;
            filter.case_sensitive = true;
        }
        Ok(Arc::new(filter))
    }

    fn blocked_word_in(&self, text: &str) -> Option<&str> {
        let haystack = if self.case_sensitive { text.to_owned() } else { text.to_lowercase() };
        self.blocked_words.iter().find(|word| haystack.contains(word.as_str())).map(String::as_str)
    }
}

#[async_trait::async_trait]
impl Processor for ContentFilter {
    fn id(&self) -> &str {
        &self.id
    }

    fn hooks(&self) -> HookSet {
        HookSet::of(&[Hook::ProcessInput, Hook::ProcessOutputStream])
    }

    async fn process_input(&self, args: InputArgs<'_>) -> Result<InputOutcome, HookError> {
        for message in super::own_input(&args.messages, args.message_list) {
            if let Some(word) = self.blocked_word_in(&message.text()) {
                let metadata = serde_json::json!({ "word": word, "message_id": message.id });
                return Err(Abort::new("Blocked content detected in input").metadata(metadata).into());
            }
        }
        Ok(InputOutcome::Unchanged)
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        if let Chunk::TextDelta { text, .. } = &args.part
            && let Some(word) = self.blocked_word_in(text)
        {
            let metadata = serde_json::json!({ "word": word });
            return Err(Abort::new("Blocked content detected in output").metadata(metadata).into());
        }
        Ok(Some(args.part))
    }
}
