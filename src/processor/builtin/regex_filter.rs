//! `regex-filter`: the user's own patterns, blocked or redacted in the input and in the streamed
//! answer. On streams a match split across chunks is still found: the text held back is only the
//! tail from which some pattern could still match (checked with each pattern's automaton), never
//! more than `max_match_chars`.

use std::sync::Arc;

use regex::Regex;
use regex_automata::dfa::dense;
use serde::Deserialize;

use super::scan::{Finding, Findings, Redaction, Scanner, Strategy, open_at, open_tail_within};
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

/// The user's patterns.
pub(super) struct RegexScanner {
    patterns: Vec<Pattern>,
    max_match_bytes: usize,
}

impl RegexScanner {
    /// The scanner of `(name, pattern)`s, holding back at most `max_match_chars` characters.
    fn new(named: Vec<(String, String)>, max_match_chars: usize) -> Result<RegexScanner, String> {
        let mut patterns = Vec::with_capacity(named.len());
        for (index, (name, pattern)) in named.into_iter().enumerate() {
            let field = format!("`patterns[{index}].pattern`");
            let regex = Regex::new(&pattern).map_err(|error| format!("{field}: {error}"))?;
            let dfa = dense::Builder::new()
                .configure(
                    dense::Config::new()
                        .start_kind(regex_automata::dfa::StartKind::Anchored)
                        .dfa_size_limit(Some(8 << 20)),
                )
                .build(&pattern)
                .map_err(|error| format!("{field}: too complex to match on streams ({error})"))?;
            patterns.push(Pattern { name, regex, dfa });
        }
        Ok(RegexScanner { patterns, max_match_bytes: max_match_chars.max(1) * 4 })
    }
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

    fn open_tail(&self, text: &str, from: usize) -> usize {
        open_tail_within(text, from, self.max_match_bytes, |start| {
            self.patterns.iter().any(|pattern| open_at(&pattern.dfa, text, start))
        })
    }

    /// The character a `\b` at a match's start looks at.
    fn context_bytes(&self) -> usize {
        8
    }
}

/// Builds a `regex-filter` from its options.
pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
    let options: Options = parse_options(options)?;
    if options.patterns.is_empty() {
        return Err("`patterns` must hold at least one `{ name, pattern }`".to_owned().into());
    }
    let named: Vec<(String, String)> =
        options.patterns.into_iter().map(|pattern| (pattern.name, pattern.pattern)).collect();
    let scanner = RegexScanner::new(named, options.max_match_chars)?;
    Ok(Arc::new(Scanning {
        id: id.to_owned(),
        report: "regex-filter",
        scanner,
        strategy: options.strategy,
        redaction: options.redaction,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streamed in deltas split any way, the answer comes out exactly as filtering the whole text
    /// would, for fixed, open-ended and alternative patterns alike.
    #[test]
    fn streams_are_filtered_as_the_whole_text_is() {
        let named = [
            ("order", r"ORD-[0-9]{6}"),
            ("ticket", r"(?i)ticket #?[0-9]+"),
            ("secret", r"pine(apple)?-[0-9]{2}"),
        ];
        let scanner = RegexScanner::new(
            named.iter().map(|(name, pattern)| (name.to_string(), pattern.to_string())).collect(),
            64,
        )
        .unwrap();
        let texts = [
            "Your order ORD-123456 and Ticket #4521 are linked; the code is pineapple-42, not pine-7.",
            "ORD-12345 is too short, ORD-1234567 too long? ticket 9 ticket #10 — pine-99 pineapple-1",
        ];
        for text in texts {
            crate::processor::builtin::scan::assert_stream_safe(&scanner, text, 0..300);
        }
    }
}
