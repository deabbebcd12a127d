//! `content-filter`: aborts the run when the input or the streamed answer contains a blocked
//! word (the seed's hybrid processor example). On streams a word split across deltas is still
//! caught before any of it goes out: the tail that could begin a blocked word is held back until
//! the next delta (or the stream's end) settles it.

use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use regex_automata::dfa::dense;
use serde::Deserialize;

use super::scan::{Finding, Findings, Scanner, open_at, open_tail_within, pass, release};
use crate::domain::{Chunk, Hook, HookSet};
use crate::processor::{
    Abort, BuildError, HookError, InputArgs, InputOutcome, OutputStreamArgs, OutputStreamEndArgs, Processor,
    parse_options,
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
    words: BlockedWords,
}

/// The blocked words as one automaton: findings name the word (as configured, lowercased unless
/// case-sensitive).
#[derive(Debug, Clone)]
struct BlockedWords {
    words: Vec<String>,
    case_sensitive: bool,
    regex: Regex,
    /// Anchored, to ask whether a blocked word could start at a position of a stream's tail.
    dfa: dense::DFA<Vec<u32>>,
    /// The longest word's length in bytes, at any case.
    max_bytes: usize,
}

impl BlockedWords {
    fn new(words: Vec<String>, case_sensitive: bool) -> Result<BlockedWords, String> {
        let words: Vec<String> =
            if case_sensitive { words } else { words.iter().map(|word| word.to_lowercase()).collect() };
        let pattern = words.iter().map(|word| regex::escape(word)).collect::<Vec<_>>().join("|");
        let regex = RegexBuilder::new(&pattern)
            .case_insensitive(!case_sensitive)
            .size_limit(32 << 20)
            .build()
            .map_err(|error| format!("`blocked_words`: {error}"))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .dfa_size_limit(Some(32 << 20)),
            )
            .syntax(regex_automata::util::syntax::Config::new().case_insensitive(!case_sensitive))
            .build(&pattern)
            .map_err(|error| format!("`blocked_words`: too many to match on streams ({error})"))?;
        let max_bytes = words.iter().map(|word| word.chars().count() * 4).max().unwrap_or(4);
        Ok(BlockedWords { words, case_sensitive, regex, dfa, max_bytes })
    }

    /// The configured word a match of the automaton is.
    fn word_of(&self, found: &str) -> &str {
        let found = if self.case_sensitive { found.to_owned() } else { found.to_lowercase() };
        self.words.iter().find(|word| **word == found).map_or("", String::as_str)
    }

    /// The first blocked word in `text`.
    fn first_in(&self, text: &str) -> Option<&str> {
        self.regex.find(text).map(|found| self.word_of(found.as_str()))
    }
}

impl Scanner for BlockedWords {
    fn findings(&self, text: &str) -> Vec<Finding> {
        let mut findings = Findings::default();
        for found in self.regex.find_iter(text) {
            findings.offer(found, self.word_of(found.as_str()));
        }
        findings.sorted()
    }

    fn open_tail(&self, text: &str, from: usize) -> usize {
        open_tail_within(text, from, self.max_bytes, |start| open_at(&self.dfa, text, start))
    }
}

impl ContentFilter {
    /// A filter blocking `blocked_words` (matched case-insensitively; none may be empty).
    pub fn new(id: impl Into<String>, blocked_words: Vec<String>) -> Result<ContentFilter, BuildError> {
        ContentFilter::with_case(id.into(), blocked_words, false)
    }

    fn with_case(
        id: String,
        blocked_words: Vec<String>,
        case_sensitive: bool,
    ) -> Result<ContentFilter, BuildError> {
        if blocked_words.is_empty() || blocked_words.iter().any(String::is_empty) {
            return Err("`blocked_words` must hold at least one word, and no empty one".to_owned().into());
        }
        Ok(ContentFilter { id, words: BlockedWords::new(blocked_words, case_sensitive)? })
    }

    pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
        let options: Options = parse_options(options)?;
        Ok(Arc::new(ContentFilter::with_case(id.to_owned(), options.blocked_words, options.case_sensitive)?))
    }
}

/// The tripwire for a blocked word in the answer.
fn blocked_output(word: &str) -> HookError {
    Abort::new("Blocked content detected in output").metadata(serde_json::json!({ "word": word })).into()
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
            if let Some(word) = self.words.first_in(&message.text()) {
                let metadata = serde_json::json!({ "word": word, "message_id": message.id });
                return Err(Abort::new("Blocked content detected in input").metadata(metadata).into());
            }
        }
        Ok(InputOutcome::Unchanged)
    }

    async fn process_output_stream(&self, args: OutputStreamArgs<'_>) -> Result<Option<Chunk>, HookError> {
        let Chunk::TextDelta { id, text } = &args.part else { return Ok(Some(args.part)) };
        let passage = pass(&self.words, args.ctx.state, id, text);
        if let Some(found) = passage.findings.first() {
            return Err(blocked_output(&found.kind));
        }
        if passage.settled.is_empty() {
            return Ok(None); // all of it may still begin a blocked word: held
        }
        Ok(Some(Chunk::TextDelta { id: id.clone(), text: passage.settled }))
    }

    async fn process_output_stream_end(
        &self,
        args: OutputStreamEndArgs<'_>,
    ) -> Result<Vec<Chunk>, HookError> {
        let mut out = Vec::new();
        for (id, held) in release(&self.words, args.ctx.state) {
            if let Some(found) = held.findings.first() {
                return Err(blocked_output(&found.kind));
            }
            out.push(Chunk::TextDelta { id, text: held.settled });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streamed in deltas split any way, the words found are those of the whole text, and none
    /// of a word goes out before it is found (the property every scanning processor has).
    #[test]
    fn streams_find_split_words_before_any_of_them_goes_out() {
        let words = BlockedWords::new(vec!["Darn".into(), "heck".into(), "Straße".into()], false).unwrap();
        let texts = [
            "Well, DARN it: what the HeCk is this? A STRASSE, no, a strasse, no: a STRAẞE.",
            "dar da d he hec heckle darnit darn",
            "none of them here, only d, h and s at the end: d",
        ];
        for text in texts {
            crate::processor::builtin::scan::assert_stream_safe(&words, text, 0..300);
        }
        let sensitive = BlockedWords::new(vec!["NO".into()], true).unwrap();
        assert!(sensitive.findings("no No nO").is_empty());
        assert_eq!(sensitive.findings("say NO").len(), 1);
    }

    /// A finding names the word as configured (lowercased), whatever its case in the text.
    #[test]
    fn findings_name_the_configured_word() {
        let words = BlockedWords::new(vec!["Heck".into()], false).unwrap();
        assert_eq!(words.first_in("oh HECK"), Some("heck"));
        assert_eq!(words.first_in("oh hell"), None);
    }
}
