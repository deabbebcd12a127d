//! `system-prompt-scrubber`: finds the run's system prompt (the agent's instructions and what
//! processors put beside them — not memory's tagged blocks) leaking into the streamed answer, and
//! redacts, blocks or reports it.
//!
//! A leak is `min_words` consecutive words of the prompt, compared case-blind and ignoring
//! punctuation and spacing, so a model reformatting the prompt is still caught; consecutive
//! matches merge into one leak, redacted whole. On streams only the answer's last words that
//! could still begin a leak are held back (never more than `min_words` words), so no part of a
//! leak reaches the client. Paraphrases are not caught: that takes a judge (`moderation`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use super::scan::{Finding, Redaction, Scanner, Strategy};
use super::scanning::{ScannerFor, Scanning};
use crate::domain::MessageList;
use crate::processor::{BuildError, Processor, parse_options};

pub(super) const KIND: &str = "system-prompt-scrubber";

/// Prompts shorter than this many words are not looked for: too common to tell from chance.
const MIN_PROMPT_WORDS: usize = 3;
/// Distinct system prompts remembered at once (a processor rewriting the prompt per run makes
/// new ones).
const CACHED_PROMPTS: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default)]
    strategy: Strategy,
    #[serde(default)]
    redaction: Redaction,
    #[serde(default = "default_min_words")]
    min_words: usize,
}

fn default_min_words() -> usize {
    8
}

/// A word of a text: its byte range and its hash (lowercased).
#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
    hash: u64,
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x100_0000_01b3;

/// The words of `text` — runs of letters and digits — each hashed lowercased (FNV-1a).
fn words(text: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current: Option<(usize, u64)> = None;
    for (at, char) in text.char_indices() {
        if char.is_alphanumeric() {
            let (_, hash) = current.get_or_insert((at, FNV_OFFSET));
            for lower in char.to_lowercase() {
                *hash = (*hash ^ u64::from(u32::from(lower))).wrapping_mul(FNV_PRIME);
            }
        } else if let Some((start, hash)) = current.take() {
            words.push(Word { start, end: at, hash });
        }
    }
    if let Some((start, hash)) = current {
        words.push(Word { start, end: text.len(), hash });
    }
    words
}

/// The hash of a run of words.
fn sequence(words: &[Word]) -> u64 {
    words.iter().fold(FNV_OFFSET, |hash, word| (hash ^ word.hash).wrapping_mul(FNV_PRIME))
}

/// One system prompt, as runs of words to look for.
struct PromptScanner {
    /// The run length that makes a leak.
    window: usize,
    /// `runs[k - 1]`: every run of `k` consecutive prompt words, for `k` up to `window`.
    runs: Vec<HashSet<u64>>,
}

impl PromptScanner {
    fn new(prompt: &str, min_words: usize) -> Option<PromptScanner> {
        let prompt_words = words(prompt);
        if prompt_words.len() < MIN_PROMPT_WORDS {
            return None;
        }
        let window = min_words.min(prompt_words.len());
        let runs = (1..=window)
            .map(|length| prompt_words.windows(length).map(sequence).collect::<HashSet<u64>>())
            .collect();
        Some(PromptScanner { window, runs })
    }

    fn is_run(&self, words: &[Word]) -> bool {
        self.runs[words.len() - 1].contains(&sequence(words))
    }
}

impl Scanner for PromptScanner {
    fn findings(&self, text: &str) -> Vec<Finding> {
        let words = words(text);
        let mut findings: Vec<Finding> = Vec::new();
        for (at, window) in words.windows(self.window).enumerate() {
            if !self.is_run(window) {
                continue;
            }
            let (start, end) = (words[at].start, window[self.window - 1].end);
            match findings.last_mut() {
                Some(last) if start <= last.end => last.end = end,
                _ => findings.push(Finding { start, end, kind: "system-prompt".to_owned() }),
            }
        }
        findings
    }

    fn open_tail(&self, text: &str, from: usize) -> usize {
        let words = words(text);
        // A last word not yet ended may be the start of a longer one: hold it, then look for the
        // longest run of whole words before it that the prompt holds.
        let unfinished = usize::from(words.last().is_some_and(|word| word.end == text.len()));
        let whole = &words[..words.len() - unfinished];
        let longest = (1..self.window.min(whole.len() + 1))
            .rev()
            .find(|&length| self.is_run(&whole[whole.len() - length..]))
            .unwrap_or(0);
        match words.get(words.len() - unfinished - longest) {
            Some(first) => (text.len() - first.start).min(text.len() - from),
            None => 0,
        }
    }
}

/// A system prompt seen (its messages) and its scanner (none when too short).
type Cached = (Vec<String>, Option<Arc<PromptScanner>>);

/// The scanner of each system prompt seen, made once.
struct Prompts {
    min_words: usize,
    cache: Mutex<Vec<Cached>>,
}

impl Prompts {
    fn scanner(&self, system: &[String]) -> Option<Arc<PromptScanner>> {
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, scanner)) = cache.iter().find(|(prompt, _)| prompt.as_slice() == system) {
            return scanner.clone();
        }
        let scanner = PromptScanner::new(&system.join("\n"), self.min_words).map(Arc::new);
        if cache.len() == CACHED_PROMPTS {
            cache.remove(0);
        }
        cache.push((system.to_vec(), scanner.clone()));
        scanner
    }
}

/// Finds nothing: the scanner of a run without a system prompt worth looking for.
struct NoPrompt;

impl Scanner for NoPrompt {
    fn findings(&self, _text: &str) -> Vec<Finding> {
        Vec::new()
    }

    fn open_tail(&self, _text: &str, _from: usize) -> usize {
        0
    }
}

impl ScannerFor for Prompts {
    fn with_scanner<R>(&self, list: &MessageList, scan: impl FnOnce(&dyn Scanner) -> R) -> R {
        match self.scanner(list.system_messages()) {
            Some(scanner) => scan(scanner.as_ref()),
            None => scan(&NoPrompt),
        }
    }

    fn scans_input(&self) -> bool {
        false
    }
}

/// Builds a `system-prompt-scrubber` from its options.
pub(super) fn from_options(id: &str, options: toml::Table) -> Result<Arc<dyn Processor>, BuildError> {
    let options: Options = parse_options(options)?;
    if options.min_words < MIN_PROMPT_WORDS {
        return Err(format!("`min_words` must be at least {MIN_PROMPT_WORDS}").into());
    }
    Ok(Arc::new(Scanning {
        id: id.to_owned(),
        report: "system-prompt",
        scanner: Prompts { min_words: options.min_words, cache: Mutex::new(Vec::new()) },
        strategy: options.strategy,
        redaction: options.redaction,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "You are Ada, the support agent of Acme. Never mention the discount code PINEAPPLE-42 \
                          to anyone, and always answer in two sentences.";

    fn scanner() -> PromptScanner {
        PromptScanner::new(PROMPT, 6).expect("long enough")
    }

    /// A leak of the system prompt is found whatever its case, punctuation or spacing.
    #[test]
    fn leaks_are_found_across_case_punctuation_and_spacing() {
        let text = "Sure! My instructions say: never MENTION the  discount-code pineapple 42 to anyone. Bye";
        let findings = scanner().findings(text);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(
            &text[findings[0].start..findings[0].end],
            "never MENTION the  discount-code pineapple 42 to anyone"
        );
        assert!(scanner().findings("Never mention the discount to anyone, please.").is_empty());
    }

    /// Streamed in deltas split any way, a leak comes out exactly as scrubbing the whole text
    /// would: no word of it reaches the client.
    #[test]
    fn streams_are_scrubbed_as_the_whole_text_is() {
        let texts = [
            "Sure! My instructions say: never MENTION the  discount-code pineapple 42 to anyone. Bye",
            "I am Ada, the support agent of Acme; I always answer in two sentences, you see.",
            "Never mention the discount to anyone, please — you are Ada, the support agent",
        ];
        for text in texts {
            crate::processor::builtin::scan::assert_stream_safe(&scanner(), text, 0..300);
        }
    }

    /// The scrubber holds back only the last words that could begin a leak.
    #[test]
    fn only_words_that_could_begin_a_leak_are_held() {
        let scanner = scanner();
        assert_eq!(scanner.open_tail("Hello there. ", 0), 0);
        assert_eq!(scanner.open_tail("Hello, never mention the ", 0), "never mention the ".len());
        assert_eq!(scanner.open_tail("Hello the", 0), "the".len(), "an unfinished word");
    }
}
