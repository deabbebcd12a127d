//! `regex-filter`: the user's own patterns, blocked or redacted in the input and in the streamed
//! answer. On streams a match split across chunks is still found: the text held back is only the
//! tail from which some pattern could still match (checked with each pattern's automaton), never
//! more than `max_match_chars`.

use std::sync::Arc;

use regex::Regex;
use regex_automata::dfa::{Automaton, dense};
use regex_automata::{Anchored, Input};
use serde::Deserialize;

use super::scan::{Finding, Findings, Redaction, Scanner, Strategy};
use super::scanning::Scanning;
use crate::processor::{BuildError, Processor, parse_options};

pub(super) const KIND: &str = "regex-filter";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternOptions {
    name: String,
    pattern: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    patterns: Vec<PatternOptions>,
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    redaction: Redaction,
    #[serde(default = "default_max_match_chars")]
    max_match_chars: usize,
}

fn default_max_match_chars() -> usize {
    64
}

struct Pattern {
    name: String,
    regex: Regex,
    /// Anchored, to ask whether a match could start at a position and still be completed.
    dfa: dense::DFA<Vec<u32>>,
}

impl Pattern {
    /// True when a match starting at `start` could still be completed by text after `text`.
    fn open_at(&self, text: &str, start: usize) -> bool {
        let input = Input::new(text).range(start..).anchored(Anchored::Yes);
        let Ok(mut state) = self.dfa.start_state_forward(&input) else { return true };
        for &byte in &text.as_bytes()[start..] {
            state = self.dfa.next_state(state, byte);
            if self.dfa.is_dead_state(state) {
                return false;
            }
        }
        true
    }
}

/// The user's patterns.
pub(super) struct RegexScanner {
    patterns: Vec<Pattern>,
    max_match_bytes: usize,
}

impl Scanner for RegexScanner {
    fn findings(&self, text: &str) -> Vec<Finding> {
        let mut findings = Findings::default();
        for pattern in &self.patterns {
            for found in pattern.regex.find_iter(text).filter(|found| !found.is_empty()) {
                findings.offer(found, &pattern.name);
            }
        }
        findings.sorted()
    }

    fn open_tail(&self, text: &str) -> usize {
        let earliest = text.len().saturating_sub(self.max_match_bytes);
        (earliest..text.len())
            .filter(|start| text.is_char_boundary(*start))
            .find(|start| self.patterns.iter().any(|pattern| pattern.open_at(text, *start)))
            .map_or(0, |start| text.len() - start)
    }
}

/// Builds a `regex-filter` from its options.
pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
    let options: Options = parse_options(options)?;
    if options.patterns.is_empty() {
        return Err("`patterns` must hold at least one `{ name, pattern }`".to_owned().into());
    }
    let mut patterns = Vec::with_capacity(options.patterns.len());
    for (index, pattern) in options.patterns.into_iter().enumerate() {
        let field = format!("`patterns[{index}].pattern`");
        let regex = Regex::new(&pattern.pattern).map_err(|error| format!("{field}: {error}"))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(regex_automata::dfa::StartKind::Anchored)
                    .dfa_size_limit(Some(8 << 20)),
            )
            .build(&pattern.pattern)
            .map_err(|error| format!("{field}: too complex to match on streams ({error})"))?;
        patterns.push(Pattern { name: pattern.name, regex, dfa });
    }
    Ok(Arc::new(Scanning {
        id: id.to_owned(),
        report: "regex-filter",
        scanner: RegexScanner { patterns, max_match_bytes: options.max_match_chars.max(1) * 4 },
        strategy: options.strategy,
        redaction: options.redaction,
    }))
}
